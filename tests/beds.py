"""The 3-host SSH testbed (tools/testbed: sshd on 127.0.0.2-4, lab3 reachable only through lab1,
the engines as tools/setup left them), started once per session and shared by every module that
runs cells on it (test_lab_ssh, test_multihost_e2e) instead of one per module.

Safe on failure: after each test the bed is checked (every sshd running and not stopped, no
process of a cell on any host, no lease); a test that left it otherwise fails alone, and the next
test gets a fresh bed (leftovers killed, a new directory and port). Under xdist each worker has
its own bed; its tests take the e2e lock (tests/slurm_bed.py), so two beds never serve cells at once.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from devlab import testbed  # tools/ is on sys.path (conftest)

from .shared_bed import Shared, lend
from .slurm_bed import e2e_lock


def left_on(lab: testbed.Testbed) -> list[str]:
    """What a cell left on any host: processes of its address or workdir, and leases."""
    from .conftest import processes_matching  # conftest imports this module's fixtures

    left = []
    for h in lab.hosts:
        workdir = lab.directory / "work" / h.name
        left += processes_matching(f"--host {h.address} ")
        left += [p for p in processes_matching(str(workdir)) if "sshd" not in p]
        left += [str(p) for p in (workdir / "leases").glob("slot-*")]
    # SGLang renames its processes (`sglang::scheduler`, `sglang::detokenizer`, the router
    # `sglang::router`): their command lines, address included, are gone, so they are found by
    # that name: e2e tests run one at a time, any such process is a cell's. A zombie is no
    # process left: it is dead, only its parent (maybe another run) can reap it.
    return [p for p in left + processes_matching("sglang::") if not p.endswith("<defunct>")]


def nothing_left(lab: testbed.Testbed, within: float = 30.0) -> list[str]:
    deadline = time.monotonic() + within
    while (left := left_on(lab)) and time.monotonic() < deadline:
        time.sleep(1)
    return left


def _stopped(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "T"
    except OSError:
        return False


def live_leases(leases: Path) -> list[Path]:
    """Leases still held: released ones are gone, stale ones (untouched past their ttl) are free."""
    live = []
    for owner in leases.glob("slot-*/owner.json"):
        if time.time() - owner.stat().st_mtime <= json.loads(owner.read_text())["ttl"]:
            live.append(owner.parent)
    return live


def broken_hosts(lab: testbed.Testbed) -> list[str]:
    """Hosts whose sshd is gone or stopped."""
    why = []
    for h in lab.hosts:
        pid = lab.pid(h.name)
        if pid is None:
            why.append(f"{h.name}: sshd not running")
        elif _stopped(pid):
            why.append(f"{h.name}: sshd stopped (SIGSTOP)")
    return why


def unhealthy(lab: testbed.Testbed) -> list[str]:
    """Why the bed cannot serve the next test as a fresh one would ([] when it can): an sshd gone
    or stopped, a process of a cell, a live lease (a stale one is the next run's to reclaim)."""
    leases = [str(p) for h in lab.hosts for p in live_leases(lab.directory / "work" / h.name / "leases")]
    return broken_hosts(lab) + leases + [p for p in left_on(lab) if "/leases/slot-" not in p]


GRACE = 30.0  # s a cell's teardown may take to end its processes after the test returned


def _start(directory: Path) -> testbed.Testbed:
    setup, variables = testbed.engine_defaults()
    return testbed.start(3, directory, port=testbed.free_port(3), engine_setup=setup, variables=variables)


def _stop(lab: testbed.Testbed) -> None:
    """Kill what the last test left (a stopped sshd woken first), then stop every sshd."""
    for h in lab.hosts:
        if (pid := lab.pid(h.name)) is not None:
            os.kill(pid, signal.SIGCONT)
    for line in left_on(lab):
        if line.split()[0].isdigit():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(line.split()[0]), signal.SIGKILL)
    lab.stop()


@pytest.fixture(scope="session")
def ssh_lab(tmp_path_factory):
    """The shared 3-host testbed (its holder: `.bed` is the bed now)."""
    shared = Shared(tmp_path_factory.mktemp("ssh-lab"), _start, _stop)
    try:
        yield shared
    finally:
        shared.stop()


@pytest.fixture
def lab3(ssh_lab):
    """The shared testbed for one test, under the e2e lock: checked after it (a test that leaves
    it unhealthy fails, and the bed is replaced for the next one)."""
    yield from lend(ssh_lab, unhealthy, lock=e2e_lock, grace=GRACE, what="SSH testbed", broken=broken_hosts)


def inventory(lab: testbed.Testbed) -> Path:
    """The bed's inventory with its known_hosts as an absolute path (runs start elsewhere)."""
    data = yaml.safe_load(lab.inventory.read_text())
    data["known_hosts"] = str(lab.known_hosts)
    path = lab.inventory.with_name("inventory-abs.yaml")
    path.write_text(yaml.safe_dump(data))
    return path


@dataclass(frozen=True)
class HostsRun:
    result: subprocess.CompletedProcess
    reports: Path
    matrix: Path
    took: float


@pytest.fixture(scope="session")
def llama_cells(ssh_lab, tmp_path_factory) -> HostsRun:
    """`pytest -m "cpu and llama.cpp" -n auto` over the three hosts, once per session, with the
    short protocol (tests/submission_corpus `relaxed_matrix`: the path is under test, not speed):
    the cells across hosts (rpc_split, routed) beside the four one-host cells. Judged by
    test_multihost_e2e (the cells across hosts, and a vendor's bundle of them) and test_lab_ssh
    (the one-host cells in parallel over SSH): no engine launched twice for the same proof."""
    from .conftest import REPO
    from .submission_corpus.lab import relaxed_matrix

    root = tmp_path_factory.mktemp("across")
    matrix = relaxed_matrix(root / "matrix")
    reports = root / "reports"
    t0 = time.monotonic()
    with e2e_lock():
        argv = ["-m", "cpu and llama.cpp", "-n", "auto", f"--hosts={inventory(ssh_lab.bed)}"]
        result = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:randomly", "-q", f"--matrix={matrix}", *argv,
             f"--reports={reports}", "-rA"],
            cwd=REPO, capture_output=True, text=True, timeout=1800,
        )  # fmt: skip
    return HostsRun(result, reports, matrix, time.monotonic() - t0)
