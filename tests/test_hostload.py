"""Idle hosts, or a measurement that says it was not (`dayzero.lab.hostload`): the vendor tools'
compute process lists, the foreign-load sampler on this machine, and the verdict rule."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

from dayzero import devices
from dayzero.checks import FAILED, PASSED, CheckResult
from dayzero.checks.performance import INVALID
from dayzero.lab import hostload
from dayzero.lab.hostload import HostLoad, contention, parse_compute_processes, sample
from dayzero.lab.preflight import busy_accelerators
from dayzero.lab.transport.local import LocalTransport
from dayzero.run.phases import Endpoint, judged_for_contention
from dayzero.spec.inventory import Host

from .test_preflight import fake_tool

# `nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader,nounits`, in
# the format NVIDIA documents (no GPU here to record from): one line per process, none when idle.
NVIDIA_BUSY = "4121, /usr/bin/python3, 80510\n4388, ./train, 1204\n"
# `amd-smi process --json` (ROCm 6 format): a list per GPU, process_info per process.
AMD_BUSY = json.dumps(
    [
        {"gpu": 0, "process_list": [{"process_info": {"name": "python3", "pid": 5512, "memory_usage": {}}}]},
        {"gpu": 1, "process_list": []},
    ]
)
# nvidia-smi's `process_query`: `--query-gpu=index,uuid --format=csv,noheader`, then
# `--query-compute-apps=gpu_uuid,pid,process_name,used_memory --format=csv,noheader,nounits` (a
# process on two GPUs is a line on each), in the shapes public scripts parse.
G0, G1, G2 = (f"GPU-{d * 8}-{d * 4}-{d * 4}-{d * 4}-{d * 12}" for d in "abc")
NVIDIA_PLACED = (
    f"0, {G0}\n1, {G1}\n2, {G2}\n{G1}, 4121, /usr/bin/python3, 80510\n{G2}, 4121, /usr/bin/python3, "
    f"80510\n{G0}, 4388, ./train, 1204\n"
)
HOST = Host(name="h", hardware="cpu", transport="local")


def test_compute_process_lists_of_each_vendor_tool():
    assert parse_compute_processes("nvidia-smi", NVIDIA_BUSY) == [
        (4121, "/usr/bin/python3"),
        (4388, "./train"),
    ]
    assert parse_compute_processes("nvidia-smi", "") == []
    assert parse_compute_processes("amd-smi", AMD_BUSY) == [(5512, "python3")]
    assert parse_compute_processes("amd-smi", "No running processes detected\n") == []


def test_preflight_names_the_foreign_compute_processes(tmp_path, monkeypatch):
    fake_tool(tmp_path, monkeypatch, "nvidia-smi", NVIDIA_BUSY)
    assert busy_accelerators(LocalTransport(HOST), "nvidia-smi") == [
        "accelerators busy: 2 foreign compute process(es): /usr/bin/python3 (pid 4121), ./train (pid 4388)"
    ]
    fake_tool(tmp_path, monkeypatch, "nvidia-smi", "")
    assert busy_accelerators(LocalTransport(HOST), "nvidia-smi") == []


def test_compute_processes_are_placed_on_their_accelerators():
    nvidia, amd = devices.get("nvidia-smi"), devices.get("amd-smi")
    assert nvidia.parse_device_processes(NVIDIA_PLACED) == [
        (4121, "/usr/bin/python3", 1),
        (4121, "/usr/bin/python3", 2),
        (4388, "./train", 0),
    ]
    assert nvidia.parse_processes(NVIDIA_PLACED) == [(4121, "/usr/bin/python3"), (4388, "./train")]
    assert nvidia.parse_device_processes(NVIDIA_BUSY)[0] == (4121, "/usr/bin/python3", None)  # no uuid
    assert nvidia.parse_device_processes(f"{G0}, 7, x, 1\n") == [(7, "x", None)]  # a GPU not listed
    assert amd.parse_device_processes(AMD_BUSY) == [(5512, "python3", 0)]


def test_preflight_of_a_share_counts_only_the_processes_on_its_accelerators(tmp_path, monkeypatch):
    """A neighbour cell's engine on accelerators 1 and 2 is no other job's to a lease of 3 and 4;
    a process the tool does not place counts on every share."""
    fake_tool(tmp_path, monkeypatch, "nvidia-smi", NVIDIA_PLACED)
    t = LocalTransport(HOST)
    assert busy_accelerators(t, "nvidia-smi", (3, 4)) == []
    assert busy_accelerators(t, "nvidia-smi", (0, 3)) == [
        "accelerators busy on leased accelerators 0,3: 1 foreign compute process(es): ./train (pid 4388)"
    ]
    assert len(hostload.compute_processes(t, "nvidia-smi")) == 2  # the whole host: both
    fake_tool(tmp_path, monkeypatch, "nvidia-smi", NVIDIA_BUSY)
    assert len(hostload.compute_processes(t, "nvidia-smi", (3, 4))) == 2


def load(foreign: float, cores: int = 2, load1: float = 1.0, top=()) -> HostLoad:
    return HostLoad(cores, load1, foreign, tuple(top))


def test_contention_is_the_mean_foreign_load_against_a_share_of_the_cores():
    idle = [load(0.1), load(0.4)]  # 0.25 cores on average: within 0.25 x 2 cores
    assert contention(idle, 0.25) == ""
    busy = [
        load(1.9, load1=8.5, top=[(77, "burn", 0.95), (78, "burn", 0.94)]),
        load(1.8, top=[(9, "make", 0.2)]),
    ]
    why = contention(busy, 0.25)
    assert why.startswith("host contended: load 8.5 on 2 cores, foreign processes used 1.85 cores")
    assert "burn (1.9 cores), make (0.2 cores)" in why
    assert contention(busy, 0) == "", "0 turns the check off"
    assert contention([], 0.25) == "", "no sample, no verdict"
    assert contention([load(1.9, cores=16)], 0.25) == "", "the bound scales with the host's cores"


def test_a_floor_missed_while_contended_is_invalid_and_only_then():
    ep = Endpoint(url="", client=lambda s, t: {}, keep=lambda p, a: "")
    ep.contended["perf-x-c1-r1"] = "lab1: host contended: load 9.0 on 2 cores"
    missed = CheckResult("perf:x", "performance", FAILED, "3.2 < 50 tok/s")
    judged = judged_for_contention(missed, ["perf-x-c1-r0", "perf-x-c1-r1"], ep)
    assert judged.verdict == INVALID and judged.message.startswith("lab1: host contended: load 9.0")
    assert judged_for_contention(missed, ["perf-y-c1-r0"], ep) == missed, "another phase was contended"
    met = CheckResult("perf:x", "performance", PASSED, "60 >= 50 tok/s")
    stands = judged_for_contention(met, ["perf-x-c1-r1"], ep)
    assert stands.verdict == PASSED, "a floor met under load stands"
    assert stands.details["contended"] == {"perf-x-c1-r1": ep.contended["perf-x-c1-r1"]}, "marked (issue 41)"


def test_the_sampler_counts_a_burner_as_foreign_unless_it_is_the_cells_own():
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
    try:
        t = LocalTransport(HOST)
        seen = sample(t, (), 1.5)
        assert seen is not None and seen.cores == os.cpu_count()
        mine = [used for pid, _, used in seen.top if pid == burner.pid]
        assert mine and mine[0] > 0.5, seen
        ours = sample(t, (burner.pid,), 1.5)  # its process group is the cell's: not foreign
        assert ours is not None and burner.pid not in [pid for pid, _, _ in ours.top], ours
    finally:
        os.killpg(burner.pid, signal.SIGKILL)
        burner.wait()


def test_a_slurm_steps_engine_is_the_cells_own_load_and_another_jobs_is_foreign():
    """A Slurm cell's engine runs under its job's `slurmstepd: [JOB.STEP]` on the node, in no
    process group the controller started: every Slurm cell's log read "host contended ...
    llama-server" for its own engine. Here a burner under a parent named as job 77's step daemon
    (bash's `exec -a`), sampled through a node transport of job 77, then of job 7."""
    from types import SimpleNamespace

    from dayzero.lab.slurm_pool import SlurmNodeTransport

    step = subprocess.Popen(
        ["bash", "-c", f"exec -a 'slurmstepd: [77.0]' bash -c '{sys.executable} -c \"while True: pass\"; :'"],
        start_new_session=True,
    )
    try:
        local = LocalTransport(HOST)

        def node(job: str) -> SlurmNodeTransport:  # its run() is srun's; the sampler runs here
            t = SlurmNodeTransport(SimpleNamespace(), SimpleNamespace(job_id=job), HOST)
            t.run = local.run
            return t

        def parent(pid: int) -> int:
            try:
                return int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])
            except OSError:  # gone since the sample
                return 0

        def burners(load) -> list[float]:  # the step's child, by its parent: not any busy python here
            return [used for pid, _, used in load.top if parent(pid) == step.pid]

        other = sample(node("7"), (), 1.5)  # job 7's transport: job 77's step is foreign there
        assert other is not None and burners(other) and burners(other)[0] > 0.5, other
        ours = sample(node("77"), (), 1.5)
        assert ours is not None and not burners(ours), ours
    finally:
        os.killpg(step.pid, signal.SIGKILL)
        step.wait()


def test_every_host_of_a_cell_counts_the_cells_ranks_on_other_hosts_as_its_own():
    """Two testbed hosts share one kernel: rank 1's busy scheduler on lab2 is the cell's work when
    lab1 samples its load (seen as 'foreign processes ... sglang::scheduler' on the 2-node TP cell)."""
    from types import SimpleNamespace

    from dayzero.run.cell import cell_groups

    dep = SimpleNamespace(
        transports={"lab1": object(), "lab2": object()},
        process_groups=lambda: {"lab1": [101, 102], "lab2": [201]},
    )
    assert cell_groups(dep) == {"lab1": [101, 102, 201], "lab2": [101, 102, 201]}


def test_a_watch_ends_with_its_block_not_with_the_samplers_interval(monkeypatch):
    """The block's end stops the sampler under way (its stop file) instead of waiting out its
    interval: a phase used to end only once the current 2 s sample had, ~1 s a phase. With a
    60 s interval the block still ends within seconds, no sampler is left, and a full sample taken
    while the block ran is kept."""
    import time

    from dayzero.lab import hostload
    from dayzero.lab.hostload import watching

    # This watch's own sampler, by its stop file's name: another run's samplers (a cell under way
    # in another xdist worker or pytest) are not this block's.
    tag = uuid.uuid4()
    monkeypatch.setattr(hostload.uuid, "uuid4", lambda: tag)
    t = LocalTransport(HOST)
    start = time.monotonic()
    with watching(t, (), interval=60.0) as samples:
        time.sleep(0.5)
    took = time.monotonic() - start
    assert took < 30, f"the block waited {took:.0f} s for the sampler's 60 s interval"
    mine = f"dayzero-hostload-{tag.hex}"
    left = subprocess.run(["pgrep", "-f", mine], capture_output=True, text=True).stdout
    assert not left.strip(), f"sampler left running: {left}"
    assert samples == [], "a sample cut short is no sample"
    with watching(t, (), interval=0.3) as samples:
        time.sleep(1.2)
    assert samples and samples[0].cores == os.cpu_count()


def test_preflight_samples_the_foreign_load_only_where_the_check_is_on(tmp_path):
    """The preflight's one-second sample serves the contention check: with the check off
    (`max_foreign_load: 0`) it would only cost every cell a second, so it is not taken."""
    from dataclasses import replace

    from dayzero.lab.preflight import gather
    from dayzero.spec.matrix import load_matrix

    from .conftest import REPO

    cpu = load_matrix(REPO / "matrix").hardware["cpu"]
    for share, sampled in ((0.25, True), (0.0, False)):
        host = replace(HOST, workdir=str(tmp_path), max_foreign_load=share)
        facts = gather(LocalTransport(host), cpu, {}, bandwidth=1.0)
        assert facts.reachable and (facts.foreign_load is not None) == sampled, (share, facts.foreign_load)
