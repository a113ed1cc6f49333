"""xdist's controller answers for a worker that died mid-cell (`dayzero.run.crash`).

Glue only: `pytest_configure` registers `CrashedCells` on the controller of a run of the
suites; xdist calls `pytest_handlecrashitem` the moment a worker dies with a cell pending, and
the cell's processes are ended, its leases released, its evidence and Allure result written, and
what was done is added to the failure pytest reports.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dayzero.clock import now_iso
from dayzero.plugin.fixtures import run_context
from dayzero.report import allure_crash
from dayzero.run import crash


class CrashedCells:
    """When each cell started (the evidence keeps it), and what to do when its worker dies."""

    def __init__(self, config: pytest.Config):
        self.config = config
        self.started: dict[str, str] = {}

    def pytest_runtest_logstart(self, nodeid: str, location) -> None:
        self.started[nodeid] = now_iso()

    @pytest.hookimpl(optionalhook=True)
    def pytest_handlecrashitem(self, crashitem: str, report: pytest.TestReport, sched) -> None:
        worker = report.node.gateway.id  # type: ignore[attr-defined] - xdist sets it
        ctx = run_context(self.config, "master")
        try:
            cell = crash.cell_of(crashitem, ctx)
            if cell is None:
                return
            done = crash.reclaim(ctx, cell, worker, self.started.get(crashitem, ""))
            results = getattr(self.config.option, "allure_report_dir", None)
            if results:
                card = ctx.matrix.card(cell)
                allure_crash.write_crashed(
                    Path(results), crashitem, cell, card, done.doc, done.path, ctx.inventory.secrets
                )
            report.longrepr = f"{report.longrepr}\n{done.doc.get('error', '')}\nevidence: {done.path}"
        except Exception as exc:  # noqa: BLE001 - xdist's own report of the crash still stands
            ctx.say(f"could not answer for the crash of worker {worker} running {crashitem}: {exc!r}")
        finally:
            ctx.close()
