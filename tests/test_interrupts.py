"""An interrupt is an interrupt at every instant, and teardown finishes whatever lands during it.

Two faults a real run meets only by bad luck are injected here at their exact instant (a
transport whose `kill` is interrupted, a `communicate` interrupted after its child was reaped);
everything else is real: processes, process groups, the host-side watchdog, lease files. The
sweep at the end sends SIGINT to a real pytest run at many offsets across a cell's phases.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import pytest

from dayzero.lab.deploy import Deployment, Started
from dayzero.lab.lease import acquire_all
from dayzero.lab.transport.base import group_alive
from dayzero.lab.transport.local import LocalTransport
from dayzero.spec.inventory import Host
from dayzero.spec.recipe import Launch

from .conftest import REPO, processes_matching
from .interrupt_sweep import assert_ended_interrupted, run_interrupted
from .stub_cells import stub_card, stub_inventory, stub_matrix


def _host(tmp_path: Path) -> Host:
    return Host(
        name="local", hardware="cpu", transport="local", address="127.0.0.1", workdir=str(tmp_path / "work")
    )


def _alive(pgid: int) -> bool:
    return subprocess.run(["bash", "-c", group_alive(pgid)]).returncode == 0


def _wait_dead(pgid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while _alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.2)
    return not _alive(pgid)


def test_interrupt_after_the_command_was_reaped_stays_an_interrupt(tmp_path, monkeypatch):
    """Ctrl-C that lands once the child is reaped: its group is gone, and killing it must not
    replace the KeyboardInterrupt by ProcessLookupError (seen: the cell reported *failed*)."""
    real = subprocess.Popen.communicate

    def reaped_then_interrupted(self, *args, **kwargs):
        real(self, *args, **kwargs)  # the command ran to its end and was reaped
        raise KeyboardInterrupt

    monkeypatch.setattr(subprocess.Popen, "communicate", reaped_then_interrupted)
    with pytest.raises(KeyboardInterrupt):
        LocalTransport(_host(tmp_path)).run("true", timeout=10)


class InterruptedOnce(LocalTransport):
    """A transport whose first `kill` is hit by Ctrl-C before it does anything."""

    def __init__(self, host: Host):
        super().__init__(host)
        self.interrupted = False

    def kill(self, proc, grace: float = 10.0) -> None:
        if not self.interrupted:
            self.interrupted = True
            raise KeyboardInterrupt
        super().kill(proc, grace)


def test_ctrl_c_during_teardown_still_kills_server_and_watchdog(tmp_path):
    transport = InterruptedOnce(_host(tmp_path))
    marker = str(random.randint(100000, 999999))
    heartbeat = tmp_path / "owner.json"
    heartbeat.write_text("{}")
    server = transport.start(f"sleep {marker}", env={}, log_path=str(tmp_path / "server.log"))
    watchdog = transport.watch(server, str(heartbeat), timeout=600)
    launch = Launch("server", 0, "local", "127.0.0.1", 1, ("sleep", marker), (), True)
    dep = Deployment(None, {"local": transport}, "run")  # type: ignore[arg-type]
    dep.started.append(Started(launch, server, watchdog))
    try:
        with pytest.raises(KeyboardInterrupt):
            dep.stop()
        assert _wait_dead(server.pgid, 15), "the server outlived a Ctrl-C during teardown"
        assert _wait_dead(watchdog.pgid, 15), "the watchdog outlived a Ctrl-C during teardown"
    finally:
        for pgid in (server.pgid, watchdog.pgid):
            subprocess.run(["kill", "-KILL", "--", f"-{pgid}"], stderr=subprocess.DEVNULL)


class WatchInterrupted(LocalTransport):
    """Ctrl-C that lands once the host started a watchdog, before its pid came back."""

    def watch(self, proc, heartbeat: str, timeout: float):
        super().watch(proc, heartbeat, timeout)
        raise KeyboardInterrupt


def test_ctrl_c_while_a_watchdog_starts_leaves_no_watchdog(tmp_path):
    """The sweep across two hosts found it: a watchdog whose start was interrupted was known to
    no teardown (it ended by itself only once it found its server gone)."""
    transport = WatchInterrupted(_host(tmp_path))
    heartbeat = tmp_path / "owner.json"
    heartbeat.write_text("{}")
    launch = Launch("server", 0, "local", "127.0.0.1", 1, ("sleep", "600"), (), True)
    dep = Deployment(None, {"local": transport}, "run", heartbeats={"local": str(heartbeat)})  # type: ignore[arg-type]
    try:
        with pytest.raises(KeyboardInterrupt):
            dep._start_one(launch)
        assert [s.launch for s in dep.started] == [launch], "the server is tracked: the teardown kills it"
        assert not processes_matching(str(heartbeat)), "a watchdog that no teardown knows of"
    finally:
        dep.stop()
        for line in processes_matching(str(heartbeat)):
            subprocess.run(["kill", "-KILL", line.split()[0]])


def test_watchdog_kills_its_server_when_another_run_reclaims_the_lease(tmp_path):
    """A stale lease reclaimed by a new run is fresh again (the new keeper touches it): the old
    server must die then, not hold the port until the new run fails with "port in use"."""
    transport = LocalTransport(_host(tmp_path))
    heartbeat = tmp_path / "slot-0" / "owner.json"
    heartbeat.parent.mkdir()
    heartbeat.write_text(json.dumps({"run_id": "old", "token": "a"}))
    server = transport.start("sleep 600", env={}, log_path=str(tmp_path / "server.log"))
    watchdog = transport.watch(server, str(heartbeat), timeout=600)
    try:
        time.sleep(1)
        heartbeat.write_text(json.dumps({"run_id": "new", "token": "b"}))  # reclaimed and fresh
        assert _wait_dead(server.pgid, 15), "the old run's server survived the reclaim of its lease"
    finally:
        for pgid in (server.pgid, watchdog.pgid):
            subprocess.run(["kill", "-KILL", "--", f"-{pgid}"], stderr=subprocess.DEVNULL)


class InterruptedLeasing(LocalTransport):
    """Ctrl-C that lands during the lease script: before it runs, or once the host ran it (the
    slot made ours) but before its answer was read."""

    def __init__(self, host: Host, *, after: bool):
        super().__init__(host)
        self.after = after

    def run(self, command: str, *, timeout: float, stdin: bytes | None = None):
        if "LEASED" not in command:
            return super().run(command, timeout=timeout, stdin=stdin)
        if self.after:
            super().run(command, timeout=timeout, stdin=stdin)
        raise KeyboardInterrupt


def _lease(hosts: list[Host], transports: dict[str, LocalTransport]) -> None:
    with pytest.raises(KeyboardInterrupt):
        acquire_all(
            hosts, len(hosts), lambda h: transports[h.name], run_id="r", cell_id="c", worker="w", wait=5
        )


def test_ctrl_c_once_the_host_made_the_lease_leaves_no_lease(tmp_path):
    host = _host(tmp_path)
    _lease([host], {host.name: InterruptedLeasing(host, after=True)})
    assert not list((tmp_path / "work" / "leases").glob("slot-*")), "a lease nobody holds or touches"


def test_ctrl_c_while_leasing_the_second_host_lets_the_first_go(tmp_path):
    """All or none, also when interrupted: the first host's lease is released at once (it was
    held until its ttl ran out, with no one running on it)."""
    first, second = (replace(_host(tmp_path), name=n, workdir=str(tmp_path / n)) for n in ("h1", "h2"))
    _lease([first, second], {"h1": LocalTransport(first), "h2": InterruptedLeasing(second, after=False)})
    assert not list((tmp_path / "h1" / "leases").glob("slot-*")), "the first host stays leased"


def _stub_run(root: Path) -> list[str]:
    """pytest's arguments for one run of the one stub cell under `root`."""
    return [
        "-m",
        "low_latency",
        f"--matrix={root / 'matrix'}",
        f"--hosts={root / 'hosts.yaml'}",
        f"--reports={root / 'reports'}",
        "--heartbeat-timeout=5",
    ]


def test_sigint_at_any_instant_ends_the_run_interrupted(tmp_path):
    """Sweep the instant across a stub cell's phases (lease, preflight, launch, readiness, probes,
    load, teardown, evidence): the run always ends interrupted (never exit 0 or 1), the cell is never
    reported failed, and neither its server nor its lease is left behind. The twelve instants run
    in two lanes side by side, each with a stub port of its own (half the wall time)."""
    card = stub_card(model="sweep")
    ports = random.sample(range(20000, 29000), 2)  # ours alone: other runs use the stub too
    card["recipe"]["port"] = ports[0]
    stub_matrix(tmp_path, card)
    stub_inventory(tmp_path, ttft=0.05, slots=1)
    t0 = time.monotonic()
    code, out, _ = run_interrupted(_stub_run(tmp_path), None)
    assert code == 0, out[-3000:]
    whole = time.monotonic() - t0
    offsets = [round(whole * k / 12, 2) for k in range(12)]

    def lane(port: int, offsets: list[float]) -> None:
        for offset in offsets:
            root = tmp_path / f"at-{offset}"
            root.mkdir()
            stub_matrix(root, {**card, "recipe": {**card["recipe"], "port": port}})
            stub_inventory(root, ttft=0.05, slots=1)
            code, out, sent = run_interrupted(_stub_run(root), offset)
            assert_ended_interrupted(root / "reports", code, out, sent, f"{offset}s after the lease")
            left = processes_matching(f"{root}/") + processes_matching(f"--port {port} ")
            assert not left, f"SIGINT at {offset}s left processes behind: {left}"
            assert not list((root / "work" / "leases").glob("slot-*")), f"SIGINT at {offset}s left a lease"

    with ThreadPoolExecutor(2) as pool:
        lanes = [pool.submit(lane, port, offsets[i::2]) for i, port in enumerate(ports)]
        for done in lanes:
            done.result()


SWALLOWS = """
import os, signal, time
import dayzero.plugin.fixtures as fixtures

real = fixtures.run_cell


class Swallows:
    def __del__(self):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.2)  # the handler runs in here: its KeyboardInterrupt is "ignored"


def run_cell(*args, **kwargs):
    outcome = real(*args, **kwargs)
    Swallows()  # collected at once
    return outcome


fixtures.run_cell = run_cell
"""


def test_a_ctrl_c_python_swallows_still_ends_the_run_interrupted(tmp_path):
    """A KeyboardInterrupt raised inside a `__del__` or a weakref callback is only printed and lost
    (the two-host sweep: SIGINT as the cell started, the run went on and exited 0). Injected here:
    a Ctrl-C that lands in a finaliser during a real stub cell. The run must still end interrupted."""
    card = stub_card(model="swallowed")
    card["recipe"]["port"] = random.randint(20000, 29000)
    stub_matrix(tmp_path, card)
    stub_inventory(tmp_path, ttft=0.05, slots=1)
    (tmp_path / "swallow_plugin.py").write_text(SWALLOWS)
    plugin = ["-p", "no:randomly", "-p", "swallow_plugin"]
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", *plugin, *_stub_run(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])},
        timeout=300,
    )
    out = proc.stdout + proc.stderr
    assert "Exception ignored" in out, f"the interrupt was not swallowed where it landed\n{out[-3000:]}"
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, out[-3000:]
    assert not list((tmp_path / "work" / "leases").glob("slot-*"))


def _deep_interrupt(depth: int) -> pytest.ExceptionInfo[KeyboardInterrupt]:
    def down(n: int) -> None:
        if n == 0:
            raise KeyboardInterrupt
        down(n - 1)

    with pytest.raises(KeyboardInterrupt) as info:
        down(depth)
    return info


@pytest.mark.parametrize(
    ("mode", "frames", "frozen"), [("last frame", 1, True), ("full", 12, True), ("untouched", 12, False)]
)
def test_an_interrupted_run_renders_one_frame_and_skips_the_last_collections(
    monkeypatch, mode, frames, frozen
):
    """What an interrupted run did after Ctrl-C was CPU: pytest rendering every frame's source to
    print the last one, the interpreter's last collections over the heap. A dayzero run hands
    pytest the last frame (all under --full-trace) and freezes its objects out of those
    collections at exit; pytest without a dayzero run (this project's own tests) is untouched."""
    from dayzero.plugin import signals

    at_exit: list = []
    monkeypatch.setattr(signals, "_traceback", [mode])
    monkeypatch.setattr(signals.atexit, "register", at_exit.append)
    info = _deep_interrupt(10)
    assert len(info.traceback) == 12  # the test's frame, down()'s 11
    signals.pytest_keyboard_interrupt(info)
    assert len(info.traceback) == frames
    assert at_exit == ([signals.gc.freeze] if frozen else [])
