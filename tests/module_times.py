"""Where a run of dayzero's own tests spent its time: setup, call and teardown summed per test
module, printed as a table at the end of the terminal summary (before pytest's closing line).

A session-scoped fixture (the main job, a shared testbed) is charged to the module of the first
test that set it up: the table says where the time went, not who else used it.
"""

from __future__ import annotations

from collections import defaultdict

import pytest

SLOWEST = 30  # `pytest tests` prints this many slowest tests unless --durations says otherwise


class ModuleTimes:
    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.tests: dict[str, int] = defaultdict(int)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        module = report.nodeid.split("::")[0]
        self.seconds[module] += report.duration
        if report.when == "setup":
            self.tests[module] += 1

    @pytest.hookimpl(trylast=True)  # after the slowest tests, right above pytest's closing line
    def pytest_terminal_summary(self, terminalreporter) -> None:
        if not self.seconds:
            return
        terminalreporter.write_sep("=", "time per module (setup + call + teardown)")
        for line in table(self.seconds, self.tests):
            terminalreporter.write_line(line)


def table(seconds: dict[str, float], tests: dict[str, int]) -> list[str]:
    """One row per module, the slowest first, then the total: seconds, minutes, tests, module."""
    rows = sorted(seconds.items(), key=lambda kv: (-kv[1], kv[0]))
    lines = [f"{s:9.1f}s {s / 60:6.1f}m {tests.get(m, 0):5d}  {m}" for m, s in rows]
    total = sum(seconds.values())
    return [*lines, f"{total:9.1f}s {total / 60:6.1f}m {sum(tests.values()):5d}  total"]


def configure(config: pytest.Config) -> None:
    """Every run of these tests prints the slowest tests and the table (`--durations=N` to change)."""
    if config.option.durations is None:
        config.option.durations = SLOWEST
    if not hasattr(config, "workerinput"):  # the xdist controller sums its workers' reports
        config.pluginmanager.register(ModuleTimes(), "dayzero-module-times")
