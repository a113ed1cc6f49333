"""A lab fault reads as one: a cell the lab broke (`InfrastructureError`: a host unreachable, an
engine missing, the lease wait run out) is reported BROKEN with its one line, not FAILED with a
traceback through the library's source, and is counted apart from product failures by the
controller's `CellTally` (its summary, the exit status `exitcodes.LAB_FAULT`).

Glue only: the cause travels on the report as a user property (xdist sends those to the
controller); Allure still sees the exception and files the cell as broken.
"""

from __future__ import annotations

import pytest

from dayzero.errors import InfrastructureError
from dayzero.plugin.stash import INVENTORY_KEY
from dayzero.redact import redact
from dayzero.run.tally import LAB_FAULT_LINE
from dayzero.spec.matrix import Cell

LAB_FAULT_PROPERTY = "dayzero_lab_fault"
INCONCLUSIVE_PROPERTY = "dayzero_inconclusive"  # set by the fixture on a cell of inconclusive floors


def inconclusive_of(report: pytest.TestReport) -> str:
    """The inconclusive floors a failed report stands for, or '' (never a product failure)."""
    if not report.failed:
        return ""
    return next((str(v) for name, v in report.user_properties if name == INCONCLUSIVE_PROPERTY), "")


def lab_fault_of(report: pytest.TestReport) -> str:
    """The lab fault a failed report was broken by, or ''."""
    if not report.failed:
        return ""
    for name, value in report.user_properties:
        if name == LAB_FAULT_PROPERTY:
            return str(value)
    return ""


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    exc = call.excinfo.value if call.excinfo is not None else None
    callspec = getattr(item, "callspec", None)
    is_cell = callspec is not None and isinstance(callspec.params.get("cell"), Cell)
    if report.failed and is_cell and isinstance(exc, InfrastructureError):
        inventory = item.config.stash.get(INVENTORY_KEY, None)
        why = redact(str(exc).strip(), inventory.secrets if inventory is not None else ())
        report.longrepr = LAB_FAULT_LINE + why
        report.user_properties.append((LAB_FAULT_PROPERTY, why))
    return report


@pytest.hookimpl(tryfirst=True)
def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config):
    if lab_fault_of(report):
        return "broken", "B", ("BROKEN", {"yellow": True})
    if inconclusive_of(report):
        return "inconclusive", "I", ("INCONCLUSIVE", {"yellow": True})
    return None
