"""The Slurm backend (dayzero/lab/slurm.py) against a real slurmctld with two nodes (tools/testbed slurm)."""

from __future__ import annotations

import subprocess
import time

import pytest

from dayzero.errors import InfrastructureError
from dayzero.lab.slurm import Slurm, check_lines, job_name, submit_argv
from dayzero.lab.transport.local import LocalTransport
from dayzero.spec.inventory import SlurmHardware, load_inventory

from .conftest import REPO
from .slurm_bed import slurm_bed  # noqa: F401 - fixture

pytestmark = pytest.mark.e2e  # a real Slurm: the e2e tier

GPU = SlurmHardware("h200", gres="gpu:h200:2", accelerators=2)


@pytest.fixture
def slurm(slurm_bed):  # noqa: F811
    cluster = load_inventory(slurm_bed.inventory).slurm
    return Slurm(cluster, LocalTransport(cluster.login))


def _squeue(bed) -> list[str]:
    out = subprocess.run(["squeue", "-h", "-o", "%i"], env=bed.env, capture_output=True, text=True)
    return out.stdout.split()


def test_hosts_check_lists_nodes_states_and_gres(slurm):
    nodes = slurm.nodes()
    assert [(n.name, n.state, n.gres, n.partitions) for n in nodes] == [
        ("n1", "idle", "gpu:h200:2", ("debug",)),
        ("n2", "idle", "gpu:h200:2", ("debug",)),
    ]
    lines, problems = check_lines(slurm.cluster, nodes)
    assert problems == 0 and "cpu: 2 of 2 node(s) usable in debug (no gres)" in lines


def test_two_node_job_runs_a_role_per_node_and_scancel_empties_the_queue(slurm, slurm_bed, tmp_path):  # noqa: F811
    states = []
    name = job_name("run-1", "smollm2-135m/cpu+llama.cpp/low_latency/baseline")
    with slurm.allocation(GPU, 2, name, wait=30, on_state=lambda s, r: states.append(s)) as alloc:
        assert alloc.nodes == ("n1", "n2") and states[-1] == "RUNNING"
        jobs = subprocess.run(["squeue", "-h", "-o", "%j"], env=slurm_bed.env, capture_output=True, text=True)
        assert name in jobs.stdout.split()
        procs = []
        for node in alloc.nodes:
            out = tmp_path / f"{node}.txt"
            cmd = f'bash -c "echo $SLURMD_NODENAME $CUDA_VISIBLE_DEVICES $ROLE > {out}; exec sleep 300"'
            log = str(tmp_path / f"{node}.log")
            procs.append(slurm.launch(alloc, node, cmd, log_path=log, env={"ROLE": node}))
        deadline = time.monotonic() + 30
        while not all((tmp_path / f"{n}.txt").exists() for n in alloc.nodes):
            assert time.monotonic() < deadline, [slurm.transport.tail(p.log_path) for p in procs]
            time.sleep(0.2)
        assert (tmp_path / "n2.txt").read_text().split() == ["n2", "0,1", "n2"]
        slurm.transport.kill(procs[0], grace=5)
        assert not slurm.transport.alive(procs[0]) and slurm.transport.alive(procs[1])
    assert _squeue(slurm_bed) == []
    assert not slurm.transport.alive(procs[1]), "scancel ends the job's other steps"
    # slurmstepd cleans up after the job has left the queue (Slurm's own, asynchronous): bounded wait
    deadline = time.monotonic() + 30
    while slurm_bed.stepds() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert slurm_bed.stepds() == [], "no slurmstepd left 30 s after the job ended"


def test_a_roles_switch_on_its_node_ends_the_step_when_the_heartbeat_goes(slurm, slurm_bed, tmp_path):  # noqa: F811
    """The step's own dead man's switch (`role_script` with a heartbeat): the heartbeat file gone
    (the cell let go of its job slot), the engine on the node is killed although nobody killed
    srun, which is all that works while slurmctld is down."""
    heartbeat = tmp_path / "owner.json"
    heartbeat.write_text('{"run_id": "r"}')
    pidfile = tmp_path / "engine.pid"
    with slurm.allocation(GPU, 1, "dayzero:test:switch", wait=30) as alloc:
        cmd = f'bash -c "echo \\$\\$ > {pidfile}; exec sleep 300"'
        proc = slurm.launch(
            alloc, "n1", cmd, log_path=str(tmp_path / "n1.log"), env={}, heartbeat=(str(heartbeat), 60)
        )
        deadline = time.monotonic() + 30
        while not pidfile.exists() or not pidfile.read_text().strip():
            assert time.monotonic() < deadline, slurm.transport.tail(proc.log_path)
            time.sleep(0.2)
        engine = int(pidfile.read_text())
        assert _alive(engine)
        heartbeat.unlink()
        deadline = time.monotonic() + 20
        while _alive(engine):
            assert time.monotonic() < deadline, "the switch did not kill the step's engine"
            time.sleep(0.2)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rpartition(")")[2].split()[0] not in ("Z", "X")
    except OSError:
        return False


def test_a_job_never_granted_gives_up_reports_pending_and_is_cancelled(slurm, slurm_bed):  # noqa: F811
    with slurm.allocation(GPU, 2, "dayzero:test:holder", wait=30) as holder:
        states = []
        pending = r"not granted within 2s: PENDING \((Resources|Priority)\)"
        gave_up = pytest.raises(InfrastructureError, match=pending)
        waiter = slurm.allocation(GPU, 1, "dayzero:test:wait", wait=2, on_state=lambda s, _: states.append(s))
        with gave_up, waiter:
            pytest.fail("granted while every node is held")
        assert states == ["PENDING"] and _squeue(slurm_bed) == [holder.job_id]
    assert _squeue(slurm_bed) == []


def test_submit_argv_carries_partition_account_qos_gres_and_exclusive():
    cluster = load_inventory(REPO / "hosts" / "slurm.example.yaml").slurm
    argv = submit_argv(cluster, cluster.for_hardware("gb300"), 2, "dayzero:r:c", exclude=("bad1",))
    text = " ".join(argv)
    for part in (
        *("--nodes 2", "--partition nvl72", "--account inference-qa", "--qos normal", "--time 2:00:00"),
        *("--gres gpu:gb300:4", "--constraint nvl72", "--exclusive", "--exclude bad1"),
        "--job-name dayzero:r:c",
    ):
        assert part in text, part
    assert argv[-2:] == ["--wrap", "exec sleep 7200"], "the batch step holds the job no longer than --time"
    assert job_name("r 1", "a/b,c") == "dayzero:r_1:a/b_c"


def test_dayzero_hosts_check_on_a_slurm_inventory(slurm_bed, tmp_path):  # noqa: F811
    import sys

    cli = [sys.executable, "-m", "dayzero.cli", "--matrix", str(REPO / "matrix"), "hosts", "check", "--hosts"]
    out = subprocess.run([*cli, str(slurm_bed.inventory)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "n1" in out.stdout and "idle" in out.stdout and "gres gpu:h200:2" in out.stdout
    assert "cpu: 2 of 2 node(s) usable in debug" in out.stdout
    broken = tmp_path / "inv.yaml"
    broken.write_text(slurm_bed.inventory.read_text().replace("partition: debug", "partition: gpu"))
    out = subprocess.run([*cli, str(broken)], capture_output=True, text=True)
    assert out.returncode == 1 and "partition 'gpu' not found" in out.stdout, out.stdout + out.stderr


def test_the_login_watchdog_leaves_alone_a_job_that_took_its_jobs_id(slurm, slurm_bed, tmp_path):  # noqa: F811
    """A job purged by a slurmctld crash gives its id to the next job submitted. The purged job's
    watchdog (its heartbeat gone: it would scancel) must not cancel the newcomer: it sees another
    name behind the id and ends. Given the job's own name, the same watchdog cancels it."""
    gone = str(tmp_path / "no-heartbeat.json")
    dogs = []
    try:
        with slurm.allocation(GPU, 1, "dayzero:test:newcomer", wait=30) as alloc:
            dog = slurm.watchdog(alloc.job_id, "dayzero:test:purged", gone, 60, str(tmp_path / "purged.log"))
            dogs.append(dog)
            deadline = time.monotonic() + 20
            while slurm.transport.alive(dog):
                assert time.monotonic() < deadline, "the purged job's watchdog still runs"
                time.sleep(0.2)
            assert _squeue(slurm_bed) == [alloc.job_id], slurm.transport.tail(dog.log_path)
            own = slurm.watchdog(alloc.job_id, alloc.name, gone, 60, str(tmp_path / "own.log"))
            dogs.append(own)
            deadline = time.monotonic() + 30
            while _squeue(slurm_bed):
                assert time.monotonic() < deadline, slurm.transport.tail(own.log_path)
                time.sleep(0.5)
    finally:  # a watchdog polls until it sees its job gone: not past this test (the bed may stop first)
        for each in dogs:
            slurm.transport.kill(each, grace=0)
