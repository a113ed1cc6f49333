"""tools/testbed slurm: a real munge + slurmctld + slurmd cluster here, and nothing left after stop.

Skipped with a reason where Slurm is not installed, unless CI is set (there tools/setup installs it).
The cluster starts under the e2e lock (/tmp/dayzero-e2e.lock) unless this process already runs under it.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from dayzero.spec.inventory import load_inventory
from dayzero.spec.matrix import load_matrix
from devlab import slurm as devslurm  # noqa: E402 - tools/ is on sys.path (conftest)

from .conftest import REPO
from .slurm_bed import slurm_bed, slurm_lock  # noqa: F401 - fixtures

pytestmark = pytest.mark.e2e  # a real Slurm: the e2e tier


def test_started_cluster_is_idle_with_gres_and_writes_an_inventory(slurm_bed):  # noqa: F811
    bed = slurm_bed
    assert bed.sinfo() == {"n1": "idle", "n2": "idle"}
    out = subprocess.run(
        ["scontrol", "show", "node", "n2"], env=bed.env, capture_output=True, text=True, check=True
    ).stdout
    assert "Gres=gpu:h200:2" in out
    inv = load_inventory(bed.inventory, set(load_matrix(REPO / "matrix").hardware))
    assert inv.slurm.partition == "debug" and inv.slurm.for_hardware("cpu") is not None
    assert f"SLURM_CONF={bed.config}" in inv.slurm.setup and inv.slurm.login.transport == "local"


def test_cli_start_twice_refuses_and_stop_leaves_nothing(tmp_path, slurm_lock):  # noqa: F811
    directory = tmp_path / "bed"
    testbed = [sys.executable, str(REPO / "tools" / "testbed"), "slurm"]
    run = lambda *a: subprocess.run([*testbed, *a, "--dir", str(directory)], capture_output=True, text=True)  # noqa: E731
    started = run("start", "--nodes", "3")
    assert started.returncode == 0, started.stderr
    assert "started in" in started.stdout and str(directory / "inventory.yaml") in started.stdout
    bed = devslurm.load(directory)
    try:
        assert bed.sinfo() == {"n1": "idle", "n2": "idle", "n3": "idle"}
        again = run("start")
        assert again.returncode == 1 and "already running" in again.stderr
        job = subprocess.run(
            ["sbatch", "--parsable", "-N2", "-o", "/dev/null", "--wrap", "srun sleep 300"],
            env=bed.env,
            capture_output=True,
            text=True,
        )
        assert job.returncode == 0, job.stderr
        _wait_for(lambda: len(bed.stepds()) >= 2, "job steps running")
    finally:
        stopped = run("stop")
    assert stopped.returncode == 0, stopped.stderr
    assert all(pid is None for pid in bed.pids().values()) and bed.stepds() == []
    assert run("status").returncode == 1
    leftovers = subprocess.run(["pgrep", "-f", str(directory)], capture_output=True, text=True).stdout.split()
    assert leftovers == [], f"processes of the testbed left: {leftovers}"


def _wait_for(ready, what: str, timeout: float = 30.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not ready():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def test_missing_slurm_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(devslurm, "SBIN", ())
    with pytest.raises(devslurm.TestbedError, match="apt-get install .* slurm-wlm munge"):
        devslurm.start(2, tmp_path / "bed")
