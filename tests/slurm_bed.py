"""Fixtures for tests against a real Slurm (tools/devlab/slurm.py): the e2e lock and the session's cluster.

Without slurmctld the tests skip with a reason, except under CI (tools/setup installs it there).
Starting daemons is serialized with the other end-to-end tests through /tmp/dayzero-e2e.lock, which
is taken here unless a process above this one already holds it (`flock /tmp/dayzero-e2e.lock pytest`).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

import pytest

from devlab import slurm as devslurm  # tools/ is on sys.path (conftest)

from .shared_bed import Shared, lend

LOCK = "/tmp/dayzero-e2e.lock"
_held = 0  # depth of e2e_lock() in this process: flock on a second open file would wait on ourselves


def _ancestors() -> set[int]:
    out, pid = {os.getpid()}, os.getpid()
    while pid > 1:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            break
        pid = int(stat.rpartition(")")[2].split()[1])
        out.add(pid)
    return out


def _held_above(path: str) -> bool:
    """Whether an ancestor (the `flock` command that started pytest) holds the lock on `path`."""
    try:
        st = os.stat(path)
        locks = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return False
    mine = _ancestors()
    held = (line.split() for line in locks)  # "1: FLOCK ADVISORY WRITE <pid> <dev>:<inode> 0 EOF"
    return any(  # a waiter's line reads "1: -> FLOCK ...": fields[1] is not FLOCK
        len(f) > 5 and f[1] == "FLOCK" and f[5].endswith(f":{st.st_ino}") and int(f[4]) in mine for f in held
    )


@contextlib.contextmanager
def e2e_lock():
    global _held
    if _held or _held_above(LOCK):
        _held += 1
        try:
            yield
        finally:
            _held -= 1
        return
    with open(LOCK, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        _held += 1
        try:
            yield
        finally:
            _held -= 1
            fcntl.flock(fh, fcntl.LOCK_UN)


def require_slurm() -> None:
    if devslurm.installed():
        return
    if os.environ.get("CI"):
        pytest.fail("CI: Slurm must be installed (tools/setup installs slurm-wlm and munge)")
    pytest.skip("slurmctld/munged not installed (apt-get install slurm-wlm munge, or tools/setup)")


@pytest.fixture
def slurm_lock():
    require_slurm()
    with e2e_lock():
        yield


def unhealthy(bed: devslurm.SlurmBed) -> list[str]:
    """Why the cluster cannot serve the next test as a fresh one would ([] when it can)."""
    down = [f"{name} not running" for name, pid in bed.pids().items() if pid is None]
    nodes = bed.sinfo()
    busy = [f"{n} {nodes.get(n, 'unknown')}" for n in bed.nodes if nodes.get(n) != "idle"]
    return down + busy + [f"job {j}" for j in bed.jobs()] + [f"slurmstepd {p}" for p in bed.stepds()]


def _start(directory: Path) -> devslurm.SlurmBed:
    """Two slurmd nodes (n1, n2, gres gpu:h200:2 each) whose inventory runs the cached llama-server."""
    from devlab.testbed import engine_defaults

    setup, variables = engine_defaults()
    return devslurm.start(2, directory, engine_setup=setup, variables=variables)


GRACE = 45.0  # s Slurm may take to end a finished test's steps (it ends them asynchronously)


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory):
    """The Slurm testbed shared by every module that needs one (its holder: `.bed` is the bed now)."""
    shared = Shared(tmp_path_factory.mktemp("slurm"), _start, devslurm.SlurmBed.stop)
    try:
        yield shared
    finally:
        with e2e_lock():
            shared.stop()


@pytest.fixture
def slurm_bed(slurm_cluster):
    """The shared cluster for one test, under the e2e lock: checked after it (a test that leaves
    it unhealthy fails alone, and the cluster is replaced for the next one)."""
    require_slurm()
    yield from lend(slurm_cluster, unhealthy, lock=e2e_lock, grace=GRACE, what="Slurm testbed")


@pytest.fixture
def spent_slurm_bed(slurm_cluster):
    """The shared cluster for a test that breaks it on purpose (kills slurmctld): Slurm's steps of
    such a test may outlive it by minutes (a slurmstepd retrying the controller it lost), so the
    cluster is replaced after it instead of checked."""
    require_slurm()
    yield from lend(slurm_cluster, unhealthy, lock=e2e_lock, grace=GRACE, what="Slurm testbed", spent=True)
