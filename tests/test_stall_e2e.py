"""A hung engine, for real: llama-server SIGSTOPped mid-cell, on the local inventory and on a
testbed host over SSH; and a host whose network drops every packet (its own network namespace).

The cell must end within the card's stall bound (plus the teardown's kill grace), as the card's
verdict, with nothing left: no llama-server, no watchdog, no lease. Without stall detection the
client would wait its 600 s per request; the test resumes the server after RESCUE_S so that such
a run ends, and fails on the time it took.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
import yaml

from dayzero.lab.transport.base import group_alive
from dayzero.run.cell import run_cell
from dayzero.spec.inventory import load_inventory

from .conftest import needs_engine, processes_matching
from .test_multihost_e2e import context, inventory, nothing_left

pytestmark = [pytest.mark.e2e, needs_engine]

STALL_S = 8.0
KILL_GRACE_S = 10.0  # Transport.kill's TERM grace in the teardown
# What the teardown of a cell may spend on a host that fell silent: no step dials it again
# (SILENT_HOLD_S), so this is the client's last beat before the cut and the steps' own work.
TEARDOWN_ON_A_DEAD_HOST_S = 30.0
RESCUE_S = 120.0  # far past the bound: only a run without stall detection is still waiting


def stall_matrix(dest: Path, verdict: str) -> Path:
    """The repository's matrix, short protocol (tests/submission_corpus), with a short stall bound."""
    from .submission_corpus.lab import relaxed_matrix

    matrix = relaxed_matrix(dest)
    path = matrix / "models" / "smollm2-135m.yaml"
    card = yaml.safe_load(path.read_text())
    card["protocol"]["stall"] = {"after_s": STALL_S, "verdict": verdict}
    path.write_text(yaml.safe_dump(card, sort_keys=False))
    return matrix


def cpu_cell(matrix, mode: str = "high_throughput"):
    return next(
        c
        for c in matrix.cells
        if c.hardware == "cpu" and c.mode == mode and c.strategy == "baseline" and "sglang" not in c.id
    )


def _signal(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, sig)


def group_gone(pgid: int, within: float) -> bool:
    deadline = time.monotonic() + within
    while subprocess.run(["bash", "-c", group_alive(pgid)]).returncode == 0:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.5)
    return True


class Freezer:
    """SIGSTOPs the cell's llama-server 1 s after it is ready (the probes under way), and
    resumes it RESCUE_S later, so that a run without stall detection still ends (and fails on
    the time it took). `say` is the run's progress callback; `thaw` ends what is left."""

    def __init__(self) -> None:
        self.pgids: list[int] = []
        self.stopped: list[float] = []
        self.rescue: list[threading.Timer] = []

    def say(self, message: str) -> None:
        if m := re.match(r"started server\[0\] on \S+ \(pgid (\d+)\)", message):
            self.pgids.append(int(m.group(1)))
        if message.startswith("ready after"):
            threading.Timer(1.0, self._stop).start()

    def _stop(self) -> None:
        _signal(self.pgids[0], signal.SIGSTOP)
        self.stopped.append(time.monotonic())
        self.rescue.append(threading.Timer(RESCUE_S, lambda: _signal(self.pgids[0], signal.SIGCONT)))
        self.rescue[0].start()

    def thaw(self) -> None:
        for timer in self.rescue:
            timer.cancel()
        for pgid in self.pgids:  # a run that failed its asserts must not leave a stopped server
            subprocess.run(["bash", "-c", f"kill -CONT -- -{pgid}; kill -KILL -- -{pgid}"], check=False)


@pytest.mark.parametrize("verdict", ["failed", "broken"])
def test_a_sigstopped_llama_server_ends_the_cell_within_the_stall_bound(tmp_path, local_inventory, verdict):
    from dayzero.errors import InfrastructureError

    inv = local_inventory()
    freezer = Freezer()
    pgids, stopped = freezer.pgids, freezer.stopped
    ctx = context(stall_matrix(tmp_path / "matrix", verdict), inv, tmp_path / "reports", freezer.say)
    cell = cpu_cell(ctx.matrix)
    try:
        if verdict == "failed":
            outcome = run_cell(ctx, cell)
            error = outcome.error
            assert outcome.verdict == "failed", error
        else:
            with pytest.raises(InfrastructureError) as err:
                run_cell(ctx, cell)
            error = str(err.value)
        ended = time.monotonic()
    finally:
        ctx.close()
        freezer.thaw()
    assert stopped, "the fault was injected"
    took = ended - stopped[0]
    assert "engine stall on local" in error, error
    assert took < STALL_S + KILL_GRACE_S + 20, f"the cell ended {took:.0f}s after the server stopped"
    assert group_gone(pgids[0], 0), "llama-server outlived the cell"
    (doc,) = [json.loads(p.read_text()) for p in (tmp_path / "reports" / "evidence").glob("*.json")]
    assert doc["verdict"] == verdict and "engine stall" in doc["error"]
    workdir = tmp_path / "work"
    assert not [p for p in processes_matching(str(workdir)) if "pytest" not in p], "watchdog left"
    assert not list((workdir / "leases").glob("slot-*")), "lease left"


# --- the host's network drops every packet mid-cell ------------------------------------------------


@pytest.fixture
def netns_bed(tmp_path):
    """One testbed host inside its own network namespace (devlab.netns), engine as the testbed's."""
    from devlab import netns, testbed

    try:
        host = netns.create(20 + os.getpid() % 200)
    except netns.NetnsError as exc:
        pytest.skip(f"no network namespace here: {exc}")
    try:
        setup, variables = testbed.engine_defaults()
        bed = testbed.start(
            1,
            tmp_path / "bed",
            port=2222,
            engine_setup=setup,
            variables=variables,
            sshd=str(host.sshd_wrapper(tmp_path)),
            addresses=[host.address],
        )
        try:
            yield bed, host
        finally:
            bed.stop()
    finally:
        host.delete()


def test_a_sigstopped_llama_server_on_an_ssh_host_ends_the_cell_within_the_stall_bound(netns_bed, tmp_path):
    """The same hung engine on a testbed host reached over SSH: its client keeps beating while the
    engine is silent, so the stall bound (not the host's silence) ends the cell, as the card's
    verdict (failed); the teardown kills the stopped server over SSH and releases the lease."""
    bed, _ = netns_bed
    freezer = Freezer()
    matrix = stall_matrix(tmp_path / "matrix", "failed")
    ctx = context(matrix, inventory(bed), tmp_path / "reports", freezer.say)
    try:
        outcome = run_cell(ctx, cpu_cell(ctx.matrix))
        ended = time.monotonic()
    finally:
        ctx.close()
        freezer.thaw()
    assert freezer.stopped, "the fault was injected"
    took = ended - freezer.stopped[0]
    print(f"cell ended {took:.1f}s after the server stopped")
    assert outcome.verdict == "failed", outcome.error
    assert f"engine stall on {bed.hosts[0].name}" in outcome.error, outcome.error
    assert took < STALL_S + KILL_GRACE_S + 20, f"the cell ended {took:.0f}s after the server stopped"
    assert group_gone(freezer.pgids[0], 0), "llama-server outlived the cell"
    assert not nothing_left(bed), "something was left on the host"


def test_the_hosts_network_dropping_every_packet_mid_cell_is_broken_within_the_bound(
    netns_bed, tmp_path, monkeypatch
):
    """The endpoint host's network drops every packet (no reset) while the cell measures: a lab
    fault, found within the stall bound (the client's beat stops reaching the controller), the
    cell broken even though the card calls an engine stall a failure. Once the network is back,
    the host's own watchdog has stopped the server (its lease went stale), nothing is left, and
    the stale lease is taken by the next run."""
    from dayzero.errors import InfrastructureError
    from dayzero.lab.lease import release, try_acquire
    from dayzero.lab.transport import open_transport
    from dayzero.lab.transport.ssh import pool

    # The silent host is held 25 s, not 60: it outlasts the teardown (which must fail each step at
    # once, within TEARDOWN_ON_A_DEAD_HOST_S) and the watchdog's kill (~25 s after the cut), and the
    # takeover of the stale lease below then waits 35 s less
    monkeypatch.setattr(pool, "SILENT_HOLD_S", 25.0)
    SILENT_HOLD_S = pool.SILENT_HOLD_S
    bed, host = netns_bed
    cut: list[float] = []

    def say(message: str) -> None:
        if message.startswith("ready after"):

            def drop() -> None:
                host.cut()
                cut.append(time.monotonic())

            threading.Timer(1.0, drop).start()

    ctx = context(stall_matrix(tmp_path / "matrix", "failed"), inventory(bed), tmp_path / "reports", say)
    cell, inv = cpu_cell(ctx.matrix), ctx.inventory
    try:
        with pytest.raises(InfrastructureError) as err:
            run_cell(ctx, cell)
        ended = time.monotonic()
    finally:
        ctx.close()
        if cut:
            host.mend()
    assert cut, "the fault was injected"
    took = ended - cut[0]
    print(f"cell ended {took:.1f}s after the network went")
    assert "stopped answering" in str(err.value), str(err.value)
    assert took < STALL_S + TEARDOWN_ON_A_DEAD_HOST_S, f"the cell ended {took:.0f}s after the network went"
    (doc,) = [json.loads(p.read_text()) for p in (tmp_path / "reports" / "evidence").glob("*.json")]
    assert doc["verdict"] == "broken" and "stopped answering" in doc["error"]
    lab = bed.hosts[0]
    deadline = time.monotonic() + 60  # heartbeat ttl 10 s, the watchdog's poll and TERM grace
    while processes_matching(f"--host {lab.address} ") and time.monotonic() < deadline:
        time.sleep(1)
    assert not processes_matching(f"--host {lab.address} "), "llama-server outlived its watchdog"
    # The controller does not dial a host that fell silent for SILENT_HOLD_S (a transport dials on
    # its first command): wait that out; then the lease, untouched since the cut, is stale: taken over.
    transport = open_transport(inv.hosts[0], inv)
    deadline = cut[0] + SILENT_HOLD_S + 30
    while True:
        try:
            lease = try_acquire(transport, "next", "next", "t", ttl=10)
        except InfrastructureError as held:
            assert "not dialled" in str(held) and time.monotonic() < deadline, str(held)
            lease = None
        if hasattr(lease, "slot"):
            break
        assert time.monotonic() < deadline, f"the stale lease was never taken over: {lease}"
        time.sleep(2)
    release(transport, lease)
    assert not nothing_left(bed), "something was left on the host"


def _transport(bed):
    from dayzero.lab.transport import open_transport

    inv = load_inventory(inventory(bed))
    return open_transport(inv.hosts[0], inv)


def test_a_command_whose_host_falls_silent_ends_at_the_silence_bound(netns_bed):
    """The network is fine but the command says nothing (a hung host, a client that stopped
    beating): `run_heard` gives up after `silence`, long before the command's deadline."""
    from dayzero.errors import HostSilent

    bed, _ = netns_bed
    transport = _transport(bed)
    assert transport.run_heard("echo hi", timeout=30, silence=3).stdout == "hi\n"
    t0 = time.monotonic()
    with pytest.raises(HostSilent, match="stopped answering"):
        transport.run_heard("sleep 120", timeout=300, silence=3)
    assert time.monotonic() - t0 < 30


def test_a_command_on_a_host_whose_network_drops_every_packet_ends_within_the_keepalive_bound(netns_bed):
    """No output expected, no silence bound: only the SSH keepalive (and the kernel's
    TCP_USER_TIMEOUT on what it sends) can tell the controller the host is gone."""
    from dayzero.errors import InfrastructureError
    from dayzero.lab.transport.ssh.pool import DEAD_AFTER_S, KEEPALIVE_S

    bed, host = netns_bed
    transport = _transport(bed)
    transport.run("true", timeout=30)
    threading.Timer(2.0, host.cut).start()
    t0 = time.monotonic()
    try:
        with pytest.raises(InfrastructureError):
            transport.run("sleep 280", timeout=300)
        took = time.monotonic() - t0
    finally:
        host.mend()
    print(f"the command ended {took:.1f}s after it started (network cut at 2 s)")
    assert took < 2 + KEEPALIVE_S + DEAD_AFTER_S + 10, f"{took:.0f}s"
