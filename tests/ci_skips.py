"""Under CI, a skip is a failure: every test here skips only when a real component is missing
(llama-server, the engines venv, sshd, slurmctld, podman, Allure, a network namespace), and CI's
`tools/setup` installs them all, so a skip there means a component CI was meant to test was not.
The failure names the test and the skip's reason, which says what is missing.
"""

from __future__ import annotations

import os
from copy import copy

import pytest


def failed(report, nodeid: str):
    """The skip `report` turned into a failure that names the test and what was missing."""
    if report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        reason = reason.removeprefix("Skipped: ")
        report.outcome = "failed"
        report.longrepr = (
            f"{nodeid} skipped under CI: {reason}\n"
            "CI runs every test of a real component: tools/setup installs what they need"
        )
    return report


class SkipsFailUnderCI:
    def __init__(self) -> None:
        self.modules: list[str] = []  # modules skipped as a whole: not a test report of their own

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo):
        return failed((yield), item.nodeid)

    @pytest.hookimpl(wrapper=True)
    def pytest_make_collect_report(self, collector: pytest.Collector):
        report = yield
        if report.skipped:  # failing it would be a collection error, which stops the whole run
            self.modules.append(failed(copy(report), collector.nodeid).longrepr)
        return report

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if self.modules:
            terminalreporter.write_sep("=", "skipped under CI: the run fails", red=True)
            for line in self.modules:
                terminalreporter.write_line(line)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.modules and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


def configure(config: pytest.Config) -> None:
    if os.environ.get("CI"):  # as `needs_engine` reads it: CI set to anything
        config.pluginmanager.register(SkipsFailUnderCI(), "dayzero-ci-skips")
