"""The shared SSH testbed (tests/beds.py) over real sshd: tests in a pytest of their own share one
bed; one that breaks it (an sshd stopped, a process left on a host) fails alone, and the next
test gets a fresh, healthy bed."""

from __future__ import annotations

import subprocess
import sys

import pytest

from .conftest import REPO

pytestmark = pytest.mark.e2e

CONFTEST = f"""
import sys
sys.path.insert(0, {str(REPO)!r})
sys.path.insert(0, {str(REPO / "tools")!r})
from tests import beds
from tests.beds import lab3, ssh_lab  # noqa: F401

beds.GRACE = 2.0
"""

SUITE = """
import os, signal, subprocess, time

from tests.beds import unhealthy

seen = []


def test_first(lab3):
    seen.append(lab3.directory)
    assert unhealthy(lab3) == []


def test_second_shares_it(lab3):
    assert lab3.directory == seen[0], "one bed for both"


def test_stops_an_sshd(lab3):
    pid = lab3.pid("lab2")
    os.kill(pid, signal.SIGSTOP)
    for _ in range(100):  # the stop is asynchronous: return once the kernel shows it
        if open(f"/proc/{pid}/stat").read().rpartition(")")[2].split()[0] == "T":
            break
        time.sleep(0.05)


def test_gets_a_fresh_bed(lab3):
    assert lab3.directory != seen[0] and unhealthy(lab3) == []
    seen.append(lab3.directory)


def test_leaves_a_server_behind(lab3):
    server = ["python3", "-c", "import time; time.sleep(600)", "--host", lab3.host("lab1").address, "x"]
    subprocess.Popen(server, start_new_session=True)


def test_gets_another_fresh_bed(lab3):
    assert lab3.directory not in seen and unhealthy(lab3) == []
"""


def test_a_test_that_breaks_the_shared_testbed_fails_alone_and_the_next_gets_a_clean_one(tmp_path):
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_suite.py").write_text(SUITE)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:dayzero", "-p", "no:randomly", "-rA", str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = result.stdout
    closing = out.splitlines()[-1]
    assert "6 passed" in closing and "2 errors" in closing and "failed" not in closing, out
    assert "ERROR test_suite.py::test_stops_an_sshd" in out and "lab2: sshd stopped (SIGSTOP)" in out, out
    assert (
        "ERROR test_suite.py::test_leaves_a_server_behind" in out
        and "time.sleep(600) --host 127.0.0.2" in out
    ), out
