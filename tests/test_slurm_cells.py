"""Cells through a real Slurm (tools/testbed slurm, real llama-server): every cpu cell with `-n 2`,
preflight inside the allocation, and the faults of issue 14, each asserting the verdict, its
category and that nothing is left (squeue empty of the run's jobs, no engine on the nodes).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dayzero import exitcodes
from dayzero.lab.pool import HostPool
from dayzero.lab.slurm import role_script, time_limit_seconds
from dayzero.lab.slurm_pool import SlurmPool, port_slots
from dayzero.lab.transport.base import watch_loop
from dayzero.plugin.markers import selected
from dayzero.spec.inventory import load_inventory
from dayzero.spec.matrix import load_matrix
from dayzero.spec.recipe import hosts_needed
from dayzero.spec.shell import quote

from .conftest import REPO, needs_engine, run_pytest
from .slurm_bed import slurm_bed, spent_slurm_bed  # noqa: F401 - fixture

CELL = "smollm2-135m/cpu+llama.cpp/low_latency/baseline"


@pytest.fixture
def bed(slurm_bed):  # noqa: F811
    """The session's two slurmd nodes (tests/slurm_bed.py) whose inventory runs the cached llama-server."""
    return slurm_bed


@pytest.fixture(scope="module")
def quick_matrix(tmp_path_factory) -> Path:
    """The repository's matrix with a short protocol (the Slurm path is under test here, not this
    machine's speed: the main job measures the full protocol)."""
    from .submission_corpus.lab import relaxed_matrix

    return relaxed_matrix(tmp_path_factory.mktemp("quick") / "matrix")


def _squeue(bed) -> list[str]:
    out = subprocess.run(["squeue", "-h", "-o", "%i %j"], env=bed.env, capture_output=True, text=True)
    return out.stdout.splitlines()


def _engines() -> list[str]:
    """llama-server processes bound to a testbed node's address (127.0.2.x)."""
    out = subprocess.run(["ps", "-eww", "-o", "pid=,args="], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if "llama-server" in line and "--host 127.0.2." in line]


def _wait_until(ready, what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        assert time.monotonic() < deadline, f"not within {timeout:.0f}s: {what}"
        time.sleep(0.5)


def _nothing_left(bed, timeout: float = 45) -> None:
    """No job of ours in the queue and no engine on the nodes (bounded: Slurm ends steps async)."""
    _wait_until(lambda: not _squeue(bed) and not _engines(), f"{_squeue(bed)} {_engines()}", timeout)


def _evidence(reports: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in (reports / "evidence").glob("*.json")]


def _categories(reports: Path) -> set[str]:
    results = [json.loads(p.read_text()) for p in (reports / "allure-results").glob("*-result.json")]
    return {lab["value"] for r in results for lab in r["labels"] if lab["name"] == "dayzero_category"}


# -- pure parts ----------------------------------------------------------------------------------


def test_time_limits_and_port_slots():
    assert [time_limit_seconds(t) for t in ("30", "30:00", "2:00:00", "1-00", "1-2:03:04")] == [
        1800, 1800, 7200, 86400, 93784,
    ]  # fmt: skip
    shared = port_slots({"n10": "10.0.0.1", "n2": "10.0.0.1", "n1": "10.0.0.1", "gpu1": "10.0.0.9"})
    assert shared == {"gpu1": 0, "n1": 0, "n2": 1, "n10": 2}


def test_a_roles_step_starts_the_deployments_switch_before_anything_else():
    hb = "/w/jobs/leases/slot-0/owner.json"
    script = role_script("llama-server --port 1", {"A": "1"}, "source /venv", "/w/run", (hb, 20))
    lines = script.splitlines()
    assert lines[0].startswith("mkdir -p /w/run") and lines[2] == "source /venv"
    switch = f"setsid bash -c {quote(watch_loop('$1', hb, 20))} dayzero-watchdog $$"
    assert lines[1] == f"{switch} > /dev/null 2>&1 < /dev/null &", "over the step's group, outside it"
    assert lines[-1].endswith("exec llama-server --port 1")
    assert "dayzero-watchdog" not in role_script("llama-server", {}, "", "/w/run")


# -- a real Slurm ----------------------------------------------------------------------------------


# One cell of each launch shape through Slurm: llama.cpp's one-host cell, its two cells of two
# nodes (rpc_split: two ranks; routed: workers and a router) and SGLang's one-rank cell. The
# other modes and strategies change the engine's flags, not the path (the main job runs them all);
# SGLang's cold start (~45 s a launch) keeps its other cells to the SSH testbed (test_multihost_e2e).
SLURM_CELLS = (
    "cpu and baseline and ((llama.cpp and (low_latency or rpc_split or routed)) or (sglang and low_latency))"
)


@pytest.mark.e2e
@needs_engine
def test_each_launch_shape_of_the_cpu_cells_runs_through_slurm_with_two_workers(bed, quick_matrix, tmp_path):
    """Each launch shape of the cpu cells through Slurm, two xdist workers: one job per cell holding
    all of its nodes, and nothing left."""
    reports = tmp_path / "reports"
    result = run_pytest(
        "-m", SLURM_CELLS, "-n", "2", "-q", f"--hosts={bed.inventory}", f"--reports={reports}",
        f"--matrix={quick_matrix}", timeout=1500,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-4000:]
    matrix = load_matrix(quick_matrix)
    cpu = {c.id: hosts_needed(matrix.card(c), c) for c in selected(SLURM_CELLS, matrix.cells) if c.supported}
    assert len(cpu) == 4, cpu
    assert any(c.startswith("smollm2-135m/cpu+sglang/") for c in cpu)
    assert f"{len(cpu)} passed" in result.stdout, result.stdout[-2000:]
    docs = _evidence(reports)
    assert sorted(d["cell"] for d in docs) == sorted(cpu) and all(d["verdict"] == "passed" for d in docs)
    jobs = {d["cell"]: d["hosts"][0]["lease"]["slurm"] for d in docs}
    assert len({j["job_id"] for j in jobs.values()}) == len(cpu), "one job per cell"
    assert {cell: len(j["nodes"]) for cell, j in jobs.items()} == cpu, "a job holds all of its cell's nodes"
    assert any(n == 2 for n in cpu.values()), "a two-node cell ran on two Slurm nodes"
    # both nodes served (which one-node cell lands where is Slurm's choice: in one run both did n1)
    assert {x["name"] for d in docs for x in d["hosts"]} == {"n1", "n2"}
    progress = next(reports.glob("runs/*/progress.log")).read_text()
    assert "RUNNING" in progress and "[gw1]" in progress
    _nothing_left(bed, timeout=15)


@pytest.mark.e2e
@needs_engine
def test_a_node_failing_preflight_is_excluded_and_the_cell_moves(bed, tmp_path):
    """Preflight runs inside the allocation: n1's engine is broken, so n1 is excluded from the
    next job (`--exclude n1`) and the cell gets n2."""
    broken = tmp_path / "inventory.yaml"
    text = bed.inventory.read_text()
    broken_setup = '[ \\"$SLURMD_NODENAME\\" != n1 ] || exit 3; '
    broken.write_text(text.replace('engine_setup: "', f'engine_setup: "{broken_setup}', 1))
    matrix = load_matrix(REPO / "matrix")
    inventory = load_inventory(broken, set(matrix.hardware))
    said: list[str] = []
    hosts = HostPool(inventory, tmp_path / "quarantine", "run-x", lease_wait=60, ttl=30, say=said.append)
    pool = SlurmPool(hosts)
    card = matrix.cards["smollm2-135m"]
    held = pool.acquire(CELL, matrix.hardware["cpu"], 1, card.engine.name, card.engine.version_command)
    try:
        assert [h.name for h in held.hosts] == ["n2"], said
        assert list(pool.quarantined()) == ["n1"] and "not usable" in pool.quarantined()["n1"]
        assert any("excluded slurm node n1" in line for line in said)
        assert any("excluding n1" in line for line in said)
    finally:
        pool.release(held)
        pool.close()
    _nothing_left(bed, timeout=15)


def _start_cell(bed, matrix: Path, reports: Path, *extra: str) -> subprocess.Popen:
    """The llama.cpp low_latency cell on the short protocol (`quick_matrix`): a fault that the cell
    only notices at its teardown (slurmctld gone) then costs seconds, not the full protocol."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:randomly",
            "-q",
            "-m",
            "cpu",
            "-k",
            "llama.cpp and low_latency and baseline",
            f"--matrix={matrix}",
            f"--hosts={bed.inventory}",
            f"--reports={reports}",
            *extra,
        ],  # fmt: skip
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _wait_progress(reports: Path, needle: str, proc: subprocess.Popen, timeout: float = 120) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        logs = list(reports.glob("runs/*/progress.log"))
        text = logs[0].read_text() if logs else ""
        if needle in text:
            return text
        if proc.poll() is not None:
            break
        time.sleep(0.3)
    proc.kill()
    raise AssertionError(f"no {needle!r} in the progress log: {text}\n{proc.communicate()[0][-3000:]}")


def _ends_broken(proc: subprocess.Popen, reports: Path, timeout: float = 180) -> dict:
    out, _ = proc.communicate(timeout=timeout)
    assert proc.returncode == exitcodes.LAB_FAULT, out[-3000:]
    (doc,) = _evidence(reports)
    assert doc["verdict"] == "broken", doc["error"]
    assert _categories(reports) == {"infrastructure"}, out[-3000:]
    return doc


@pytest.mark.e2e
@needs_engine
def test_job_cancelled_from_outside_mid_cell_breaks_the_cell(bed, quick_matrix, tmp_path):
    reports = tmp_path / "reports"
    proc = _start_cell(bed, quick_matrix, reports)
    _wait_progress(reports, "ready after", proc)
    (job,) = [line.split()[0] for line in _squeue(bed)]
    subprocess.run(["scancel", job], env=bed.env, check=True)
    doc = _ends_broken(proc, reports)
    assert f"slurm job {job}" in doc["error"]
    _nothing_left(bed)


@pytest.mark.e2e
@needs_engine
def test_node_set_down_mid_cell_breaks_the_cell(bed, quick_matrix, tmp_path):
    reports = tmp_path / "reports"
    proc = _start_cell(bed, quick_matrix, reports)
    text = _wait_progress(reports, "ready after", proc)
    node = text.split(" runs on ")[1].split()[0]
    update = ["scontrol", "update", f"nodename={node}"]
    subprocess.run([*update, "state=down", "reason=test"], env=bed.env, check=True)
    try:
        doc = _ends_broken(proc, reports)
        assert "slurm job" in doc["error"], doc["error"]
        _nothing_left(bed)
    finally:  # ReturnToService=2 may already have brought it back (slurmd still answers)
        if bed.sinfo().get(node) != "idle":
            subprocess.run([*update, "state=resume"], env=bed.env)
        _wait_until(lambda: bed.sinfo().get(node) == "idle", f"{node} idle again", 30)


@pytest.mark.e2e
@needs_engine
def test_dayzero_killed_mid_cell_its_job_ends_by_the_heartbeat(bed, quick_matrix, tmp_path):
    """SIGKILL to the controller (pytest): nothing cancels the job but its watchdog on the login
    host, once the job slot's heartbeat is older than --heartbeat-timeout."""
    reports = tmp_path / "reports"
    proc = _start_cell(bed, quick_matrix, reports, "--heartbeat-timeout=6")
    _wait_progress(reports, "ready after", proc)
    _wait_until(lambda: _squeue(bed) and _engines(), "the job and its engine", 10)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate()
    _nothing_left(bed, timeout=60)


@pytest.mark.e2e
@needs_engine
def test_slurmctld_killed_mid_cell_breaks_the_cell_and_leaves_no_engine(
    spent_slurm_bed,  # noqa: F811
    quick_matrix,
    tmp_path,
):
    """slurmctld SIGKILLed while the cell runs: the cell is broken (the controller unreachable),
    its engine is gone from the node while slurmctld is still down (killing srun on the login
    host cannot end a step without the controller: the step's own switch on the node kills it
    once the cell lets go of its job slot), and once slurmctld is back (its state read back, the
    job still RUNNING) the job's watchdog cancels the job. The cluster is spent: a slurmstepd of
    the lost controller's time may retry it for minutes, so the next test gets a fresh one."""
    bed = spent_slurm_bed
    reports = tmp_path / "reports"
    proc = _start_cell(bed, quick_matrix, reports, "--heartbeat-timeout=20")
    _wait_progress(reports, "ready after", proc)
    _wait_until(lambda: _squeue(bed) and _engines(), "the job and its engine", 10)
    bed.kill("slurmctld")
    try:
        doc = _ends_broken(proc, reports, timeout=240)
        assert "slurm controller unreachable" in doc["error"], doc["error"]
        _wait_until(lambda: not _engines(), f"no engine while slurmctld is down: {_engines()}", 45)
    except BaseException:  # the controller back and the job gone, for the module's next tests
        proc.kill()
        bed.restart("slurmctld")
        subprocess.run(["scancel", *[line.split()[0] for line in _squeue(bed)]], env=bed.env)
        for line in _engines():  # an orphaned step's engine outlives even that (proctrack/linuxproc)
            os.kill(int(line.split()[0]), signal.SIGKILL)
        raise
    bed.restart("slurmctld")
    # slurmctld saves job state a few seconds after each change, so a SIGKILL loses what it has
    # not saved yet: a job of an earlier test that ended just before can come back RUNNING after
    # the restart (a ghost with no process on any node), and this run's job may be purged as
    # defunct. The check is about this run's jobs; ghosts are cancelled for the next tests.
    run = doc["run"]["id"]
    ours = lambda: [line for line in _squeue(bed) if f"dayzero:{run}:" in line]  # noqa: E731
    _wait_until(lambda: not ours() and not _engines(), f"{ours()} {_engines()}", 90)


@pytest.mark.e2e  # a real slurmctld
def test_allocation_never_granted_within_lease_wait_breaks_the_cell(bed, quick_matrix, tmp_path):
    holder = subprocess.run(
        ["sbatch", "--parsable", "-N2", "--exclusive", "-o", "/dev/null", "--wrap", "exec sleep 600"],
        env=bed.env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    try:
        reports = tmp_path / "reports"
        proc = _start_cell(bed, quick_matrix, reports, "--lease-wait=4")
        doc = _ends_broken(proc, reports, timeout=120)
        assert "not granted within 4s: PENDING" in doc["error"], doc["error"]
        assert [line.split()[0] for line in _squeue(bed)] == [holder]
        progress = next(reports.glob("runs/*/progress.log")).read_text()
        assert "PENDING (Resources)" in progress or "PENDING (Priority)" in progress, progress
    finally:
        subprocess.run(["scancel", holder], env=bed.env, check=True)
    _nothing_left(bed)
