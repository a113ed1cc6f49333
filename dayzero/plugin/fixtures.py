"""The plugin's fixtures: the run's context, the baseline, and a cell run turned into pytest's outcome.

Glue only: running a cell is `dayzero.run.cell.run_cell`, progress lines are
`dayzero.run.progress`, the regression rule is `dayzero.report.nightly`.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

import allure
import pytest

from dayzero.checks import INCONCLUSIVE
from dayzero.plugin import signals
from dayzero.plugin.labfault import INCONCLUSIVE_PROPERTY
from dayzero.plugin.options import option_path
from dayzero.plugin.stash import INVENTORY_KEY, LINT_KEY, MATRIX_KEY, RUN_ID_KEY
from dayzero.plugin.tally import record_skip
from dayzero.report import allure_cell
from dayzero.report.nightly import Baseline
from dayzero.run.cell import NoHost, RunContext, candidate_hosts, new_run_id, run_cell
from dayzero.run.progress import Progress, progress_log
from dayzero.run.tally import INCONCLUSIVE_LINE
from dayzero.spec.matrix import Cell


def _terminal(config: pytest.Config, worker: str):
    """Progress to the terminal live, past output capture (as pytest's live logs do); None for
    xdist workers, which cannot reach it."""
    tr = config.pluginmanager.get_plugin("terminalreporter")
    if tr is None or worker != "master":
        return None
    capman = config.pluginmanager.get_plugin("capturemanager")

    def show(message: str) -> None:
        with capman.global_and_fixture_disabled() if capman else contextlib.nullcontext():
            tr.write_line(f"[dayzero] {message}")

    return show


def run_context(config: pytest.Config, worker: str) -> RunContext:
    """The run's context in this process: an xdist worker's, or the controller's own."""
    run_id = (
        os.environ.get("DAYZERO_RUN_ID")
        or getattr(config, "workerinput", {}).get("dayzero_run_id")
        or config.stash.setdefault(RUN_ID_KEY, new_run_id())
    )
    reports = option_path(config, "dayzero_reports")
    return RunContext(
        matrix=config.stash[MATRIX_KEY],
        inventory=config.stash[INVENTORY_KEY],
        reports_dir=reports,
        goldens_dir=option_path(config, "dayzero_goldens"),
        run_id=run_id,
        worker=worker,
        ready_deadline=config.getoption("dayzero_ready_deadline"),
        lease_wait=config.getoption("dayzero_lease_wait"),
        connect_timeout=config.getoption("dayzero_connect_timeout"),
        heartbeat_timeout=config.getoption("dayzero_heartbeat_timeout"),
        say=Progress(progress_log(reports, run_id), worker, _terminal(config, worker)),
        on_evidence=allure_cell.attach_story,
    )


@pytest.fixture(scope="session")
def dayzero_context(request: pytest.FixtureRequest):
    ctx = run_context(request.config, os.environ.get("PYTEST_XDIST_WORKER", "master"))
    yield ctx
    ctx.close()


@pytest.fixture(scope="session")
def dayzero_baseline(request: pytest.FixtureRequest) -> Baseline | None:
    """`--baseline`: the previous run each cell is compared with, or None."""
    given = request.config.getoption("dayzero_baseline")
    if not given:
        return None
    band = request.config.getoption("dayzero_regression_band")
    return Baseline(Path(request.config.invocation_params.dir) / given, band)


@pytest.fixture
def run_cell_checked(
    dayzero_context: RunContext, dayzero_baseline: Baseline | None, request: pytest.FixtureRequest
):
    """Run a cell and turn its outcome into pytest's: skip, fail (product) or error (lab).

    A cell `--lint` refused fails without a launch. Every failed or broken cell gets the Allure
    category label of why (lab fault, correctness, performance floor, regression against
    `--baseline`).
    """

    def run(cell: Cell):
        allure_cell.label_cell(cell, dayzero_context.matrix.card(cell))
        refused = request.config.stash.get(LINT_KEY, {}).get(cell.id)
        if refused:
            pytest.fail(
                "not launched: its engine would refuse it (--lint)\n  " + "\n  ".join(refused), pytrace=False
            )
        try:
            candidate_hosts(dayzero_context, cell)
        except NoHost as exc:
            record_skip(request.node, exc.reason)
            pytest.skip(str(exc))
        since = signals.received()
        try:
            outcome = run_cell(dayzero_context, cell)
        except Exception:
            allure_cell.label_failure(allure_cell.INFRASTRUCTURE)
            raise
        signals.raise_if_swallowed(since)
        # a product failure reads as its check lines and where its evidence is, not as dayzero's
        # source (fixtures, the test function); `--tb=long` (any --tb asked for) still shows it
        trace = request.config.option.tbstyle != "auto"
        evidence = f"\n  evidence: {outcome.evidence_path}" if outcome.evidence_path is not None else ""
        if outcome.error:
            allure_cell.label_failure(allure_cell.CORRECTNESS)
            pytest.fail(outcome.error + evidence, pytrace=False)
        failed = outcome.failed_checks
        if failed:
            allure_cell.label_failure(allure_cell.failure_category(c.to_json() for c in failed))
            lines = [f"{c.name}: {c.message}" for c in failed]
            head = f"{cell.id}: {len(failed)} check(s) failed"
            pytest.fail("\n  ".join([head, *lines]) + evidence, pytrace=trace)
        if unsure := [c for c in outcome.checks if c.verdict == INCONCLUSIVE]:
            # never green, never a product failure: the run exits `exitcodes.INCONCLUSIVE`
            request.node.user_properties.append((INCONCLUSIVE_PROPERTY, ", ".join(c.name for c in unsure)))
            lines = [f"{c.name}: {c.message}" for c in unsure]
            head = f"{INCONCLUSIVE_LINE}{cell.id}: {len(unsure)} floor(s) neither passed nor failed"
            pytest.fail("\n  ".join([head, *lines]) + evidence, pytrace=False)
        if dayzero_baseline is not None and outcome.evidence_path is not None:
            _check_regressions(dayzero_baseline, json.loads(Path(outcome.evidence_path).read_text()))
        return outcome

    return run


def _check_regressions(baseline: Baseline, current: dict) -> None:
    """A cell whose metrics got worse than the baseline's beyond noise fails as a regression."""
    verdict = baseline.compare(current)
    if verdict is None:
        return
    allure.attach(
        json.dumps(verdict.rows(), indent=2),
        f"comparison with baseline run {verdict.baseline_run}",
        allure.attachment_type.JSON,
    )
    if verdict.regressions:
        allure_cell.label_failure(allure_cell.REGRESSION)
        raise AssertionError(verdict.failure())
