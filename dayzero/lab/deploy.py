"""A deployment: a rendered recipe running on leased hosts, and its guaranteed teardown.

Each launch runs in its own process group (see `Transport.start`). `Deployment.stop` kills every
group it started and never raises; the cell run calls it in a `finally`, so it runs whatever the
exit path: pass, failure, deadline, KeyboardInterrupt or SIGTERM (the plugin turns SIGTERM into
an exception so that `finally` blocks run). Logs are kept on the host and copied to the run's report folder.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from dayzero.errors import CommandTimeout, DeploymentError, InfrastructureError
from dayzero.lab.transport import RemoteProcess, Transport
from dayzero.loadgen import client_source
from dayzero.spec.recipe import Launch, Recipe
from dayzero.spec.shell import quote

log = logging.getLogger(__name__)
PORT_GRACE = 10  # seconds a just-killed server may keep its port


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


def run_client(transport: Transport, spec: dict, timeout: float) -> dict:
    """Run the stdlib client on the host (source and spec on stdin) and parse its JSON answer."""
    command = f"{transport.host.python} -c {quote(BOOT)}"
    stdin = client_source() + SPEC_MARK + json.dumps(spec).encode()
    result = transport.run(command, timeout=timeout, stdin=stdin)
    if not result.ok:
        raise InfrastructureError(
            f"{transport.host.name}: client exited {result.exit_status}: {result.stderr.strip()[-800:]}"
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

    # -- lifecycle -------------------------------------------------------------------------

    def run_dir(self, launch: Launch) -> str:
        """Where a launch runs and logs: `<host workdir>/<run_subdir>` (workdirs differ per host)."""
        return f"{self.transports[launch.host].host.workdir.rstrip('/')}/{self.run_subdir}"

    def log_path(self, launch: Launch) -> str:
        return f"{self.run_dir(launch)}/{launch.role}-{launch.rank}.log"

    def start(self) -> None:
        for launch in self.recipe.launches:
            self._port_free(launch)
        for launch in self.recipe.launches:
            transport = self.transports[launch.host]
            try:
                process = transport.start(
                    launch.command,
                    env=dict(launch.env),
                    log_path=self.log_path(launch),
                    setup=transport.host.engine_setup,
                    cwd=self.run_dir(launch),
                )
            except BaseException:  # interrupted after the host forked it: find it by its pidfile
                log_path = self.log_path(launch)
                self._best_effort(lambda: transport.kill_unrecorded(log_path))  # noqa: B023 - called now
                raise
            self.started.append(Started(launch, process))  # tracked before anything else can fail
            if launch.host in self.heartbeats:
                watchdog = transport.watch(process, self.heartbeats[launch.host], self.heartbeat_timeout)
                self.started[-1] = Started(launch, process, watchdog)
            self.on_event(f"started {launch.role}[{launch.rank}] on {launch.host} (pgid {process.pgid})")

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
        connect = f"(exec 3<>/dev/tcp/{quote(launch.address)}/{int(launch.port)}) 2>/dev/null"
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

    @property
    def url(self) -> str:
        endpoint = self.recipe.endpoint
        return f"http://{endpoint.address}:{endpoint.port}"

    def endpoint_transport(self) -> Transport:
        return self.transports[self.recipe.endpoint.host]

    def wait_ready(self) -> float:
        """Poll health until 200 or the deadline, failing fast when any launched process exits."""
        t0 = time.monotonic()
        deadline = t0 + self.ready_deadline
        last = ""
        while True:
            for s in self.started:
                if not self.transports[s.launch.host].alive(s.process):
                    raise DeploymentError(
                        f"{s.launch.role}[{s.launch.rank}] on {s.launch.host} exited before the "
                        f"server became ready ({time.monotonic() - t0:.1f}s after launch)",
                        self.tail(s),
                    )
            answer = run_client(
                self.endpoint_transport(),
                {"action": "health", "url": self.url + self.health_path},
                timeout=30,
            )
            if answer.get("ready"):
                elapsed = time.monotonic() - t0
                self.on_event(f"ready after {elapsed:.1f}s at {self.url}")
                return elapsed
            last = answer.get("error") or f"HTTP {answer.get('status')}"
            if time.monotonic() > deadline:
                raise DeploymentError(
                    f"not ready within the {self.ready_deadline:.0f}s deadline: {self.url}{self.health_path}"
                    f" last answered {last}",
                    self.tail(self.started[0]) if self.started else "",
                )
            time.sleep(0.5)

    def check_alive(self) -> None:
        """Raise DeploymentError (with log tail) if a role died, e.g. mid-benchmark."""
        for s in self.started:
            if not self.transports[s.launch.host].alive(s.process):
                raise DeploymentError(
                    f"{s.launch.role}[{s.launch.rank}] on {s.launch.host} died", self.tail(s)
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
            for what, process, grace in steps:
                try:
                    self.transports[s.launch.host].kill(process, grace=grace)
                except (InfrastructureError, CommandTimeout, OSError) as exc:
                    log.warning("could not stop %s on %s: %s", what, s.launch.host, exc)
                except BaseException as exc:  # noqa: BLE001 - re-raised once every group is killed
                    interrupted = interrupted or exc
                    self._best_effort(lambda p=process, h=s.launch.host: self.transports[h].kill(p, grace=0))
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
