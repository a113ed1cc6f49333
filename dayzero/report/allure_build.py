"""`dayzero report`: the Allure 3 HTML report as one self-contained file, with history.

Allure 3 is the npm package `allure`, pinned in `tools/allure/package.json` (exact version, with
its lock file) and installed by `tools/setup` with `npm ci`. It is not part of the Python package,
so it is looked up explicitly (`--allure DIR`, `$DAYZERO_ALLURE`), else in the checkout the run
is in (`tools/allure` under the working directory or next to the matrix). We write its config per build (a
JSON `allurerc`): the awesome plugin in single-file mode, our categories, and a history file
that every build appends to, so the report's history and trends follow each cell across runs.
The benchmark cards under `cards/` go in as report-level attachments (`allure_cards`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from dayzero.errors import DayzeroError
from dayzero.report import allure_cards
from dayzero.report.allure_budget import BUDGET_BYTES, within_budget
from dayzero.report.allure_env import CATEGORIES

ALLURE_DIR = Path("tools") / "allure"  # in a checkout: where `npm ci` installs the pinned Allure 3
ALLURE_CLI = Path("node_modules") / "allure" / "cli.js"
RESULTS = "allure-results"
REPORT = "allure-report"
HISTORY = "allure-history.jsonl"


class ReportError(DayzeroError):
    """The report could not be built (Allure 3 not installed, or it failed)."""


def allure_cli(allure: Path | None = None, near: Path | None = None) -> Path:
    """Allure 3's cli.js: in `allure` (or $DAYZERO_ALLURE) if given, else in tools/allure of the
    working directory or of `near` (the checkout holding the matrix)."""
    explicit = allure or os.environ.get("DAYZERO_ALLURE")
    if explicit:
        dirs = [Path(explicit)]
    else:
        dirs = [Path.cwd() / ALLURE_DIR] + ([Path(near) / ALLURE_DIR] if near else [])
    for directory in dirs:
        if (directory / ALLURE_CLI).is_file():
            return (directory / ALLURE_CLI).resolve()
    raise ReportError(
        f"Allure 3 is not installed: no {ALLURE_CLI} in {' or '.join(map(str, dirs))}. Run "
        "`npm ci` in tools/allure of a dayzero checkout (tools/setup does), then run from that "
        "checkout or name the folder with --allure DIR or $DAYZERO_ALLURE"
    )


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
    allure: Path | None = None,
    near: Path | None = None,
    budget: int = BUDGET_BYTES,
    say: Callable[[str], None] = lambda message: None,
) -> Path:
    """Generate `<output>/index.html` from `<reports_dir>/allure-results`; returns its path.

    `allure` and `near` say where Allure 3 is installed (see `allure_cli`). Attachments past
    `budget` bytes are left out of the single file (`allure_budget`); `say` tells which."""
    reports_dir = Path(reports_dir).resolve()
    results = reports_dir / RESULTS
    if not any(results.glob("*-result.json")):
        raise ReportError(f"no Allure results in {results}: run the cells first (pytest -m ...)")
    output = Path(output).resolve() if output else reports_dir / REPORT
    history = Path(history).resolve() if history else reports_dir / HISTORY
    node = shutil.which("node")
    if node is None:
        raise ReportError("node (Node.js) is not on PATH: Allure 3 needs it")
    cli = allure_cli(allure, near)
    if output.exists():
        shutil.rmtree(output)  # a single-file build next to a stale multi-file one would confuse readers
    history.parent.mkdir(parents=True, exist_ok=True)
    allure_cards.write_globals(results, reports_dir / allure_cards.CARDS_DIR)  # `dayzero card`'s
    with tempfile.TemporaryDirectory(prefix="dayzero-allure-") as tmp:
        rc = Path(tmp) / "allurerc.json"
        rc.write_text(json.dumps(config(output, history, name), indent=2))
        trimmed = within_budget(results, Path(tmp) / RESULTS, budget)
        if trimmed.dropped_bytes:
            say(trimmed.describe())
        try:
            done = subprocess.run(
                [node, str(cli), "generate", str(trimmed.results), "--config", str(rc)],
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
