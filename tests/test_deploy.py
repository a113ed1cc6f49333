"""Deployments tear down on every exit path: early exit, never ready, success.

The "never ready" server is `sleep` (a real process that never listens); the early-exit server
is the real llama-server given a model file that does not exist.
"""

from __future__ import annotations

import json
import os
import random
import shutil

import pytest

from dayzero.errors import StillLoading
from dayzero.run.cell import RunContext, new_run_id, run_cell
from dayzero.spec.inventory import load_inventory
from dayzero.spec.matrix import load_matrix

from .conftest import REPO, fake_card, needs_engine, processes_matching, write_yaml


def context(tmp_path, card: dict, inventory_path, ready_deadline=60.0) -> RunContext:
    mdir = tmp_path / "matrix"
    (mdir / "models").mkdir(parents=True)
    shutil.copy(REPO / "matrix" / "hardware.yaml", mdir / "hardware.yaml")
    write_yaml(mdir / "models" / f"{card['model']}.yaml", card)
    matrix = load_matrix(mdir)
    return RunContext(
        matrix,
        load_inventory(inventory_path, set(matrix.hardware)),
        tmp_path / "reports",
        tmp_path / "goldens",
        new_run_id(),
        ready_deadline=ready_deadline,
        lease_wait=30,
        say=lambda m: None,
    )


def test_still_loading_at_the_cards_deadline_is_broken_and_kills_the_group(tmp_path, local_inventory):
    """Alive but not ready by the card's own ready_deadline: the lab's fault (weights that load
    slower here than the card allows), told apart from an engine that died (failed, below)."""
    marker = str(random.randint(100000, 999999))
    card = fake_card(["bash", "-c", f"sleep {marker}; sleep 1"], port=18500)
    card["ready_deadline"] = 3
    ctx = context(tmp_path, card, local_inventory(), ready_deadline=None)
    with pytest.raises(StillLoading, match="not ready within the 3s deadline, still running") as caught:
        run_cell(ctx, ctx.matrix.cells[0])
    assert "127.0.0.1:18500/health" in str(caught.value)
    assert not processes_matching(f"sleep {marker}"), "the server's process group must be killed"
    (path,) = (tmp_path / "reports" / "evidence").glob("*.json")
    doc = json.loads(path.read_text())
    assert doc["verdict"] == "broken" and "deadline" in doc["error"]
    assert doc["readiness"] == {"deadline_s": 3}, "never ready: no time to ready"
    assert not list((tmp_path / "work" / "leases").glob("slot-*")), "lease released"


@needs_engine
def test_early_exit_fails_fast_with_the_log_tail(tmp_path, local_inventory):
    card = fake_card(
        ["llama-server", "--model", "/nonexistent/model.gguf", "--host", "{bind}", "--port", "{port}"],
        port=18501,
    )
    ctx = context(tmp_path, card, local_inventory(), ready_deadline=120)
    outcome = run_cell(ctx, ctx.matrix.cells[0])
    assert outcome.verdict == "failed"
    assert "server[0] on local exited before the cell became ready" in outcome.error  # died: failed
    assert "/nonexistent/model.gguf" in outcome.error, "the server log tail explains why"
    assert not processes_matching("/nonexistent/model.gguf")
    logs = json.loads(outcome.evidence_path.read_text())["logs"]
    assert logs and (ctx.reports_dir / logs[0]).exists()


def test_engine_missing_is_infrastructure(tmp_path, local_inventory):
    from dayzero.errors import InfrastructureError

    card = fake_card(["sleep", "1"], port=18502)
    card["engine"]["version_command"] = "no-such-engine --version"
    ctx = context(tmp_path, card, local_inventory())
    with pytest.raises(InfrastructureError, match="engine fake not usable.*no-such-engine"):
        run_cell(ctx, ctx.matrix.cells[0])
    doc = json.loads(next((ctx.reports_dir / "evidence").glob("*.json")).read_text())
    assert doc["verdict"] == "broken"


def test_port_in_use_is_refused_before_launch(tmp_path, local_inventory, monkeypatch):
    import socket

    from dayzero.errors import InfrastructureError
    from dayzero.lab import deploy

    monkeypatch.setattr(deploy, "PORT_GRACE", 2)  # the refusal is under test, not the grace's length
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        card = fake_card(["sleep", "30"], port=port)
        ctx = context(tmp_path, card, local_inventory())
        with pytest.raises(InfrastructureError, match=f"port {port} .* already in use"):
            run_cell(ctx, ctx.matrix.cells[0])


def test_a_port_freed_within_the_grace_is_taken(tmp_path, local_inventory):
    """A server killed a moment ago (by a watchdog, say) may still hold the port briefly."""
    import socket
    import threading

    marker = str(random.randint(100000, 999999))
    squatter = socket.socket()
    squatter.bind(("127.0.0.1", 0))
    squatter.listen()
    port = squatter.getsockname()[1]
    ctx = context(tmp_path, fake_card(["bash", "-c", f"sleep {marker}"], port=port), local_inventory())
    dep, keeper = _deployment_with_lease(ctx, marker)
    threading.Timer(2.0, squatter.close).start()
    try:
        dep.start()
        assert processes_matching(f"sleep {marker}"), "launched once the port was free"
    finally:
        keeper.stop()
        dep.stop()
        squatter.close()
    assert not processes_matching(f"sleep {marker}")


def _deployment_with_lease(ctx, port_marker):
    from dayzero.lab.deploy import Deployment
    from dayzero.lab.lease import LeaseKeeper, try_acquire
    from dayzero.lab.transport.local import LocalTransport
    from dayzero.spec.recipe import render

    host = ctx.inventory.hosts[0]
    transport = LocalTransport(host)
    lease = try_acquire(transport, ctx.run_id, "fake", "w", ttl=3)
    keeper = LeaseKeeper([lease], lambda h: transport).__enter__()
    dep = Deployment(
        render(ctx.matrix, ctx.matrix.cells[0], [host]),
        {host.name: transport},
        "runs/wd",
        heartbeats={host.name: lease.heartbeat},
        heartbeat_timeout=lease.ttl,
    )
    return dep, keeper


def test_watchdog_kills_the_server_when_the_controller_goes_silent(tmp_path, local_inventory):
    """A controller killed with SIGKILL or cut off from the host stops touching its lease."""
    import time

    marker = str(random.randint(100000, 999999))
    ctx = context(tmp_path, fake_card(["bash", "-c", f"sleep {marker}"], port=18503), local_inventory())
    dep, keeper = _deployment_with_lease(ctx, marker)
    dep.start()
    try:
        assert processes_matching(f"sleep {marker}")
        keeper.stop()  # the controller "dies": the lease goes stale, nobody tears down
        deadline = time.monotonic() + 30
        while processes_matching(f"sleep {marker}") and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not processes_matching(f"sleep {marker}"), "the host-side watchdog must kill the group"
    finally:
        dep.stop()


def test_a_kept_lease_keeps_a_healthy_deployment_alive(tmp_path, local_inventory):
    import time

    marker = str(random.randint(100000, 999999))
    ctx = context(tmp_path, fake_card(["bash", "-c", f"sleep {marker}"], port=18504), local_inventory())
    dep, keeper = _deployment_with_lease(ctx, marker)
    dep.start()
    try:
        time.sleep(6)  # past the 3 s ttl and the watchdog's 2 s poll: only the keeper's touches keep it alive
        assert processes_matching(f"sleep {marker}")
    finally:
        keeper.stop()
        dep.stop()
    assert not processes_matching(f"sleep {marker}")


def test_a_killed_server_is_dead_even_while_its_zombie_is_unreaped(tmp_path, local_inventory):
    """Orphans are reaped by the host's init; some inits never reap, and `kill -0` sees zombies."""
    import os
    import signal
    import time

    from dayzero.lab.transport.local import LocalTransport

    host = load_inventory(local_inventory(), {"cpu"}).hosts[0]
    transport = LocalTransport(host)
    proc = transport.start("sleep 987654", env={}, log_path=str(tmp_path / "server.log"))
    try:
        assert transport.alive(proc)
        os.killpg(proc.pgid, signal.SIGKILL)
        time.sleep(0.5)
        assert not transport.alive(proc)
    finally:
        transport.kill(proc, grace=1)


def test_a_role_program_off_the_path_is_broken_before_anything_starts(tmp_path, local_inventory):
    """Preflight runs each role's program check after the host's engine_setup: an engine that is
    not there is a lab fault naming host, role and command, and nothing was launched."""
    from dayzero.errors import InfrastructureError

    card = fake_card(["dz-no-such-engine", "--port", "{port}"], port=18503)
    card["engine"]["version_command"] = "echo fake 1.0"  # a version command that passes anyway
    ctx = context(tmp_path, card, local_inventory())
    with pytest.raises(
        InfrastructureError, match=r"engine absent on local: role server runs `dz-no-such-engine`"
    ):
        run_cell(ctx, ctx.matrix.cells[0])
    doc = json.loads(next((ctx.reports_dir / "evidence").glob("*.json")).read_text())
    assert doc["verdict"] == "broken" and "not found" in doc["error"]
    assert not list((tmp_path / "work").rglob("server-0.log")), "nothing was launched"


@pytest.mark.parametrize(("kind", "status"), [("missing", 127), ("not executable", 126)])
def test_a_launch_the_host_cannot_execute_is_broken(tmp_path, local_inventory, kind, status):
    """A program only known once the host is (a placeholder, so preflight cannot check it) that the
    shell cannot execute: the launch exits 126/127, a lab fault, not a product failure."""
    from dayzero.errors import InfrastructureError

    program = tmp_path / "engine-bin"
    if kind == "not executable":
        program.write_text("#!/bin/sh\nexit 0\n")
    card = fake_card(["{engine_bin}", "--port", "{port}"], port=18504)
    ctx = context(tmp_path, card, local_inventory(vars={"engine_bin": str(program)}))
    with pytest.raises(
        InfrastructureError, match=r"server\[0\] on local: `.*engine-bin` could not be executed"
    ):
        run_cell(ctx, ctx.matrix.cells[0])
    doc = json.loads(next((ctx.reports_dir / "evidence").glob("*.json")).read_text())
    assert doc["verdict"] == "broken" and f"exit {status}" in doc["error"], doc["error"]
    assert not list((tmp_path / "work" / "leases").glob("slot-*")), "lease released"


@pytest.mark.parametrize(
    ("sig", "words"), [("ILL", "an instruction this CPU refuses"), ("SEGV", "segmentation")]
)
def test_an_engine_killed_by_a_signal_is_reported_with_the_signal_named(
    tmp_path, local_inventory, sig, words
):
    """An engine that dies by a signal writes no line of its own (llama-server built with AMX on
    an AVX2 CPU: SIGILL 0.7 s after launch, empty log): the launch's shell records the status and
    the failure names the signal and what it usually means. A real process, killed by the real
    signal (its own `kill`), not a status made up."""
    card = fake_card(["bash", "-c", f"echo loading; sleep 0.3; kill -{sig} $$"], port=18505)
    ctx = context(tmp_path, card, local_inventory())
    outcome = run_cell(ctx, ctx.matrix.cells[0])
    assert outcome.verdict == "failed", outcome.error
    assert "server[0] on local exited before the cell became ready" in outcome.error
    assert f"killed by SIG{sig}" in outcome.error and words in outcome.error, outcome.error


def test_a_started_process_is_alive_at_once_even_when_its_setsid_is_slow(
    tmp_path, monkeypatch, local_inventory
):
    """`start` returns the background pid at the fork, before the child's `setsid` made it a group
    leader; a liveness check in that window found no member of the group, and a just-started
    engine read as exited while it went on running outside every kill (CI, twice: an SGLang
    router "exited" 1 s after its start with no status). A `setsid` that takes 1 s to start
    (a loaded host) widens the window: the start returns once the group exists."""
    from dayzero.lab.transport.local import LocalTransport

    slow = tmp_path / "bin"
    slow.mkdir()
    real = shutil.which("setsid")
    (slow / "setsid").write_text(f'#!/bin/sh\nsleep 1\nexec {real} "$@"\n')
    (slow / "setsid").chmod(0o755)
    monkeypatch.setenv("PATH", f"{slow}:{os.environ['PATH']}")
    transport = LocalTransport(load_inventory(local_inventory(), {"cpu"}).hosts[0])
    marker = str(random.randint(100000, 999999))
    proc = transport.start(f"sleep {marker}", env={}, log_path=str(tmp_path / "server.log"))
    try:
        assert transport.alive(proc), "the group of a process just started was not found"
    finally:
        transport.kill(proc, grace=1)
    assert not processes_matching(f"sleep {marker}")
