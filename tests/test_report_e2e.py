"""After a real cpu run: the single-file Allure report as a reader sees it, the acceptance table,
and no planted secret anywhere under reports/.

One real `pytest -m "cpu and llama.cpp and not high_throughput"` run (llama-server, SmolLM2,
two cells, the short protocol, secrets planted) feeds every check here but the benchmark
card's, which reads the session's main job (its sweeps). The report is opened in headless
Chromium (Debian `chromium`) and read through its own UI: the tree, each cell's page, its
attachments opened one by one. The screenshots are kept under the run's reports/artifacts/ and
copied to the repository's reports/artifacts/ so they survive the test.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from dayzero.cache import cache_root, model_path, server_binary
from dayzero.report import plots
from devlab.browser import AllureReportPage, Browser, chromium_path

from .conftest import REPO, needs_engine, run_pytest, write_yaml
from .submission_corpus.lab import relaxed_matrix
from .test_acceptance import html_statuses, md_statuses
from .test_secrets import files_containing

pytestmark = [pytest.mark.e2e, needs_engine]

# One mode's two strategies: a baseline cell and a speculative one are what the report and the
# table tell apart (the main job runs high_throughput; 30 s of this module for nothing new).
CPU_CELLS = [
    "smollm2-135m/cpu+llama.cpp/low_latency/baseline",
    "smollm2-135m/cpu+llama.cpp/low_latency/ngram_spec",
]
# Cells of two hosts: on this one-host inventory they are skipped with a reason, so the report
# lists them (as skipped) and the table keeps them Pending.
TWO_HOST_CELLS = [
    "smollm2-135m/cpu+llama.cpp/rpc_split/baseline",
    "smollm2-135m/cpu+llama.cpp/routed/baseline",
]
EVERY_CELL_ATTACHMENTS = {
    "rendered commands",
    "evidence",
    "environment facts",
    "metric summary",
    "golden diff",
    "throughput versus concurrency",
    "latency CDF",
}
RECIPE_SECRET = "rcp-e2e-secret-Q81mZ"
SETUP_SECRET = "stp-e2e-secret-Vb62Tn"
ARTIFACTS = REPO / "reports" / "artifacts"


def dayzero(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "dayzero.cli", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, **(env or {})},
    )


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory):
    """The llama.cpp low_latency cpu cells (two run; two more need two hosts), with a secret in
    the recipe's env and one in the host's set-up line."""
    chromium_path()  # fails naming what to install, before the expensive part
    if not shutil.which("node"):
        pytest.fail("node (Node.js) is needed for Allure 3: run tools/setup")
    root = tmp_path_factory.mktemp("cpu-report")
    # The short protocol (one repetition, no sweeps): the report of a run is under test here, not
    # this machine's speed; the benchmark card is read from the main job's sweeps below.
    mdir = relaxed_matrix(root / "matrix")
    card_path = mdir / "models" / "smollm2-135m.yaml"
    card = yaml.safe_load(card_path.read_text())
    card["recipe"]["env"] = {"HUB_AUTH": {"secret_from_env": "DZ_E2E_RECIPE_SECRET"}}
    card_path.write_text(yaml.safe_dump(card, sort_keys=False))
    inventory = write_yaml(
        root / "hosts.yaml",
        {
            "hosts": {
                "local": {
                    "transport": "local",
                    "address": "127.0.0.1",
                    "hardware": "cpu",
                    "accelerators": 1,
                    "slots": 1,
                    # this test is about the report of whatever verdicts come: a floor missed on
                    # this shared machine stays a failure here (the contention check is off)
                    "max_foreign_load": 0,
                    # the shared workdir: leases are shared with every other run on this machine
                    "workdir": str(cache_root() / "work"),
                    "engine_setup": f"export LAB_TOKEN={SETUP_SECRET}; "
                    f'export PATH="{server_binary().parent}:$PATH"',
                    "vars": {"model_root": str(model_path().parent)},
                }
            }
        },
    )
    reports = root / "reports"
    env = {"DZ_E2E_RECIPE_SECRET": RECIPE_SECRET}
    result = run_pytest(
        "-m", "cpu and llama.cpp and not high_throughput", "-q", "-rA", f"--matrix={mdir}",
        f"--hosts={inventory}", f"--reports={reports}", env=env, timeout=1800,
    )  # fmt: skip
    # A floor missed on a machine shared with other load is a verdict, not a harness fault: the
    # report and the table must tell it as it is. A lab fault (broken) is not acceptable here.
    assert result.returncode in (0, 1), result.stdout[-4000:] + result.stderr[-2000:]
    verdicts = {
        d["cell"]: d["verdict"]
        for d in map(json.loads, map(Path.read_text, (reports / "evidence").glob("*.json")))
    }
    assert sorted(verdicts) == sorted(CPU_CELLS), result.stdout[-4000:]
    assert "broken" not in verdicts.values(), result.stdout[-4000:]
    built = dayzero(f"--matrix={mdir}", "report", f"--reports={reports}", env=env)
    assert built.returncode == 0, built.stdout + built.stderr
    return {"matrix": mdir, "reports": reports, "verdicts": verdicts}


def keep(path):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shutil.copy(path, ARTIFACTS / path.name)


def test_the_html_report_shows_every_cpu_cell_with_its_charts_and_attachments(cpu_run):
    reports = cpu_run["reports"]
    index = reports / "allure-report" / "index.html"
    assert index.is_file() and not (reports / "allure-report" / "data").exists()  # one file
    shots = reports / "artifacts"
    with Browser(height=2400) as browser:
        page = AllureReportPage(browser, index)
        assert sorted(page.open_tree()) == sorted(CPU_CELLS + TWO_HOST_CELLS)
        keep(browser.screenshot(shots / "report-tree.png"))
        for cell in CPU_CELLS:
            names = page.open_result(cell)
            assert set(names) >= EVERY_CELL_ATTACHMENTS, f"{cell}: {names}"
            assert any(n.startswith("server log (full)") for n in names)
            assert any(n.startswith("raw records: perf-") for n in names)
            for chart in ("throughput versus concurrency", "latency CDF"):
                shown = page.open_attachment(chart)["images"]
                assert shown == [[plots.WIDTH, plots.HEIGHT]], f"{cell}: {chart} rendered as {shown}"
            commands = page.open_attachment("rendered commands")["text"]
            assert "llama-server" in commands and "--port" in commands
            assert "golden:" in page.open_attachment("golden diff")["text"]
            if cell.endswith("low_latency/baseline"):
                keep(browser.screenshot(shots / "report-cell-charts.png"))
            page.open_tree()
    assert (ARTIFACTS / "report-cell-charts.png").stat().st_size > 10_000


def test_acceptance_shows_verified_pending_unsupported_then_stale(cpu_run):
    reports, mdir = cpu_run["reports"], cpu_run["matrix"]
    got = md_statuses(reports / "acceptance.md")
    derived = {c: "Verified" if v == "passed" else "Failed" for c, v in cpu_run["verdicts"].items()}
    assert {cell: got[cell] for cell in CPU_CELLS} == derived
    assert "Verified" in derived.values(), derived  # at least one cell made it on this machine
    assert {cell: got[cell] for cell in TWO_HOST_CELLS} == dict.fromkeys(TWO_HOST_CELLS, "Pending")
    assert got["kimi-k3.1-pro/trainium3/balanced/baseline"] == "Unsupported"
    assert got["kimi-k3.1-pro/h200/balanced/baseline"] == "Pending"
    assert html_statuses(reports / "acceptance.html") == got

    card_path = mdir / "models" / "smollm2-135m.yaml"
    card = yaml.safe_load(card_path.read_text())
    card["strategies"]["ngram_spec"]["args"] += ["--draft-max", "8"]
    card_path.write_text(yaml.safe_dump(card, sort_keys=False))
    done = dayzero(f"--matrix={mdir}", "acceptance", f"--reports={reports}")
    assert done.returncode == 0, done.stderr
    got = md_statuses(reports / "acceptance.md")
    assert got["smollm2-135m/cpu+llama.cpp/low_latency/ngram_spec"] == "Stale"
    assert (
        got["smollm2-135m/cpu+llama.cpp/low_latency/baseline"]
        == derived["smollm2-135m/cpu+llama.cpp/low_latency/baseline"]
    )
    assert (
        html_statuses(reports / "acceptance.html")["smollm2-135m/cpu+llama.cpp/low_latency/ngram_spec"]
        == "Stale"
    )


def test_no_planted_secret_in_any_file_under_reports(cpu_run):
    reports = cpu_run["reports"]
    assert len(list(reports.rglob("*"))) > 50
    assert files_containing(reports, [RECIPE_SECRET, SETUP_SECRET]) == []


def test_the_benchmark_card_of_the_cpu_cells_shows_every_measured_point(main_job, tmp_path):
    """`dayzero card` writes the cpu card from the main job's sweeps: one concurrency, one rate and
    one context sweep, every measured point a table row and a marker on its chart in Chromium.
    (On a copy of the main job's reports: the submission round trip packs the originals.)"""
    from .test_benchcard import check_every_point_shown

    assert main_job.result.returncode == 0, main_job.result.stdout[-4000:]
    reports = tmp_path / "reports"
    shutil.copytree(main_job.reports, reports)
    built = dayzero("card", f"--reports={reports}")
    assert built.returncode == 0, built.stdout + built.stderr
    html = reports / "cards" / "smollm2-135m" / "cpu.html"
    doc = json.loads(html.with_suffix(".json").read_text())
    kinds = {p["kind"] for p in doc["points"]}
    assert kinds == {"concurrency", "rate", "context"}, doc["sweeps"]
    assert all(p["server_ttft_gap_ms"] is not None for p in doc["points"])  # llama-server's timings
    shot = reports / "artifacts" / "benchmark-card-cpu.png"
    shot.parent.mkdir(parents=True, exist_ok=True)
    check_every_point_shown(html, shot)
    keep(shot)
