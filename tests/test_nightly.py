"""Nightly: `tools/nightly` three times; the third night's host is slower and only it regresses.

The host's slowdown is injected through the inventory (the stub server's time to first token is
a host var), so the recipe, and its digest, are the same every night: what changed is the lab,
which is exactly what a nightly comparison is for.
"""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from devlab.browser import AllureReportPage, Browser

from .conftest import REPO
from .stub_cells import stub_card, stub_inventory, stub_matrix

FAST, SLOW = 0.25, 1.0  # seconds to first token


def nightly(root, inventory, matrix):
    return subprocess.run(
        [
            str(REPO / "tools" / "nightly"),
            f"--hosts={inventory}",
            f"--matrix={matrix}",
            f"--root={root}",
            "-n",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=400,
    )


def night_dirs(root):
    return sorted(p for p in (root / "nights").iterdir() if p.is_dir())


def allure_results(night):
    return [json.loads(p.read_text()) for p in (night / "allure-results").glob("*-result.json")]


@pytest.mark.e2e  # three nights, each built into an Allure report (Node.js)
def test_a_slower_host_is_flagged_as_a_regression_and_an_unchanged_one_is_not(tmp_path):
    card = stub_card()
    for floor in card["floors"]:
        floor["num_prompts"] = 4
    matrix = stub_matrix(tmp_path, card)
    fast = stub_inventory(tmp_path / "fast", ttft=FAST)
    slow = stub_inventory(tmp_path / "slow", ttft=SLOW)
    root = tmp_path / "nightly"

    first = nightly(root, fast, matrix)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    second = nightly(root, fast, matrix)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    third = nightly(root, slow, matrix)
    assert third.returncode == 1, third.stdout[-3000:] + third.stderr[-3000:]

    n1, n2, n3 = night_dirs(root)
    r1, r2, r3 = (json.loads((n / "regressions.json").read_text()) for n in (n1, n2, n3))
    assert r1["previous"] is None and r1["regressions"] == []
    # two unchanged nights: every metric compared, none flagged
    assert r2["previous"] == str(n1) and len(r2["compared"]) > 10
    assert r2["regressions"] == [], json.dumps(r2["regressions"], indent=1)
    # the slow night: flagged against the night before, throughput and TTFT among the metrics
    assert r3["previous"] == str(n2)
    flagged = {(r["cell"], r["metric"]) for r in r3["regressions"]}
    for cell in ("stubby/cpu/low_latency/baseline", "stubby/cpu/high_throughput/baseline"):
        assert (cell, "output_throughput") in flagged
        assert (cell, "median_ttft_ms") in flagged
    assert "REGRESSION stubby/cpu/low_latency/baseline" in third.stderr

    # regressions land in their own Allure category; earlier nights have none
    for result in allure_results(n3):
        labels = {(x["name"], x["value"]) for x in result["labels"]}
        assert result["status"] == "failed" and ("dayzero_category", "regression") in labels
        assert "regression against run" in result["statusDetails"]["message"]
    for night in (n1, n2):
        assert {r["status"] for r in allure_results(night)} == {"passed"}
    # the evidence itself still says the floors passed: a regression is a trend, not a verdict
    docs = [json.loads(p.read_text()) for p in (n3 / "evidence").glob("*.json")]
    assert {d["verdict"] for d in docs} == {"passed"}

    # history for the report's trends: one entry per night, every night's report built
    history = (root / "allure-history.jsonl").read_text().splitlines()
    assert len(history) == 3
    for night in (n1, n2, n3):
        assert (night / "allure-report" / "index.html").stat().st_size > 100_000
    assert (root / "latest").resolve() == n3.resolve()

    # as a reader sees the third night's report: the Regression category, each cell's history
    with Browser() as browser:
        page = AllureReportPage(browser, n3 / "allure-report" / "index.html")
        assert re.search(r"Regression \(worse than the previous night[^\n]*\n2\b", page.categories())
        assert page.history("stubby/cpu/low_latency/baseline") == 2


def test_a_lab_fault_night_whose_report_cannot_be_built_keeps_6_as_documented(tmp_path, monkeypatch, capsys):
    """Issue 45: such a night exited 6 where the README said 3, and tools/nightly's header named
    no 6. The README and the header now say what the code does: 3 only after a green run."""
    from types import SimpleNamespace

    from dayzero import exitcodes
    from dayzero.report import allure_build
    from dayzero.report import nightly as report_nightly

    def no_report(*args, **kwargs):
        raise allure_build.ReportError("npm not found")

    args = SimpleNamespace(
        root=str(tmp_path / "nightly"),
        markers="",
        workers="1",
        band=10.0,
        store=None,
        suites_root=str(REPO),
        no_report=False,
        pytest_args=[],
        hosts="hosts/local.yaml",
        nightly_matrix=None,
        matrix=str(REPO / "matrix"),
    )
    monkeypatch.setattr(allure_build, "build", no_report)
    cases = [(exitcodes.LAB_FAULT, 6), (exitcodes.OK, 3), (exitcodes.TESTS_FAILED, 1)]
    for run_status, night_status in cases:
        ran = SimpleNamespace(returncode=run_status)
        monkeypatch.setattr(report_nightly.subprocess, "run", lambda cmd, ran=ran, **kw: ran)
        assert report_nightly.run_nightly(args) == night_status
        assert "report not built: npm not found" in capsys.readouterr().err
    header = (REPO / "tools" / "nightly").read_text().partition("# Exit status:")[2].partition("\n#\n")[0]
    named = {int(n) for n in re.findall(r"\b(\d)\b", header)}
    assert {status for status, _ in exitcodes.EXIT_STATUSES.values()} - {exitcodes.INTERNAL_ERROR} <= named
    assert "3 when the report could not be built after a green run" in header
