"""What every transport offers, how long a host has to answer, and the process-group handling
built on top of `run`.

A transport only needs `run` (a shell command with a wall-clock deadline), `put` and `get`.
Background processes, their process groups and log tails are plain shell on the host, so the
local and SSH paths kill processes the same way: by group, from a separate command.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from pathlib import Path

from dayzero.errors import CommandTimeout, InfrastructureError
from dayzero.redact import redact
from dayzero.spec.inventory import Host
from dayzero.spec.shell import exports, quote

# Seconds a host has to answer before it is unreachable (`--connect-timeout`). A host refused or
# unresolved is dialled up to CONNECT_TRIES times, all within them (`ssh.pool`): a host rebooting
# or a resolver blip is not a dead host.
CONNECT_TIMEOUT_S = 15.0
CONNECT_TRIES = 3


def group_alive(pgid: int | str) -> str:
    """Shell test: does process group `pgid` (a number, or a shell word that holds one: "$1")
    have a member that is not a zombie?

    `kill -0 -- -pgid` also succeeds for zombies, and an orphaned server's zombie stays until
    the host's init reaps it; some inits never do (seen on a Firecracker VM), so a dead server
    looked alive and every teardown waited out its grace period."""
    g = pgid if isinstance(pgid, str) else int(pgid)
    return f"ps -e -o pgid= -o stat= | awk -v g={g} '$1 == g && $2 !~ /^Z/ {{f = 1}} END {{exit !f}}'"


def group_started(pid: str = "$p") -> str:
    """Shell text: wait (5 s at most) until background process `pid` leads a group of its own
    (its `setsid` ran) or is gone. `$!` is known at the fork, before the child's setsid: a group
    check in that window finds no member, and a just-started engine read as exited while it went
    on running outside every kill (seen twice in CI: an SGLang router "exited" 1 s after its
    start, no status recorded, and ran on until the testbed was torn down)."""
    return (
        f"i=0; while [ $i -lt 100 ] && kill -0 {pid} 2>/dev/null && "
        f'[ "$(ps -o pgid= -p {pid} | tr -d " ")" != "{pid}" ]; do sleep 0.05; i=$((i+1)); done'
    )


def watch_loop(pgid: int | str, heartbeat: str, timeout: float, cleanup: str = "") -> str:
    """Shell text of a dead man's switch: kill process group `pgid` (as in `group_alive`) once
    `heartbeat` is not touched for `timeout` seconds (controller killed, connection lost) or no
    longer holds what it held at the start (the lease went stale and another run reclaimed it:
    its keeper's touches must not keep our server alive), then run `cleanup` (a container's
    removal: a killed `docker run` client leaves it running); ends by itself with the group."""
    pg, hb = f"-{pgid}", quote(heartbeat)
    then = f"{cleanup}; " if cleanup else ""
    return (
        f"touch -c {hb}; own=$(cksum < {hb} 2>/dev/null); while {group_alive(pgid)}; do "
        f"age=$(( $(date +%s) - $(stat -c %Y {hb} 2>/dev/null || echo 0) )); "
        f'if [ $age -gt {int(timeout)} ] || [ "$(cksum < {hb} 2>/dev/null)" != "$own" ]; then '
        f"kill -TERM -- {pg}; sleep 10; kill -KILL -- {pg}; {then}exit 0; fi; "
        f"sleep 2; done"
    )


def cleanup_file(log_path: str) -> str:
    """Where a launch logging to `log_path` keeps the shell that removes what outlives its
    process group (its container), for teardown, the watchdog and a crashed worker's cleanup."""
    return f"{log_path}.cleanup"


def watchdog_log(log_path: str) -> str:
    """Where the watchdog of the process logging to `log_path` keeps its pid (it logs nothing)."""
    return f"{log_path}.watchdog"


def exec_status_path(log_path: str) -> str:
    """Where a launch whose program could not be executed leaves the shell's status (126/127)."""
    return f"{log_path}.exec"


def exit_status_path(log_path: str) -> str:
    """Where a launch's shell leaves the status its program ended with (a signal as 128+N)."""
    return f"{log_path}.status"


def exec_line(command: str, log_path: str) -> str:
    """Run `command` under the launch's shell, which then leaves the status it ended with beside
    the log: a signal is named in the report (an engine killed by SIGILL writes no log line of
    its own), and a program the shell cannot execute (not found: 127, not executable: 126) is
    also written where `exec_failure` looks: a lab fault, told apart from an engine that started
    and died. Not `exec`: the shell must outlive the program to see how it ended; it shares the
    process group, so a kill of the group still reaches both."""
    status, ended = quote(exec_status_path(log_path)), quote(exit_status_path(log_path))
    return f"{command}\ns=$?; echo $s > {ended}; case $s in 126|127) echo $s > {status};; esac; exit $s"


@dataclass(frozen=True)
class CommandResult:
    command: str
    exit_status: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.exit_status == 0


@dataclass(frozen=True)
class RemoteProcess:
    """A background process group on a host, started by `Transport.start`."""

    host: str
    pgid: int
    log_path: str


class Transport(abc.ABC):
    host: Host
    # Command-line marks of processes on the host that run what this transport started, outside
    # the process groups it knows (`hostload`: the cell's own load, not a foreign one).
    own_marks: tuple[str, ...] = ()

    @abc.abstractmethod
    def run(self, command: str, *, timeout: float, stdin: bytes | None = None) -> CommandResult:
        """Run `command` with the host's shell; raise CommandTimeout past `timeout` seconds."""

    @abc.abstractmethod
    def put(self, local: Path, remote: str) -> None: ...

    @abc.abstractmethod
    def get(self, remote: str, local: Path) -> None: ...

    def run_heard(
        self, command: str, *, timeout: float, silence: float, stdin: bytes | None = None
    ) -> CommandResult:
        """`run` for a command that writes at least every few seconds (the host client's beat):
        where the host is reached over a network, nothing from it for `silence` seconds raises
        HostSilent. The controller cannot lose a host it is, so here this is `run`."""
        return self.run(command, timeout=timeout, stdin=stdin)

    def close(self) -> None:  # noqa: B027 - optional for transports without a connection
        """Release the connection; background processes are not touched."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # --- built on run(): identical for every transport -------------------------------------

    def check(self, command: str, *, timeout: float = 60) -> CommandResult:
        result = self.run(command, timeout=timeout)
        if not result.ok:
            shown = redact(command if len(command) < 200 else command[:200] + "...")
            why = redact(result.stderr.strip()[-500:])
            raise InfrastructureError(f"{self.host.name}: `{shown}` exited {result.exit_status}: {why}")
        return result

    def start(
        self,
        command: str,
        *,
        env: dict[str, str],
        log_path: str,
        setup: str = "",
        cwd: str | None = None,
        step: tuple[str, ...] = (),
    ) -> RemoteProcess:
        """Start `command` in a new session (its own process group) writing to `log_path`.

        `setsid` makes the background shell the leader of a new group, so its pid is the pgid
        and one `kill -- -pgid` reaches every child the engine forks. `step` (srun flags) is
        only for a Slurm node's transport.
        """
        if step:
            raise InfrastructureError(f"{self.host.name}: srun flags {' '.join(step)} need a Slurm node")
        inner = (f"{setup}\n" if setup else "") + exports(env) + exec_line(command, log_path)
        cd = f"cd {quote(cwd)} || exit 1; " if cwd else ""
        # `;` not `&&` before setsid: `a && b &` would background the whole list in a subshell
        # that keeps our stdout pipe open until the server exits.
        wrapper = (
            f'mkdir -p "$(dirname {quote(log_path)})" || exit 1; {cd}'
            f"setsid bash -c {quote(inner)} > {quote(log_path)} 2>&1 < /dev/null & "
            f"p=$!; echo $p > {quote(log_path + '.pgid')}; {group_started()}; echo $p"
        )
        result = self.check(wrapper, timeout=30)
        try:
            pgid = int(result.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            raise InfrastructureError(
                f"{self.host.name}: could not start process: {result.stdout!r}"
            ) from None
        return RemoteProcess(self.host.name, pgid, log_path)

    def watch(self, proc: RemoteProcess, heartbeat: str, timeout: float) -> RemoteProcess:
        """Start a dead man's switch on the host (`watch_loop`) over the process group."""
        cleanup = f"sh {quote(cleanup_file(proc.log_path))} 2>/dev/null"
        loop = watch_loop(proc.pgid, heartbeat, timeout, cleanup)
        pidfile = quote(watchdog_log(proc.log_path) + ".pgid")  # found by kill_unrecorded, kill_recorded
        wrapper = (
            f"setsid bash -c {quote(loop)} > /dev/null 2>&1 < /dev/null & "
            f"p=$!; echo $p > {pidfile}; {group_started()}; echo $p"
        )
        result = self.check(wrapper, timeout=30)
        return RemoteProcess(self.host.name, int(result.stdout.split()[-1]), "")

    def kill_unrecorded(self, log_path: str) -> None:
        """Kill a group whose `start` was interrupted before its pgid came back (Ctrl-C mid-start)."""
        pidfile = quote(log_path + ".pgid")
        self.run(
            f'p=$(cat {pidfile} 2>/dev/null) && [ -n "$p" ] && '
            f"{{ kill -TERM -- -$p 2>/dev/null; sleep 1; kill -KILL -- -$p 2>/dev/null; }}; exit 0",
            timeout=30,
        )

    def kill_recorded(self, folder: str, grace: float = 5.0) -> list[int]:
        """Kill every group started with a log in `folder` (their `.pgid` files) and still alive,
        then run every launch's `cleanup_file` (its container's removal): the teardown of a
        deployment whose controller died before its own (a crashed worker).
        Returns the groups that were alive."""
        alive = group_alive('"$p"')
        script = (
            f'found=; for f in {quote(folder)}/*.pgid; do p=$(cat "$f" 2>/dev/null); '
            f'case "$p" in ""|*[!0-9]*) continue;; esac; '
            f'{alive} && {{ kill -TERM -- -"$p" 2>/dev/null; found="$found $p"; }}; done; '
            f"for i in $(seq {int(grace * 10)}); do left=; "
            f'for p in $found; do {alive} && left=1; done; [ -z "$left" ] && break; sleep 0.1; done; '
            f'for p in $found; do kill -KILL -- -"$p" 2>/dev/null; done; '
            f'for f in {quote(folder)}/*.cleanup; do [ -f "$f" ] && sh "$f" 2>/dev/null; done; '
            f'echo "KILLED $found"'
        )
        out = self.run(script, timeout=grace + 30).stdout
        line = next((x for x in out.splitlines() if x.startswith("KILLED")), "KILLED")
        return [int(p) for p in line.split()[1:]]

    def exec_failure(self, proc: RemoteProcess) -> int | None:
        """The status of a launch whose program could not be executed (`exec_line`), else None."""
        return self._status_file(exec_status_path(proc.log_path))

    def exit_status(self, proc: RemoteProcess) -> int | None:
        """The status a finished launch ended with (`exec_line`), None while unknown."""
        return self._status_file(exit_status_path(proc.log_path))

    def _status_file(self, path: str) -> int | None:
        try:
            out = self.run(f"cat {quote(path)} 2>/dev/null", timeout=15).stdout
        except (InfrastructureError, CommandTimeout):
            return None
        return int(out.strip()) if out.strip().isdigit() else None

    def alive(self, proc: RemoteProcess) -> bool:
        return self.run(group_alive(proc.pgid), timeout=15).ok

    def kill(self, proc: RemoteProcess, grace: float = 10.0) -> None:
        """TERM the group, wait up to `grace` seconds, then KILL whatever is left. A stopped
        (SIGSTOPped, hung) group is continued after the TERM, so it can act on it."""
        pg = f"-{proc.pgid}"
        script = (
            f"kill -TERM -- {pg} 2>/dev/null || exit 0; kill -CONT -- {pg} 2>/dev/null; "
            f"for i in $(seq {int(grace * 10)}); do {group_alive(proc.pgid)} || exit 0; sleep 0.1; done; "
            f"kill -KILL -- {pg} 2>/dev/null; sleep 0.2; exit 0"
        )
        self.run(script, timeout=grace + 15)

    def tail(self, path: str, lines: int = 60) -> str:
        try:
            return self.run(f"tail -n {int(lines)} {quote(path)} 2>/dev/null", timeout=15).stdout
        except (InfrastructureError, CommandTimeout):
            return ""
