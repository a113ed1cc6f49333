"""The plugins of dayzero's own test runs (tests/module_times.py, tests/ci_skips.py, tests/tiers.py), each run
on a small suite of its own in a pytest subprocess, as `pytest tests` loads them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from .conftest import REPO
from .module_times import table

CONFTEST = f"""
import sys
sys.path.insert(0, {str(REPO)!r})
from tests import ci_skips, module_times, tiers


def pytest_configure(config):
    config.addinivalue_line("markers", "e2e: real components")
    module_times.configure(config)
    ci_skips.configure(config)
    tiers.configure(config)
"""

SUITE = {
    "test_real.py": """
import pytest


def test_runs():
    pass


@pytest.mark.skipif(True, reason="slurmctld not installed")
def test_marked_skip():
    pass


def test_skips_inside():
    pytest.skip("podman cannot run containers here: no runc")


@pytest.mark.xfail(reason="known", strict=True)
def test_expected_failure():
    assert False
""",
    "test_module_skip.py": """
import pytest

pytest.skip("no sshd: apt-get install openssh-server", allow_module_level=True)
""",
}


def run_suite(tmp_path: Path, ci: str | None, suite: dict[str, str] = SUITE) -> subprocess.CompletedProcess:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    for name, text in suite.items():
        (tmp_path / name).write_text(text)
    env = {k: v for k, v in __import__("os").environ.items() if k != "CI"}
    if ci is not None:
        env["CI"] = ci
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:dayzero", "-p", "no:randomly", "-rA", str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_under_ci_a_skip_fails_the_run_naming_what_is_missing(tmp_path):
    result = run_suite(tmp_path, "true")
    out = result.stdout
    assert result.returncode == 1, out
    # a skipif fails the test's setup (an error), pytest.skip its call; the module skipped as a
    # whole stays counted as skipped, and the run fails with it named
    assert "1 failed, 1 passed, 1 skipped, 1 xfailed, 1 error" in out.splitlines()[-1], out
    assert "skipped under CI: the run fails" in out
    for test, missing in (
        ("test_real.py::test_marked_skip", "slurmctld not installed"),
        ("test_real.py::test_skips_inside", "podman cannot run containers here: no runc"),
        ("test_module_skip.py", "no sshd: apt-get install openssh-server"),
    ):
        assert f"{test} skipped under CI: {missing}" in out, out


def test_under_ci_a_module_skipped_as_a_whole_fails_an_otherwise_green_run(tmp_path):
    suite = {
        "test_ok.py": "def test_runs():\n    pass\n",
        "test_module_skip.py": SUITE["test_module_skip.py"],
    }
    result = run_suite(tmp_path, "true", suite)
    assert result.returncode == 1, result.stdout
    assert "test_module_skip.py skipped under CI: no sshd: apt-get install openssh-server" in result.stdout


def test_outside_ci_a_skip_stays_a_skip_with_its_reason(tmp_path):
    result = run_suite(tmp_path, None)
    assert result.returncode == 0, result.stdout
    assert "1 passed, 3 skipped, 1 xfailed" in result.stdout, result.stdout
    assert "slurmctld not installed" in result.stdout


def test_every_run_prints_the_slowest_tests_and_the_time_per_module_above_the_closing_line(tmp_path):
    out = run_suite(tmp_path, None).stdout.splitlines()
    slowest = next(i for i, line in enumerate(out) if "slowest 30 durations" in line)
    modules = next(i for i, line in enumerate(out) if "time per module" in line)
    assert slowest < modules, out
    assert out[modules + 1].endswith("  test_real.py") and out[modules + 2].endswith("  total"), out
    assert "passed" in out[-1] and out[-1].startswith("="), "pytest's closing line stays the last"


def test_the_module_table_puts_the_slowest_first_and_sums_it_all():
    lines = table({"tests/a.py": 2.0, "tests/b.py": 90.0}, {"tests/a.py": 3, "tests/b.py": 1})
    assert lines == [
        "     90.0s    1.5m     1  tests/b.py",
        "      2.0s    0.0m     3  tests/a.py",
        "     92.0s    1.5m     4  total",
    ]


def test_the_fast_tier_runs_first_each_tier_in_its_own_order(tmp_path):
    suite = {
        "test_a.py": "import pytest\n\n@pytest.mark.e2e\ndef test_engine():\n    pass\n\n"
        "def test_pure():\n    pass\n",
        "test_b.py": "import pytest\n\npytestmark = pytest.mark.e2e\n\ndef test_sshd():\n    pass\n",
        "test_c.py": "def test_parse():\n    pass\n",
    }
    out = run_suite(tmp_path, None, suite).stdout
    ran = [line.split()[1] for line in out.splitlines() if line.startswith("PASSED ")]
    assert ran == [
        "test_a.py::test_pure",
        "test_c.py::test_parse",
        "test_a.py::test_engine",
        "test_b.py::test_sshd",
    ], out
