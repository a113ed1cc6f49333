"""Run-level Allure files: `environment.properties`, `executor.json`, categories.

Written by the plugin at the end of a run, into the results folder, so a report built from
that folder alone (Allure 2 or 3) shows where and how the run happened. Categories exist in two
forms: `categories.json` in the results folder for Allure 2 (status + message regex), and the
label-based rules of `CATEGORIES` that `allure_build` puts in Allure 3's config.
"""

from __future__ import annotations

import json
import platform
import sys
from collections.abc import Iterable, Mapping
from importlib import metadata
from pathlib import Path

from dayzero import __version__
from dayzero.clock import moment
from dayzero.errors import ConfigError
from dayzero.evidence import iter_evidence
from dayzero.redact import redact
from dayzero.report.allure_cell import (
    CATEGORY_LABEL,
    CORRECTNESS,
    INFRASTRUCTURE,
    PERFORMANCE,
    REGRESSION,
)


def _label(value: str) -> dict:
    return {CATEGORY_LABEL: f"^{value}$"}


# Allure 3 (allurerc): the plugin labels every failed or broken cell with its category.
CATEGORIES = [
    {
        "id": INFRASTRUCTURE,
        "name": "Infrastructure (lab faults: host, SSH, engine missing, port taken)",
        "matchers": [{"statuses": ["broken"]}, {"labels": _label(INFRASTRUCTURE)}],
    },
    {
        "id": CORRECTNESS,
        "name": "Correctness (wrong answers, goldens, recipe not serving)",
        "matchers": {"statuses": ["failed"], "labels": _label(CORRECTNESS)},
    },
    {
        "id": PERFORMANCE,
        "name": "Performance floor missed",
        "matchers": {"statuses": ["failed"], "labels": _label(PERFORMANCE)},
    },
    {
        "id": REGRESSION,
        "name": "Regression (worse than the previous night beyond its noise band)",
        "matchers": {"statuses": ["failed"], "labels": _label(REGRESSION)},
    },
]

# Allure 2 (categories.json): no label matching there, so failure messages are matched instead.
CATEGORIES_ALLURE2 = [
    {"name": CATEGORIES[0]["name"], "matchedStatuses": ["broken"]},
    {"name": CATEGORIES[3]["name"], "matchedStatuses": ["failed"], "messageRegex": "(?s).*regression.*"},
    {"name": CATEGORIES[2]["name"], "matchedStatuses": ["failed"], "messageRegex": "(?s).*floor:.*"},
    {"name": CATEGORIES[1]["name"], "matchedStatuses": ["failed"]},
]


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "unknown"


def environment(facts: Mapping[str, str], docs: Iterable[dict]) -> dict[str, str]:
    """Controller facts plus what this run's evidence recorded (engines, hosts, hardware)."""
    env = {
        "dayzero": __version__,
        "python": platform.python_version(),
        "pytest": _version("pytest"),
        "allure-pytest": _version("allure-pytest"),
        "platform": platform.platform(),
        **facts,
    }
    docs = list(docs)
    engines = sorted({f"{d['hardware']}: {d['engine']['name']} {d['engine']['version']}" for d in docs})
    hosts = sorted({h["name"] for d in docs for h in d["hosts"]})
    for i, engine in enumerate(engines):
        env[f"engine.{i}"] = engine
    if hosts:
        env["lab hosts"] = ", ".join(hosts)
    if docs:
        env["cells run"] = str(len(docs))
        env["verdicts"] = ", ".join(
            f"{v} {sum(d['verdict'] == v for d in docs)}" for v in ("passed", "failed", "broken")
        )
    return env


def properties(env: Mapping[str, str], secrets=()) -> str:
    """Java .properties text (what Allure reads): escaped keys, one line per value, redacted."""

    def esc(text: str, key: bool = False) -> str:
        text = redact(str(text), secrets).replace("\\", "\\\\").replace("\n", "\\n")
        return text.replace("=", "\\=").replace(":", "\\:").replace(" ", "\\ ") if key else text

    return "".join(f"{esc(k, key=True)}={esc(v)}\n" for k, v in env.items())


def executor(run_id: str, build_url: str = "", report_url: str = "") -> dict:
    out = {
        "name": "dayzero",
        "type": "dayzero",
        "buildName": f"dayzero run {run_id}",
        "buildOrder": run_id,
        "reportName": "dayzero conformance",
    }
    if build_url:
        out["buildUrl"] = build_url
    if report_url:
        out["reportUrl"] = report_url
    return out


def write_results_extras(
    results_dir: Path,
    run_id: str,
    facts: Mapping[str, str],
    docs: Iterable[dict],
    secrets=(),
    build_url: str = "",
) -> list[Path]:
    results_dir = Path(results_dir)
    results_dir.mkdir(parents=True, exist_ok=True)
    files = {
        "environment.properties": properties(environment(facts, docs), secrets),
        "executor.json": redact(json.dumps(executor(run_id, build_url), indent=2), secrets),
        "categories.json": json.dumps(CATEGORIES_ALLURE2, indent=2),
    }
    out = []
    for name, text in files.items():
        path = results_dir / name
        path.write_text(text + ("" if text.endswith("\n") else "\n"))
        out.append(path)
    return out


def write_run_extras(
    results_dir: Path,
    reports: Path,
    started: str,
    facts: Mapping[str, str],
    secrets=(),
    build_url: str = "",
) -> list[Path]:
    """The extras of one run: from the evidence written since it started (a reports dir keeps
    older runs' evidence too)."""
    try:
        docs = [doc for _, doc in iter_evidence(reports) if moment(doc["run"]["started"]) >= moment(started)]
    except ConfigError:
        docs = []
    run_ids = ", ".join(sorted({d["run"]["id"] for d in docs})) or "none"
    return write_results_extras(results_dir, run_ids, facts, docs, secrets, build_url)


def controller_facts(config_args: Iterable[str] = ()) -> dict[str, str]:
    return {"command": redact(" ".join(["pytest", *config_args])), "executable": sys.executable}
