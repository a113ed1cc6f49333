"""The controller's tally of the selected cells, its terminal summary, and the exit status of a
run that tested nothing or was only broken by its lab (`dayzero.run.tally`).

Glue only: `pytest_configure` registers `CellTally` on the controller of a run of the suites
(xdist's workers send it their reports). A run in which no selected cell ran exits 5 (pytest's
"no tests ran") with one line saying why, unless `--allow-empty`; a run whose only failures are
lab faults (`dayzero.plugin.labfault`) exits 6 (`exitcodes.LAB_FAULT`), one whose only failures
are inconclusive floors (or those and lab faults) exits 7 (`exitcodes.INCONCLUSIVE`); a dry run is tallied
from its plan (`dayzero.run.preview.no_run`), `--collect-only` keeps pytest's own status.
"""

from __future__ import annotations

import pytest

from dayzero.plugin.labfault import inconclusive_of, lab_fault_of
from dayzero.plugin.options import option_path
from dayzero.run.preview import no_run
from dayzero.run.tally import SKIPPED, UNSUPPORTED, WOULD_RUN, Tally, cell_outcome, exit_status, tally
from dayzero.spec.inventory import Inventory
from dayzero.spec.matrix import Cell, Matrix

SKIP_PROPERTY = "dayzero_skip"  # a user property: why a cell was skipped, without its id
NOT_REACHED = "not reached: the run ended before it (interrupted, or stopped at a failure)"


def record_skip(item: pytest.Item, reason: str) -> None:
    """Keep why the cell is skipped on its report (it travels from an xdist worker)."""
    item.user_properties.append((SKIP_PROPERTY, reason))


def _skip_reason(report: pytest.TestReport) -> str:
    for name, value in report.user_properties:
        if name == SKIP_PROPERTY:
            return str(value)
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return ""


class CellTally:
    """What became of each selected cell, counted from its test reports."""

    def __init__(self, config: pytest.Config, matrix: Matrix, inventory: Inventory):
        self.config = config
        self.matrix = matrix
        self.inventory = inventory
        self.cells = {c.id: c for c in matrix.cells}
        self.outcomes: dict[str, tuple[str, str]] = {}
        self.product_failures = 0  # failed reports of any test that are not lab faults
        self.lab_faults = 0
        self.inconclusive = 0  # failed reports of cells whose floors were inconclusive, nothing failed
        self.unsure: list[str] = []  # their lines: the cell, each floor and its interval
        self.selected: list[str] = []  # every selected cell's id, reported or not
        self.result: Tally | None = None

    def _cell(self, nodeid: str) -> Cell | None:
        head, _, param = nodeid.partition("[")
        return self.cells.get(param[:-1]) if head and param.endswith("]") else None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        fault = lab_fault_of(report)
        unsure = inconclusive_of(report)
        if report.failed:
            self.lab_faults += bool(fault)
            self.inconclusive += bool(unsure)
            if unsure:
                self.unsure += str(report.longrepr).splitlines()
            self.product_failures += not fault and not unsure
        cell = self._cell(report.nodeid)
        if cell is None:
            return
        if report.skipped and not cell.supported:
            self.outcomes[cell.id] = (UNSUPPORTED, "")
            return
        previous = self.outcomes.get(cell.id)
        self.outcomes[cell.id] = cell_outcome(
            previous, report.when, report.outcome, _skip_reason(report), fault
        )

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self._select(item.nodeid for item in session.items)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node, ids: list[str]) -> None:
        """Under xdist the controller collects nothing itself: each worker says what it selected."""
        if not self.selected:
            self._select(ids)

    def _select(self, nodeids) -> None:
        self.selected = [cell.id for cell in map(self._cell, nodeids) if cell is not None]

    def _planned(self, session: pytest.Session) -> list[tuple[str, str]]:
        """A dry run's outcomes: what each selected cell would do."""
        outcomes = []
        for item in session.items:
            cell = getattr(item, "callspec", None) and item.callspec.params.get("cell")
            if not isinstance(cell, Cell):
                continue
            if not cell.supported:
                outcomes.append((UNSUPPORTED, ""))
            elif why := no_run(self.matrix, self.inventory, cell):
                outcomes.append((SKIPPED, why))
            else:
                outcomes.append((WOULD_RUN, ""))
        return outcomes

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        config = self.config
        if session.exitstatus == pytest.ExitCode.USAGE_ERROR:
            return  # nothing was selected: the error says why
        allow_empty = config.getoption("dayzero_allow_empty")
        if config.option.collectonly:
            if allow_empty and session.exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
                session.exitstatus = pytest.ExitCode.OK
            return
        dry_run = config.getoption("dayzero_dry_run")
        for cell_id in self.selected:  # a summary counts what was selected, not what was reached
            self.outcomes.setdefault(cell_id, (SKIPPED, NOT_REACHED))
        outcomes = self._planned(session) if dry_run else list(self.outcomes.values())
        self.result = tally(
            outcomes,
            str(option_path(config, "dayzero_hosts")),
            str(option_path(config, "dayzero_matrix")),
            dry_run=dry_run,
            cells=() if dry_run else list(self.outcomes),
        )
        session.exitstatus = exit_status(
            session.exitstatus, self.product_failures, self.lab_faults, self.inconclusive
        )
        if session.exitstatus not in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
            return  # failed or interrupted already says it
        if self.result.empty:
            session.exitstatus = pytest.ExitCode.OK if allow_empty else pytest.ExitCode.NO_TESTS_COLLECTED

    def pytest_terminal_summary(self, terminalreporter) -> None:
        result = self.result
        if result is None:
            return
        for line in result.summary():
            fault = line.startswith(("broken: ", "  "))
            terminalreporter.write_line(f"[dayzero] {line}", yellow=fault, bold=line.startswith("broken: "))
        for line in self.unsure:  # never green: each floor neither passed nor failed, and why
            terminalreporter.write_line(f"[dayzero] {line}", yellow=True, bold=not line.startswith(" "))
        if result.empty:
            allowed = " (allowed: --allow-empty)" if self.config.getoption("dayzero_allow_empty") else ""
            terminalreporter.write_line(result.why_empty() + allowed, red=not allowed, bold=True)
