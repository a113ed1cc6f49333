"""A deployment: a rendered recipe running on leased hosts, and its guaranteed teardown.

Several roles and ranks start in waves, each ready before the next starts: ranks 1..N-1 of every
role (llama.cpp's rpc-server must accept before llama-server --rpc connects; SGLang's ranks
rendezvous at rank 0 in any order), then rank 0 of every role that is not the endpoint (workers,
prefill, decode), then the endpoint (rank 0 of a multi-node role, or the router). Every launch is
checked ready on its own host as `Launch.ready` says (health path, port accepts, or running) and
every started process is checked alive while waiting: a live router in front of a dead worker
is not ready. A process that exits first is the product's failure (`DeploymentError`); every
process alive at the deadline is a cell still loading (`StillLoading`, a lab fault: the card's
`ready_deadline` is sized for its weights, and this host did not make it). Only `Transport` is
used, so any transport (local, SSH, a Slurm step) can run it.

Each launch runs in its own process group (see `Transport.start`); a launch in a container also
leaves beside its log the shell that removes the container (`cleanup_file`), which teardown, the
host's watchdog and a crashed worker's cleanup run once the group is killed. `Deployment.stop`
kills every group it started (and removes its containers) and never raises; the cell run calls
it in a `finally`, so it runs whatever the exit path: pass, failure, deadline, KeyboardInterrupt
or SIGTERM (the plugin turns SIGTERM into an exception so that `finally` blocks run). Logs are
kept on the host and copied to the run's report folder.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from dayzero.errors import CommandTimeout, DeploymentError, InfrastructureError, StillLoading
from dayzero.lab.exit_status import describe
from dayzero.lab.transport import RemoteProcess, Transport
from dayzero.lab.transport.base import cleanup_file, watchdog_log
from dayzero.loadgen import client_source
from dayzero.loadgen.client import BEAT
from dayzero.spec import container
from dayzero.spec.recipe import HTTP, TCP, Launch, Recipe
from dayzero.spec.shell import quote

log = logging.getLogger(__name__)
PORT_GRACE = 10  # seconds a just-killed server may keep its port


def waves(recipe: Recipe) -> list[list[Launch]]:
    """The launches in start order (see the module docstring); empty waves left out."""
    first = [x for x in recipe.launches if x.rank > 0]
    middle = [x for x in recipe.launches if x.rank == 0 and not x.endpoint]
    last = [x for x in recipe.launches if x.rank == 0 and x.endpoint]
    return [w for w in (first, middle, last) if w]


def _connect(launch: Launch) -> str:
    """Shell that succeeds when the launch's port accepts a connection."""
    return f"(exec 3<>/dev/tcp/{quote(launch.address)}/{int(launch.port)}) 2>/dev/null"


@dataclass(frozen=True)
class Started:
    launch: Launch
    process: RemoteProcess
    watchdog: RemoteProcess | None = None


# The spec follows the client's source on stdin, never on the command line: a load spec at Kimi
# concurrencies (5 x 256 prompts and more) passes the 128 KiB one argument of execve may hold.
SPEC_MARK = b"\n# dayzero: the spec follows\n"
BOOT = (
    f"import sys;d=sys.stdin.buffer.read();src,_,spec=d.partition({SPEC_MARK!r});"
    "sys.argv=['-',spec.decode()];exec(compile(src,'dayzero-client','exec'),{'__name__':'__main__'})"
)


BEATS_PER_BOUND = 4  # the client's beats within one silence bound: one lost or late is no silence


def run_client(transport: Transport, spec: dict, timeout: float, silence: float | None = None) -> dict:
    """Run the stdlib client on the host (source and spec on stdin) and parse its JSON answer.

    `silence`: the client beats on stderr, and nothing from the host for that long means it
    stopped answering (HostSilent), however long `timeout` is."""
    command = f"{transport.host.python} -c {quote(BOOT)}"
    if silence is not None:
        spec = {**spec, "beat_s": silence / BEATS_PER_BOUND}
    stdin = client_source() + SPEC_MARK + json.dumps(spec).encode()
    if silence is None:
        result = transport.run(command, timeout=timeout, stdin=stdin)
    else:
        result = transport.run_heard(command, timeout=timeout, silence=silence, stdin=stdin)
    if not result.ok:
        stderr = result.stderr.replace(BEAT.decode(), "")
        raise InfrastructureError(
            f"{transport.host.name}: client exited {result.exit_status}: {stderr.strip()[-800:]}"
        )
    try:
        return json.loads(result.stdout)
    except ValueError:
        raise InfrastructureError(
            f"{transport.host.name}: client printed no JSON: {result.stdout[:300]!r}"
        ) from None


class Deployment:
    def __init__(
        self,
        recipe: Recipe,
        transports: Mapping[str, Transport],
        run_subdir: str,
        *,
        health_path: str = "/health",
        ready_deadline: float = 600.0,
        heartbeats: Mapping[str, str] | None = None,
        heartbeat_timeout: float = 120.0,
        on_event: Callable[[str], None] = lambda message: None,
    ):
        self.recipe = recipe
        self.transports = transports
        self.run_subdir = run_subdir
        self.health_path = health_path
        self.ready_deadline = ready_deadline
        self.heartbeats = heartbeats or {}
        self.heartbeat_timeout = heartbeat_timeout
        self.on_event = on_event
        self.started: list[Started] = []
        self.stopped: list[Started] = []
        self.ready: set[tuple[str, int]] = set()  # (role, rank) seen ready once
        self._t0: float | None = None  # when the first launch started: the ready deadline counts from it

    # -- lifecycle -------------------------------------------------------------------------

    def run_dir(self, launch: Launch) -> str:
        """Where a launch runs and logs: `<host workdir>/<run_subdir>` (workdirs differ per host)."""
        return f"{self.transports[launch.host].host.workdir.rstrip('/')}/{self.run_subdir}"

    def log_path(self, launch: Launch) -> str:
        return f"{self.run_dir(launch)}/{launch.role}-{launch.rank}.log"

    def start(self) -> None:
        """Start every launch, wave by wave; every wave but the last is ready before the next."""
        for launch in self.recipe.launches:
            self._port_free(launch)
        self._t0 = time.monotonic()
        order = waves(self.recipe)
        for i, wave in enumerate(order):
            for launch in wave:
                self._start_one(launch)
            if i < len(order) - 1:
                self._wait(wave)

    def _start_one(self, launch: Launch) -> None:
        transport = self.transports[launch.host]
        if boxed := container.name_of(launch.container):  # known to every cleanup before it runs
            where = quote(cleanup_file(self.log_path(launch)))
            transport.check(
                f"mkdir -p {quote(self.run_dir(launch))} && "
                f"printf '%s\\n' {quote(container.remove(*boxed))} > {where}",
                timeout=30,
            )
        try:
            process = transport.start(
                launch.command,
                env=dict(launch.env),
                log_path=self.log_path(launch),
                setup=transport.host.engine_setup,
                cwd=self.run_dir(launch),
                step=launch.step,
            )
        except BaseException:  # interrupted after the host forked it: find it by its pidfile
            log_path = self.log_path(launch)
            self._best_effort(lambda: transport.kill_unrecorded(log_path))  # noqa: B023 - called now
            self._best_effort(lambda: self._remove_container(launch))  # noqa: B023 - called now
            raise
        self.started.append(Started(launch, process))  # tracked before anything else can fail
        if launch.host in self.heartbeats:
            try:
                watchdog = transport.watch(process, self.heartbeats[launch.host], self.heartbeat_timeout)
            except BaseException:  # interrupted after the host forked it: its pidfile names it
                log_path = watchdog_log(self.log_path(launch))
                self._best_effort(lambda: transport.kill_unrecorded(log_path))  # noqa: B023 - called now
                raise
            self.started[-1] = Started(launch, process, watchdog)
        self.on_event(f"started {launch.role}[{launch.rank}] on {launch.host} (pgid {process.pgid})")

    def _remove_container(self, launch: Launch) -> None:
        """Remove the launch's container, if it runs in one: a `docker run` client killed after
        its grace (SIGKILL is not proxied) leaves the container, and the engine in it, running."""
        if boxed := container.name_of(launch.container):
            transport = self.transports[launch.host]
            setup = f"{transport.host.engine_setup}\n" if transport.host.engine_setup else ""
            done = transport.run(setup + container.remove(*boxed), timeout=60)
            if not done.ok:
                raise InfrastructureError(f"{launch.host}: container {boxed[1]} could not be removed")

    @staticmethod
    def _best_effort(action) -> None:
        try:
            action()
        except (InfrastructureError, CommandTimeout, OSError) as exc:
            log.warning("cleanup step failed: %s", exc)

    def _port_free(self, launch: Launch) -> None:
        """A leftover server on our port would answer our health checks: refuse to start."""
        # A server that a watchdog or an earlier teardown has just killed may hold the port for a
        # moment longer: poll for up to PORT_GRACE seconds before calling it a leftover.
        connect = _connect(launch)
        probe = (
            f"for i in $(seq {PORT_GRACE}); do {connect} || {{ echo free; exit 0; }}; sleep 1; done; "
            "echo busy"
        )
        if "busy" in self.transports[launch.host].run(probe, timeout=PORT_GRACE + 15).stdout:
            raise InfrastructureError(
                f"{launch.host}: port {launch.port} on {launch.address} is already in use "
                f"(still after {PORT_GRACE}s; a leftover server from another run?); "
                "free it before running this cell"
            )

    def process_groups(self) -> dict[str, list[int]]:
        """Host -> the process groups started there (servers and their watchdogs): the cell's own."""
        out: dict[str, list[int]] = {}
        for s in self.started:
            out.setdefault(s.launch.host, []).extend(p.pgid for p in (s.process, s.watchdog) if p is not None)
        return out

    @property
    def url(self) -> str:
        endpoint = self.recipe.endpoint
        return f"http://{endpoint.address}:{endpoint.port}"

    def endpoint_transport(self) -> Transport:
        return self.transports[self.recipe.endpoint.host]

    def wait_ready(self) -> float:
        """Wait until every launch is ready (the endpoint last); seconds since the first started."""
        elapsed = self._wait(list(self.recipe.launches))
        self.on_event(f"ready after {elapsed:.1f}s at {self.url}")
        return elapsed

    def _wait(self, launches: list[Launch]) -> float:
        """Poll each launch until it is ready or the deadline passes, failing fast when any
        started process exits. A launch seen ready once is not probed again (an rpc-server
        serves one connection at a time); from then on only its process is checked."""
        t0 = self._t0 if self._t0 is not None else time.monotonic()
        deadline = t0 + self.ready_deadline
        while True:
            for s in self.started:
                if not self.transports[s.launch.host].alive(s.process):
                    self._unrunnable(s)
                    raise DeploymentError(
                        f"{s.launch.role}[{s.launch.rank}] on {s.launch.host} exited before the "
                        f"cell became ready ({time.monotonic() - t0:.1f}s after launch{self._how(s)})",
                        self.tail(s),
                    )
            waiting = {}
            for launch in launches:
                if (launch.role, launch.rank) in self.ready:
                    continue
                last = self._probe(launch)
                if last:
                    waiting[launch] = last
                else:
                    self.ready.add((launch.role, launch.rank))
                    if len(self.recipe.launches) > 1:
                        self.on_event(
                            f"{launch.role}[{launch.rank}] on {launch.host} ready "
                            f"({time.monotonic() - t0:.1f}s after launch)"
                        )
            if not waiting:
                return time.monotonic() - t0
            if time.monotonic() > deadline:  # every process is alive (checked above): still loading
                launch, last = next(iter(waiting.items()))
                started = next((s for s in self.started if s.launch == launch), None)
                tail = self.tail(started, 20) if started else ""
                raise StillLoading(
                    f"{launch.role}[{launch.rank}] on {launch.host} not ready within the "
                    f"{self.ready_deadline:.0f}s deadline, still running (loading?): "
                    f"{self._where(launch)} last answered {last}; raise the card's ready_deadline "
                    "if its weights take longer to load on this host"
                    + (f"\n--- server log tail ---\n{tail}" if tail else "")
                )
            time.sleep(0.5)

    def _where(self, launch: Launch) -> str:
        base = f"{launch.address}:{launch.port}"
        return f"http://{base}{launch.health or self.health_path}" if launch.ready == HTTP else base

    def _probe(self, launch: Launch) -> str:
        """'' when the launch is ready, else what it answered (checked from its own host)."""
        transport = self.transports[launch.host]
        if launch.ready == HTTP:
            url = f"http://{launch.address}:{launch.port}{launch.health or self.health_path}"
            answer = run_client(transport, {"action": "health", "url": url}, timeout=30)
            return "" if answer.get("ready") else (answer.get("error") or f"HTTP {answer.get('status')}")
        if launch.ready == TCP:
            done = transport.run(f"{_connect(launch)} && echo open", timeout=30)
            return "" if "open" in done.stdout else "connection refused"
        return ""  # alive: running is ready (checked above for every started process)

    def check_alive(self) -> None:
        """Raise DeploymentError (with log tail) if a role died, e.g. mid-benchmark."""
        for s in self.started:
            if not self.transports[s.launch.host].alive(s.process):
                self._unrunnable(s)
                raise DeploymentError(
                    f"{s.launch.role}[{s.launch.rank}] on {s.launch.host} died{self._how(s)}", self.tail(s)
                )

    def _how(self, s: Started) -> str:
        """', killed by SIGILL: ...' (or ', exit 1') once the launch's shell has recorded how it
        ended; else say that none was: the shell died with its program, which happens when the
        whole process group is killed from outside (or on a transport that records none)."""
        status = self.transports[s.launch.host].exit_status(s.process)
        if status is None:
            return ", no exit status recorded: its launch shell ended too (its group killed from outside?)"
        return f", {describe(status)}"

    def _unrunnable(self, s: Started) -> None:
        """A launch whose program the host could not execute (exit 126/127) is the lab's fault:
        the engine is missing or broken there, the recipe never ran."""
        status = self.transports[s.launch.host].exec_failure(s.process)
        if status is not None:
            why = {126: "not executable", 127: "not found"}.get(status, f"exit {status}")
            raise InfrastructureError(
                f"{s.launch.role}[{s.launch.rank}] on {s.launch.host}: `{s.launch.argv[0]}` could not be "
                f"executed ({why}, exit {status}) after the host's engine_setup: the engine is not "
                f"installed there\n--- server log tail ---\n{self.tail(s)}"
            )

    def tail(self, started: Started, lines: int = 60) -> str:
        return self.transports[started.launch.host].tail(started.process.log_path, lines)

    def stop(self) -> None:
        """Kill every process group started here, servers before their watchdogs.

        Safe on every exit path: an infrastructure error is logged and the next group is still
        killed, and an interrupt (Ctrl-C, SIGTERM) that lands mid-teardown is held until every
        group has been killed, then re-raised: a server must never outlive its watchdog."""
        interrupted: BaseException | None = None
        while self.started:
            s = self.started.pop()
            steps = [(s.launch.role, s.process, 10.0)]
            if s.watchdog:
                steps.append((f"{s.launch.role} watchdog", s.watchdog, 0.0))
            steps.insert(1, ("container", None, 0.0))  # after its client, before the watchdog
            for what, process, grace in steps:
                try:
                    if process is None:
                        self._remove_container(s.launch)
                        continue
                    self.transports[s.launch.host].kill(process, grace=grace)
                except (InfrastructureError, CommandTimeout, OSError) as exc:
                    log.warning("could not stop %s on %s: %s", what, s.launch.host, exc)
                except BaseException as exc:  # noqa: BLE001 - re-raised once every group is killed
                    interrupted = interrupted or exc
                    if process is not None:
                        h = s.launch.host
                        self._best_effort(lambda p=process, h=h: self.transports[h].kill(p, grace=0))
            self.stopped.append(s)
            self.on_event(f"stopped {s.launch.role}[{s.launch.rank}] on {s.launch.host}")
        if interrupted is not None:
            raise interrupted

    def collect_logs(self, dest: Path) -> list[Path]:
        """Copy every role's log to `dest` (after stop, so the logs are complete)."""
        out = []
        for s in self.stopped:
            local = dest / f"{s.launch.host}-{Path(s.process.log_path).name}"
            try:
                self.transports[s.launch.host].get(s.process.log_path, local)
                out.append(local)
            except (InfrastructureError, OSError) as exc:
                log.warning("could not fetch %s from %s: %s", s.process.log_path, s.launch.host, exc)
        return out
