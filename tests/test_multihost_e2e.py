"""Cells across hosts, for real: the multi-node cell (llama.cpp RPC: rpc-server on rank 1,
llama-server --rpc on rank 0) and the routed cell (two llama-server workers behind the SGLang
router) over a 3-host SSH testbed, beside the single-host cells, and faults across hosts; the
same for real SGLang 0.5.23 (2-node tensor parallel, two workers behind the router, Ctrl-C at
several instants of an SGLang cell).

Every test ends by checking that nothing is left on any host: no process bound to a host's
address or naming its workdir (servers, rpc-server, router, watchdogs), no lease.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

import pytest
import yaml

from dayzero.run.cell import RunContext, new_run_id, run_cell
from dayzero.spec.inventory import load_inventory
from dayzero.spec.matrix import load_matrix

from .beds import HostsRun, inventory, left_on, nothing_left
from .conftest import REPO, needs_engine, processes_matching
from .interrupt_sweep import assert_ended_interrupted, run_interrupted
from .slurm_bed import e2e_lock
from .stub_cells import stub_matrix, stub_pair_card

pytestmark = [pytest.mark.e2e, needs_engine]
RPC = "smollm2-135m/cpu+llama.cpp/rpc_split/baseline"
ROUTED = "smollm2-135m/cpu+llama.cpp/routed/baseline"
TP2 = "smollm2-135m/cpu+sglang/tp2_nodes/baseline"
SGLANG_ROUTED = "smollm2-135m/cpu+sglang/routed/baseline"
PD = "smollm2-135m/cpu+sglang/pd/baseline"


@pytest.fixture(scope="module")
def quick_matrix(tmp_path_factory) -> Path:
    """The repository's matrix with a one-repetition protocol (the path is under test, not speed)."""
    from .submission_corpus.lab import relaxed_matrix

    return relaxed_matrix(tmp_path_factory.mktemp("quick") / "matrix")


@pytest.fixture
def bed(lab3):
    """The session's 3-host testbed (tests/beds.py), shared with test_lab_ssh, checked after each test."""
    return lab3


def evidence(reports: Path) -> dict[str, dict]:
    docs = [json.loads(p.read_text()) for p in (reports / "evidence").glob("*.json")]
    return {d["cell"]: d for d in docs}


def pytest_cmd(matrix: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "pytest", "-p", "no:randomly", "-q", f"--matrix={matrix}", *args]


def test_every_cpu_cell_across_three_hosts(bed, quick_matrix, llama_cells):
    inv = inventory(bed)
    dry = subprocess.run(
        pytest_cmd(
            quick_matrix,
            "-m",
            "cpu and llama.cpp and (rpc_split or routed)",
            "--dry-run",
            "--hosts",
            str(inv),
        ),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert dry.returncode == 0, dry.stdout[-3000:] + dry.stderr[-2000:]
    for role, program in (
        ("server[1]", "rpc-server"),
        ("server[0]", "--rpc"),
        ("worker2[0]", "llama-server"),
    ):
        assert re.search(rf"# {re.escape(role)} on lab\d", dry.stdout), (role, dry.stdout[-3000:])
        assert program in dry.stdout
    assert "sglang_router.launch_router" in dry.stdout

    result, reports, took = llama_cells.result, llama_cells.reports, llama_cells.took
    assert result.returncode == 0, result.stdout[-5000:]
    assert "6 passed" in result.stdout, result.stdout[-2000:]
    docs = evidence(reports)
    assert len(docs) == 6 and all(d["verdict"] == "passed" for d in docs.values())
    assert_two_host_cells(docs, {RPC: {("server", 0), ("server", 1)}, ROUTED: ROUTED_ROLES})
    rpc = {x["rank"]: x for x in docs[RPC]["recipe"]["launches"]}
    assert rpc[1]["command"].startswith("rpc-server") and rpc[1]["ready"] == "tcp"
    assert f"--rpc {bed.host(rpc[1]['host']).address}:{rpc[1]['port']}" in rpc[0]["command"]
    log1 = (reports / next(p for p in docs[RPC]["logs"] if p.endswith("server-1.log"))).read_text()
    assert "Accepted client connection" in log1, "rank 0 served through the rpc-server of rank 1"
    assert not nothing_left(bed)
    print(f"6 cpu cells on 3 hosts, -n auto: {took:.0f}s")


# -- the same run as a vendor's submission: each launch's own log is its engine account ------------


@pytest.fixture(scope="module")
def vendor(llama_cells, tmp_path_factory):
    """The run above packed by a vendor and checked against the matrix it ran (no new launch)."""
    from .submission_corpus.lab import lab_from_run

    assert llama_cells.result.returncode == 0, llama_cells.result.stdout[-4000:]
    return lab_from_run(tmp_path_factory.mktemp("vendor-across"), llama_cells.reports, llama_cells.matrix)


def test_a_vendors_bundle_of_the_cells_across_hosts_is_accepted(vendor):
    report = vendor.check(vendor.bundle)
    assert report.accepted, "\n".join(report.lines())
    assert {RPC, ROUTED} <= set(report.cells)


ACROSS = [  # (cell, the victim launch, the launch whose log stands in for it): launch indices
    (RPC, 1, 0),  # the rpc-server's log
    (RPC, 0, 1),  # the endpoint's: it holds every request
    (ROUTED, 1, 0),  # worker2's
    (ROUTED, 2, 0),  # the router's
]


@pytest.mark.parametrize("forgery", ["dropped", "duplicated", "swapped"])
@pytest.mark.parametrize(
    ("cell_id", "victim", "other"), ACROSS, ids=["rpc-server", "rpc-endpoint", "worker2", "router"]
)
def test_one_launchs_log_dropped_duplicated_or_swapped_is_rejected(
    vendor, tmp_path, forgery, cell_id, victim, other
):
    """Re-signed by the vendor: the signature is good, each launch's own log must catch it."""
    from .submission_corpus.hostile import first
    from .submission_corpus.lab import VENDOR
    from .submission_corpus.launches import FORGERIES
    from .submission_corpus.tarkit import resign, write_members

    members = vendor.members()
    ev = first(members, f"evidence/{cell_id.replace('/', '__')}__")
    forged = resign(FORGERIES[forgery](members, ev, victim, other), vendor.key, VENDOR, tmp_path)
    report = vendor.check(write_members(tmp_path / "forged.tar.gz", forged))
    assert not report.accepted
    assert report.findings and {f.requirement.split(".")[0] for f in report.findings} == {"engine"}, (
        "\n".join(report.lines())
    )


ROUTED_ROLES = {("worker1", 0), ("worker2", 0), ("router", 0)}


def assert_two_host_cells(docs: dict[str, dict], roles_of: dict[str, set]) -> None:
    """Each cell's roles on two hosts, every host's lease window, every role's log collected."""
    for cell_id, roles in roles_of.items():
        doc = docs[cell_id]
        launches = doc["recipe"]["launches"]
        assert {(x["role"], x["rank"]) for x in launches} == roles
        hosts = {h["name"]: h for h in doc["hosts"]}
        assert len(hosts) == 2 and {x["host"] for x in launches} == set(hosts)
        for h in hosts.values():  # every host's lease window
            lease = h["lease"]
            assert datetime.fromisoformat(lease["acquired"]) < datetime.fromisoformat(lease["released"])
        assert len(doc["logs"]) == len(launches), "every role's log collected"
        for x in launches:
            log = f"{x['host']}-{x['role']}-{x['rank']}.log"
            assert any(p.endswith(log) for p in doc["logs"]), log
        assert [x for x in launches if x["endpoint"]][0]["rank"] == 0


def context(matrix: Path, inv: Path, reports: Path, say, **options) -> RunContext:
    m = load_matrix(matrix)
    return RunContext(
        m,
        load_inventory(inv, set(m.hardware)),
        reports,
        REPO / "suites" / "goldens",
        new_run_id(),
        lease_wait=120,
        heartbeat_timeout=10,
        say=say,
        **options,
    )


@pytest.mark.parametrize(("cell_id", "victim"), [(RPC, "server[1]"), (ROUTED, "worker2[0]")])
def test_a_non_endpoint_process_killed_mid_benchmark_fails_the_cell(
    bed, quick_matrix, tmp_path, cell_id, victim
):
    """rpc-server (rank 1) or one router worker killed while measuring: a product failure naming
    the role, its log kept, every other role stopped on every host."""
    pgids: dict[str, int] = {}

    def say(message: str) -> None:
        if m := re.match(r"started (\S+) on \S+ \(pgid (\d+)\)", message):
            pgids[m.group(1)] = int(m.group(2))
        if message.startswith("ready after"):
            threading.Timer(2.0, os.killpg, (pgids[victim], signal.SIGKILL)).start()

    ctx = context(quick_matrix, inventory(bed), tmp_path / "reports", say)
    try:
        outcome = run_cell(ctx, ctx.matrix.cell(cell_id))
    finally:
        ctx.close()
    assert outcome.verdict == "failed", outcome.error  # a product fault, not broken
    assert re.search(rf"{re.escape(victim)} on lab\d died", outcome.error), outcome.error
    doc = json.loads(outcome.evidence_path.read_text())
    assert doc["verdict"] == "failed" and len(doc["logs"]) == len(doc["recipe"]["launches"])
    assert not nothing_left(bed)


def test_controller_sigkill_mid_cell_watchdogs_clean_every_host(bed, quick_matrix, tmp_path):
    """The controller dies with SIGKILL while the routed cell runs on two hosts: the watchdog on
    each host kills its roles once the heartbeat goes stale, and the leases expire."""
    inv, reports = inventory(bed), tmp_path / "reports"
    proc = subprocess.Popen(
        pytest_cmd(
            quick_matrix,
            "-m",
            "cpu and llama.cpp and routed",
            "--hosts",
            str(inv),
            f"--reports={reports}",
            "--heartbeat-timeout=8",
        ),
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            logs = "".join(p.read_text() for p in reports.glob("runs/*/progress.log"))
            if "ready after" in logs:
                break
            time.sleep(0.3)
        assert "ready after" in logs, logs[-2000:]
        running = {h.address for h in bed.hosts if processes_matching(f"--host {h.address} ")}
        assert len(running) == 2, logs[-2000:]
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    left = [p for h in bed.hosts for p in processes_matching(f"--host {h.address} ")]
    assert left, "the roles outlived their controller (until the watchdogs act)"

    # The leases stay on disk until reclaimed as stale; the roles and the watchdogs (which wait
    # 10 s between TERM and KILL) must go within the ttl and that grace.
    def running() -> list[str]:
        roles = [p for h in bed.hosts for p in processes_matching(f"--host {h.address} ")]
        watchdogs = [p for h in bed.hosts for p in processes_matching(str(bed.directory / "work" / h.name))]
        return roles + [p for p in watchdogs if "sshd" not in p]

    deadline = time.monotonic() + 60
    while (left := running()) and time.monotonic() < deadline:
        time.sleep(1)
    assert not left, left
    for h in bed.hosts:  # a stale lease is reclaimed by the next run; clear it for the next test
        for slot in (bed.directory / "work" / h.name / "leases").glob("slot-*"):
            owner = json.loads((slot / "owner.json").read_text())
            assert owner["cell"] == ROUTED
            subprocess.run(["rm", "-rf", str(slot)], check=True)


def test_two_runs_racing_for_the_same_three_hosts_both_finish(bed, quick_matrix, tmp_path):
    """Two runs each want the routed and the multi-node cell (2 hosts each) on the same 3 hosts:
    all-or-none leasing means neither holds a host while waiting, so both finish."""
    inv = inventory(bed)
    procs = [
        subprocess.Popen(
            pytest_cmd(
                quick_matrix,
                "-m",
                "cpu and llama.cpp and (rpc_split or routed)",
                "--hosts",
                str(inv),
                f"--reports={tmp_path / f'r{i}'}",
                "--lease-wait=600",
            ),
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i in range(2)
    ]
    outs = [p.communicate(timeout=1500)[0] for p in procs]
    for p, out in zip(procs, outs, strict=True):
        assert p.returncode == 0 and "2 passed" in out, out[-3000:]
    spans = []
    for i in range(2):
        for doc in evidence(tmp_path / f"r{i}").values():
            for h in doc["hosts"]:
                lease = h["lease"]
                spans.append((h["name"], lease["acquired"], lease["released"]))
    for name in {s[0] for s in spans}:  # one host never held by two cells at once
        mine = sorted((a, b) for n, a, b in spans if n == name)
        assert all(mine[i][1] <= mine[i + 1][0] for i in range(len(mine) - 1)), mine
    assert not nothing_left(bed)


def test_a_rank_that_never_becomes_ready_ends_the_cell_as_still_loading_before_rank_0_starts(
    bed, quick_matrix, tmp_path
):
    """rpc-server alive but never accepting: at the deadline the cell ends as still loading (a lab
    fault: weights may be slow to load on the host) naming rank 1, rank 0 was never started (it
    would have nothing to connect to), nothing stays on either host."""
    from dayzero.errors import StillLoading

    mdir = tmp_path / "matrix"
    subprocess.run(["cp", "-r", str(quick_matrix), str(mdir)], check=True)
    card_path = mdir / "models" / "smollm2-135m.yaml"
    card = yaml.safe_load(card_path.read_text())
    marker = f"never{os.getpid()}"
    card["engine"]["worker"]["command"] = ["bash", "-c", f"exec sleep 300 # {marker} {{port}}"]
    card_path.write_text(yaml.safe_dump(card, sort_keys=False))
    seen: list[str] = []
    ctx = context(mdir, inventory(bed), tmp_path / "reports", seen.append, ready_deadline=4)
    try:
        with pytest.raises(StillLoading) as err:
            run_cell(ctx, ctx.matrix.cell(RPC))
    finally:
        ctx.close()
    assert re.search(r"server\[1\] on lab\d not ready within the 4s deadline", str(err.value)), err.value
    assert not [m for m in seen if m.startswith("started server[0]")], "rank 0 waits for rank 1"
    assert not processes_matching(marker)
    assert not nothing_left(bed)


def test_sshd_of_the_second_host_stopped_mid_cell_is_broken_and_its_watchdog_cleans_up(
    bed, quick_matrix, tmp_path
):
    """The host running rpc-server (rank 1) stops answering once the cell is ready, before its
    first request: the cell is broken (a lab fault, not the engine's), rank 0 is stopped by the
    teardown, and rank 1 by the watchdog on its host once the lease it watches goes stale.

    The listener is stopped before its connections are killed, so no dial after the cut can be
    served; the other order left a window in which the controller's pool dialled the still-running
    listener again and the cell went on (stop 51's CI: "DID NOT RAISE InfrastructureError"). The
    cut is made in the run's own progress callback, in place before the next step, not by a timer."""
    from dayzero.errors import InfrastructureError

    hosts: dict[str, str] = {}
    stopped: list[int] = []

    def say(message: str) -> None:
        if m := re.match(r"started (\S+) on (\S+) \(pgid", message):
            hosts[m.group(1)] = m.group(2)
        if message.startswith("ready after"):
            victim = hosts["server[1]"]
            pid = bed.pid(victim)
            os.kill(pid, signal.SIGSTOP)  # first: a dial from now on is never served
            stopped.append(pid)
            bed.kill_connections(victim)

    ctx = context(quick_matrix, inventory(bed), tmp_path / "reports", say)
    try:
        with pytest.raises(InfrastructureError):
            run_cell(ctx, ctx.matrix.cell(RPC))
    finally:
        ctx.close()
        for pid in stopped:
            os.kill(pid, signal.SIGCONT)
    assert stopped, "the fault was injected"
    (path,) = (tmp_path / "reports" / "evidence").glob("*.json")
    doc = json.loads(path.read_text())
    assert doc["verdict"] == "broken", doc.get("error")
    victim = bed.host(hosts["server[1]"])
    deadline = time.monotonic() + 60  # heartbeat ttl 10 s + the watchdog's TERM grace
    while processes_matching(f"--host {victim.address} ") and time.monotonic() < deadline:
        time.sleep(1)
    assert not processes_matching(f"--host {victim.address} "), "rank 1 outlived its watchdog"
    for h in bed.hosts:
        assert not processes_matching(f"--host {h.address} ")
        leases = list((bed.directory / "work" / h.name / "leases").glob("slot-*"))
        if h.name == victim.name:  # unreachable at release: left stale, reclaimed by the next run
            for slot in leases:
                subprocess.run(["rm", "-rf", str(slot)], check=True)
        else:
            assert not leases, "the reachable host's lease is released"


# How far a two-host stub cell got, from what it printed (its teardown prints on every path):
# leased both hosts, started the first wave (the worker), the second (the endpoint), ready, one
# load run measured, passed.
PHASES = ("leased", "started worker[0]", "started server[0]", "ready after", " run 1/", "1 passed")


def test_sigint_at_any_instant_of_a_cell_across_two_hosts_ends_the_run_interrupted(bed, tmp_path):
    """Sweep a terminal's Ctrl-C across a two-host stub cell: leasing and preflighting both hosts,
    the first wave (the worker on one host), the second (the endpoint on the other), readiness,
    load, the teardown on each host, evidence. Whatever the instant, the run ends interrupted, the
    cell is never reported failed, and no process, lease or watchdog is left on any host."""
    # An earlier test's watchdog may still be ending its cell (TERM, 10 s, KILL): the shared bed's
    # check lets a process naming a lease wind down, and what is left on the hosts below must be
    # this sweep's (seen in a clean-clone run, once its cold run took 3 s instead of 6)
    assert not (earlier := nothing_left(bed)), f"an earlier test's processes are still ending: {earlier}"
    port = random.randint(20000, 29000)  # ours alone
    card = stub_pair_card(model="sweep2", port=port)
    data = yaml.safe_load(inventory(bed).read_text())
    for host in data["hosts"].values():
        host.setdefault("vars", {})["ttft"] = "0.05"
        host["max_foreign_load"] = 0  # a stub's speed is no measurement: no load sample in preflight
    inv = tmp_path / "hosts.yaml"
    inv.write_text(yaml.safe_dump(data))

    def run(name: str, offset: float | None, after: str = "leased") -> Path:
        root = tmp_path / name
        stub_matrix(root, card)
        args = [
            "-m",
            "paired",
            f"--matrix={root / 'matrix'}",
            f"--hosts={inv}",
            f"--reports={root / 'reports'}",
        ]
        code, out, sent = run_interrupted([*args, "--heartbeat-timeout=60"], offset, after=after)
        when = "never" if offset is None else f"{offset}s after {after or 'the start'}"
        if offset is None:
            assert code == 0, out[-3000:]
        assert_ended_interrupted(root / "reports", code, out, sent, when)
        left = left_on(bed) + processes_matching(f"--port {port} ")
        assert not left, f"SIGINT {when} left on the hosts: {left}\n{out[-3000:]}"
        reached[when] = next((p for p in reversed(PHASES) if p in out), "leasing")
        return root

    reached: dict[str, str] = {}

    run("cold", None)  # a fresh clone's first run compiles every module: later runs are faster
    t0 = time.time()
    (doc,) = evidence(run("whole", None) / "reports").values()
    assert len(doc["hosts"]) == 2
    leased = datetime.fromisoformat(doc["hosts"][0]["lease"]["acquired"]).timestamp() - t0
    rest = time.time() - t0 - leased
    # from the start: leasing and preflight of each host; after "leased": everything else
    # (19 runs of ~8 s: CI's budget; the ">= 5 phases reached" assert below keeps the spread honest)
    for offset in sorted({round(max(0.0, leased + d), 2) for d in (-0.4, -0.15, -0.05)}):
        run(f"start-{offset}", offset, after="")
    # after "leased": densely across the two waves (a few tenths of a second), then across probes,
    # load and the teardown on each host
    fine = [k * 0.08 for k in range(6)]
    coarse = [rest * k / 8 for k in range(2, 8)] + [rest - d for d in (0.3, 0.1)]
    for offset in sorted({round(max(0.0, x), 2) for x in fine + coarse}):
        run(f"leased-{offset}", offset)
    print("the phase each SIGINT reached:", reached)
    assert len(set(reached.values())) >= 5, f"the sweep covers few of the cell's phases: {reached}"


# -- real SGLang across hosts -----------------------------------------------------------------------


SGLANG_CELLS = "cpu and sglang and (tp2_nodes or routed or pd)"
PD_ROLES = {("prefill", 0), ("decode", 0), ("router", 0)}


@pytest.fixture(scope="module")
def sglang_cells(ssh_lab, quick_matrix, tmp_path_factory) -> HostsRun:
    """SGLang 0.5.23's cells across hosts (tp2_nodes, routed, pd) in one pytest run on the session's
    testbed, one after another (SGLang's idle scheduler busy-polls a core: cells side by side on 2
    cores starved each other), judged by the two tests below: one start of the run and one vendor
    bundle for the three cells, not one of each per test."""
    reports = tmp_path_factory.mktemp("sglang-across") / "reports"
    t0 = time.monotonic()
    with e2e_lock():
        result = subprocess.run(
            pytest_cmd(
                quick_matrix,
                "-m",
                SGLANG_CELLS,
                f"--hosts={inventory(ssh_lab.bed)}",
                f"--reports={reports}",
                "-rA",
            ),
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=1800,
        )
    return HostsRun(result, reports, quick_matrix, time.monotonic() - t0)


@pytest.fixture(scope="module")
def sglang_vendor(sglang_cells, tmp_path_factory):
    """The SGLang run packed by a vendor (no new launch): checked against the matrix it ran."""
    from .submission_corpus.lab import lab_from_run

    assert sglang_cells.result.returncode == 0, sglang_cells.result.stdout[-5000:]
    return lab_from_run(tmp_path_factory.mktemp("vendor-sglang"), sglang_cells.reports, sglang_cells.matrix)


def test_sglang_two_node_tp_and_routed_cells_across_ssh_hosts(bed, sglang_cells, sglang_vendor):
    """SGLang 0.5.23 itself across hosts: one server tensor-parallel over two hosts (--tp 2
    --nnodes 2, one rank per host over gloo, rendered by the Kimi cells' multinode_args path) and
    two SGLang workers behind sglang-router. Both pass, as the run's third cell (pd) does, and
    nothing is left on any host (no launcher, sglang::scheduler, sglang::detokenizer,
    sglang::router, lease). The run packed by a vendor is accepted: rank 0's log holds every
    request of the tp2 cell, rank 1's is a rank's; the routed cell's requests are reconciled
    across both workers."""
    result = sglang_cells.result
    assert result.returncode == 0, result.stdout[-5000:]
    assert "3 passed" in result.stdout, result.stdout[-2000:]
    docs = evidence(sglang_cells.reports)
    assert set(docs) == {TP2, SGLANG_ROUTED, PD} and all(d["verdict"] == "passed" for d in docs.values())
    assert_two_host_cells(docs, {TP2: {("server", 0), ("server", 1)}, SGLANG_ROUTED: ROUTED_ROLES})
    for cell in (TP2, SGLANG_ROUTED):
        assert docs[cell]["engine"] == {"name": "sglang", "version": "sglang 0.5.23"}
    tp = docs[TP2]["recipe"]["launches"]
    assert [x["endpoint"] for x in tp] == [True, False] and tp[1]["ready"] == "alive"
    addrs = {re.search(r"--dist-init-addr (\S+)", x["command"]).group(1) for x in tp}
    assert len(addrs) == 1, addrs  # both ranks meet at rank 0's address
    for x in tp:
        assert "--tp 2" in x["command"] and "--nnodes 2" in x["command"]
        assert f"--node-rank {x['rank']}" in x["command"]
    router = next(x for x in docs[SGLANG_ROUTED]["recipe"]["launches"] if x["role"] == "router")
    assert "sglang_router.launch_router" in router["command"]
    assert not nothing_left(bed)
    report = sglang_vendor.check(sglang_vendor.bundle)
    assert report.accepted and set(report.cells) == {TP2, SGLANG_ROUTED, PD}, "\n".join(report.lines())


def test_an_sglang_prefill_decode_cell_across_ssh_hosts_and_its_vendor_bundle(
    bed, sglang_cells, sglang_vendor, tmp_path
):
    """SGLang 0.5.23 disaggregated for real: the prefill server on one host, the decode server on
    another, the KV cache moved over TCP (mooncake_tcp), the router in front; the cell passes and
    leaves nothing. The same run packed by a vendor is accepted (each request in one prefill and
    one decode log), and one launch's log dropped, duplicated or swapped, re-signed, is not."""
    from .submission_corpus.hostile import first
    from .submission_corpus.lab import VENDOR
    from .submission_corpus.launches import FORGERIES
    from .submission_corpus.tarkit import resign, write_members

    docs = evidence(sglang_cells.reports)
    assert PD in docs and docs[PD]["verdict"] == "passed", sglang_cells.result.stdout[-5000:]
    assert_two_host_cells(docs, {PD: PD_ROLES})
    launches = docs[PD]["recipe"]["launches"]
    side = {x["role"]: x for x in launches}
    assert "--disaggregation-mode prefill" in side["prefill"]["command"]
    assert "--disaggregation-mode decode" in side["decode"]["command"]
    assert side["prefill"]["host"] != side["decode"]["host"]
    assert "--pd-disaggregation" in side["router"]["command"] and side["router"]["endpoint"]
    assert not nothing_left(bed)

    vendor = sglang_vendor
    report = vendor.check(vendor.bundle)
    assert report.accepted and PD in report.cells, "\n".join(report.lines())
    members = vendor.members()
    ev = first(members, f"evidence/{PD.replace('/', '__')}__")
    index = {x["role"]: i for i, x in enumerate(launches)}
    cases = [
        ("dropped", "decode", "prefill"),
        ("duplicated", "decode", "prefill"),  # the prefill log stands in for the decode one
        ("swapped", "decode", "prefill"),
        ("dropped", "prefill", "decode"),
    ]
    for forgery, victim, other in cases:
        forged = resign(
            FORGERIES[forgery](members, ev, index[victim], index[other]), vendor.key, VENDOR, tmp_path
        )
        report = vendor.check(write_members(tmp_path / f"{forgery}-{victim}.tar.gz", forged))
        assert not report.accepted, (forgery, victim)
        assert {f.requirement.split(".")[0] for f in report.findings} == {"engine"}, "\n".join(report.lines())


SGLANG_SWEEP = (  # (after the line with, offset s): what of SGLang's process tree is up then
    ("started server[0]", 20.0),  # scheduler and detokenizer spawned, weights loading, not ready
    ("ready after", 8.0),  # goldens / measurement under load: launcher, scheduler, detokenizer
)  # (the launcher alone, 1 s after its start, and the probes, 0.5 s after ready, passed too)


@pytest.mark.parametrize(("after", "offset"), SGLANG_SWEEP, ids=[f"{a}+{o}s" for a, o in SGLANG_SWEEP])
def test_sigint_at_instants_of_an_sglang_cell_leaves_nothing(bed, quick_matrix, tmp_path, after, offset):
    """A terminal's Ctrl-C at several instants of a real SGLang cell on an SSH host, from the
    launcher's imports to the measurement: the run ends interrupted, the cell is never failed, and
    no SGLang process (launcher, sglang::scheduler, sglang::detokenizer), watchdog or lease is left."""
    reports = tmp_path / "reports"
    args = [
        "-m", "cpu and sglang and low_latency and baseline", f"--matrix={quick_matrix}",
        f"--hosts={inventory(bed)}", f"--reports={reports}", "--heartbeat-timeout=60",
    ]  # fmt: skip
    code, out, sent = run_interrupted(args, offset, after=after)
    when = f"{offset}s after {after!r}"
    assert sent != float("inf"), f"never saw {after!r}:\n{out[-3000:]}"
    assert_ended_interrupted(reports, code, out, sent, when)
    left = nothing_left(bed)
    assert not left, f"SIGINT {when} left on the hosts: {left}\n{out[-3000:]}"
