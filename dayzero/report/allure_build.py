"""`dayzero report`: the Allure 3 HTML report as one self-contained file, with history.

Allure 3 is the npm package `allure`, pinned in `tools/allure/package.json` (exact version, with
its lock file) and installed by `tools/setup` with `npm ci`. We write its config per build (a
JSON `allurerc`): the awesome plugin in single-file mode, our categories, and a history file
that every build appends to, so the report's history and trends follow each cell across runs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from dayzero.errors import DayzeroError
from dayzero.report.allure_env import CATEGORIES

REPO = Path(__file__).resolve().parents[2]
ALLURE_CLI = REPO / "tools" / "allure" / "node_modules" / "allure" / "cli.js"
RESULTS = "allure-results"
REPORT = "allure-report"
HISTORY = "allure-history.jsonl"


class ReportError(DayzeroError):
    """The report could not be built (Allure 3 not installed, or it failed)."""


def allure_cli() -> Path:
    cli = Path(os.environ.get("DAYZERO_ALLURE_CLI") or ALLURE_CLI)
    if not cli.is_file():
        raise ReportError(
            f"Allure 3 is not installed ({cli} missing): run tools/setup (npm ci in tools/allure)"
        )
    return cli


def config(output: Path, history: Path | None, name: str) -> dict:
    cfg = {
        "name": name,
        "output": str(output),
        "categories": CATEGORIES,
        "plugins": {
            "awesome": {
                "options": {
                    "singleFile": True,
                    "reportName": name,
                    "groupBy": ["parentSuite", "suite", "subSuite"],
                }
            }
        },
    }
    if history is not None:
        cfg["historyPath"] = str(history)
    return cfg


def build(
    reports_dir: Path,
    output: Path | None = None,
    *,
    history: Path | None = None,
    name: str = "dayzero",
    timeout: float = 600,
) -> Path:
    """Generate `<output>/index.html` from `<reports_dir>/allure-results`; returns its path."""
    reports_dir = Path(reports_dir).resolve()
    results = reports_dir / RESULTS
    if not any(results.glob("*-result.json")):
        raise ReportError(f"no Allure results in {results}: run the cells first (pytest -m ...)")
    output = Path(output).resolve() if output else reports_dir / REPORT
    history = Path(history).resolve() if history else reports_dir / HISTORY
    node = shutil.which("node")
    if node is None:
        raise ReportError("node (Node.js) is not on PATH: Allure 3 needs it")
    cli = allure_cli()
    if output.exists():
        shutil.rmtree(output)  # a single-file build next to a stale multi-file one would confuse readers
    history.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="dayzero-allure-") as tmp:
        rc = Path(tmp) / "allurerc.json"
        rc.write_text(json.dumps(config(output, history, name), indent=2))
        try:
            done = subprocess.run(
                [node, str(cli), "generate", str(results), "--config", str(rc)],
                cwd=tmp,
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            raise ReportError(f"allure generate took more than {timeout:.0f}s") from None
    index = output / "index.html"
    if done.returncode != 0 or not index.is_file():
        tail = (done.stdout + done.stderr).strip()[-1500:]
        raise ReportError(f"allure generate exited {done.returncode}: {tail}")
    return index
