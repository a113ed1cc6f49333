"""`SSHTransport`: the `Transport` interface (run, put, get, tree copies) for one inventory host,
on a pooled connection, one channel per command.

Files go by SFTP one session per transfer; whole directories go as one tar stream over a command's
stdin or stdout (one round trip, not one per file).

Commands may carry secrets (`export TOKEN=...`): they are never logged, and error messages show
them with every `NAME=value` masked (`redact_command`).
"""

from __future__ import annotations

import contextlib
import io
import logging
import posixpath
import tarfile
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import paramiko

from dayzero.errors import CommandTimeout, HostSilent, InfrastructureError
from dayzero.lab.transport.base import CommandResult, Transport
from dayzero.lab.transport.ssh.channel import (
    ChannelWriter,
    Feed,
    Feeder,
    PgidFilter,
    Sink,
    Watchdog,
    drain,
    wrap,
)
from dayzero.lab.transport.ssh.config import resolve_target
from dayzero.lab.transport.ssh.hostkeys import Trust
from dayzero.lab.transport.ssh.pool import CONNECT_TIMEOUT_S, POOL, Connection
from dayzero.redact import redact_command
from dayzero.spec.inventory import Host, Inventory
from dayzero.spec.shell import quote

log = logging.getLogger(__name__)

SFTP_IDLE_TIMEOUT_S = 120.0


TREE_TIMEOUT_S = 1800.0


class SSHTransport(Transport):
    """Commands on one inventory host over a pooled paramiko connection."""

    def __init__(
        self, host: Host, inventory: Inventory | None = None, connect_timeout: float = CONNECT_TIMEOUT_S
    ):
        self.host = host
        self.target = resolve_target(host, inventory)
        self.trust = Trust.of(inventory)
        self.connect_timeout = connect_timeout

    @property
    def connection(self) -> paramiko.Transport:
        """The shared paramiko Transport of this host, connecting (or reconnecting) if needed."""
        return POOL.get(self.target, self.trust, self.connect_timeout).transport

    def close(self) -> None:
        """Nothing to release per transport: the connection is shared and closed at exit;
        remote process groups are killed by the Deployment, not by closing a connection."""

    # -- run ------------------------------------------------------------------------------------

    def run(self, command: str, *, timeout: float, stdin: bytes | None = None) -> CommandResult:
        out, err = io.BytesIO(), io.BytesIO()
        feed = None if stdin is None else (lambda writer: writer.write(stdin))
        status = self._exec(command, timeout, feed, out.write, err.write)
        return CommandResult(
            command, status, out.getvalue().decode(errors="replace"), err.getvalue().decode(errors="replace")
        )

    def run_heard(
        self, command: str, *, timeout: float, silence: float, stdin: bytes | None = None
    ) -> CommandResult:
        out, err = io.BytesIO(), io.BytesIO()
        feed = None if stdin is None else (lambda writer: writer.write(stdin))
        status = self._exec(command, timeout, feed, out.write, err.write, silence)
        return CommandResult(
            command, status, out.getvalue().decode(errors="replace"), err.getvalue().decode(errors="replace")
        )

    def _exec(
        self,
        command: str,
        timeout: float,
        feed: Feed | None,
        on_stdout: Sink,
        on_stderr: Sink,
        silence: float | None = None,
    ) -> int:
        """Run `bash -c command` on one channel; returns the exit status (-1: killed by a signal)."""
        deadline = time.monotonic() + timeout
        log.debug("%s: exec (%d chars, timeout %.0fs)", self.host.name, len(command), timeout)
        conn = POOL.get(self.target, self.trust, self.connect_timeout)
        if not conn.sessions.acquire(timeout=max(deadline - time.monotonic(), 0.0)):
            raise self._timeout(command, timeout, "all sessions of the connection stayed busy", killed=False)
        try:
            chan = self._open_session(conn, deadline, command, timeout)
            try:
                return self._exec_on(chan, command, deadline, timeout, feed, on_stdout, on_stderr, silence)
            finally:
                chan.close()  # every channel counts against MaxSessions until closed
        finally:
            conn.sessions.release()

    def _exec_on(self, chan, command, deadline, timeout, feed, on_stdout, on_stderr, silence=None) -> int:
        chan.fileno()  # create the wake-up pipe before any data can arrive
        stderr = PgidFilter(on_stderr)
        with Watchdog(chan, deadline - time.monotonic(), stderr) as dog:
            self._start_command(chan, command, timeout, dog)
            feeder = Feeder(chan, feed) if feed is not None else None
            if feeder is None:
                chan.shutdown_write()  # stdin is /dev/null, as for LocalTransport
            else:
                feeder.start()
            try:
                heard = drain(chan, on_stdout, stderr.write, dog.done, silence)
                stderr.flush()
                if not heard:  # nothing can reach the host now: let the connection go, unkilled
                    raise self._silent(chan, command, silence)
                if not dog.fired:
                    chan.status_event.wait(max(deadline - time.monotonic(), 0.0) + 1.0)
                if dog.fired:  # the kill ends the command (EOF) before the killer is done
                    dog.done.wait(30.0)
            except HostSilent:
                raise
            except BaseException:
                dog.stop_command()  # a local failure (or Ctrl-C) must not leave it running
                raise
        chan.close()  # also wakes a feeder blocked on input the command never read
        if feeder is not None:
            feeder.join(timeout=5.0)
            if feeder.error is not None:
                raise InfrastructureError(f"{self.host.name}: could not send input: {feeder.error}")
        return self._exit_status(chan, dog, command, timeout)

    def _start_command(self, chan: paramiko.Channel, command: str, timeout: float, dog: Watchdog) -> None:
        try:
            chan.exec_command(wrap(command))
        except (paramiko.SSHException, OSError, EOFError) as exc:
            if dog.fired:
                raise self._timeout(command, timeout) from None
            raise self._lost(f"exec failed: {exc or type(exc).__name__}") from None
        if not dog.mark_started():
            raise self._timeout(command, timeout)

    def _exit_status(self, chan: paramiko.Channel, dog: Watchdog, command: str, timeout: float) -> int:
        if chan.exit_status != -1:
            return chan.exit_status
        if dog.fired:
            raise self._timeout(command, timeout)
        transport = chan.get_transport()
        if not chan.eof_received:
            if transport is not None:
                transport.join(timeout=2.0)  # let paramiko mark the connection dead before reuse
            raise self._lost("the connection closed mid-command (sshd died, or the network dropped)")
        if transport is None or not transport.is_active():
            raise self._lost("the connection closed before the exit status arrived")
        # sshd sent `exit-signal` (paramiko ignores it): the command was killed by a signal.
        return -1

    def _open_session(
        self, conn: Connection, deadline: float, command: str, timeout: float
    ) -> paramiko.Channel:
        """A fresh channel. sshd frees a session slot only when it garbage-collects the closed
        channel, a moment after our CLOSE, so a refusal on a live connection ("no more sessions")
        is retried until the deadline. paramiko keeps one `saved_exception` per connection, so
        under concurrency a refusal can also surface as a bare "Unable to open channel".
        A pooled connection found dead here is replaced once: nothing has run yet."""
        delay, reconnected = 0.005, False
        while True:
            try:
                return conn.transport.open_session(timeout=self.connect_timeout)
            except (paramiko.SSHException, OSError, EOFError, AttributeError) as exc:
                why = f"{exc or type(exc).__name__}"
                if conn.active():
                    if time.monotonic() + delay > deadline:
                        why = f"the server kept refusing sessions: {why}"
                        raise self._timeout(command, timeout, why, killed=False) from None
                    time.sleep(delay)
                    delay = min(delay * 2, 0.25)
                elif not reconnected:
                    conn, reconnected = POOL.get(self.target, self.trust, self.connect_timeout), True
                else:
                    raise self._lost(f"cannot open a session: {why}") from None

    def _timeout(self, command: str, timeout: float, why: str = "", killed: bool = True) -> CommandTimeout:
        what = "ran past" if killed else "could not start within"
        reason = f" ({why})" if why else ""
        outcome = "; its process group was killed" if killed else ""
        return CommandTimeout(
            f"{self.target.describe()}: command {what} {timeout:g}s{reason}{outcome}: "
            + redact_command(command)
        )

    def _silent(self, chan: paramiko.Channel, command: str, silence: float) -> HostSilent:
        """The host went quiet: its connection is closed and not dialled again for a while
        (`SILENT_HOLD_S`), and what runs there is left to the host's watchdog, which sees the
        lease go stale."""
        POOL.silenced(self.target, self.trust)
        return HostSilent(
            f"{self.target.describe()}: the host stopped answering: nothing from the command for "
            f"{silence:g}s (network down, or the host hung): " + redact_command(command)
        )

    def _lost(self, what: str) -> InfrastructureError:
        return InfrastructureError(f"{self.target.describe()}: {what}")

    # -- files ----------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _sftp(self, what: str) -> Iterator[paramiko.SFTPClient]:
        """One SFTP session per transfer, closed after it, so it never holds one of MaxSessions."""
        conn = POOL.get(self.target, self.trust, self.connect_timeout)
        with conn.sessions:
            try:
                sftp = conn.client.open_sftp()
            except (paramiko.SSHException, OSError, EOFError) as exc:
                raise self._lost(f"cannot start SFTP: {exc or type(exc).__name__}") from None
            try:
                sftp.get_channel().settimeout(SFTP_IDLE_TIMEOUT_S)
                yield sftp
            except (paramiko.SSHException, OSError, EOFError) as exc:
                raise InfrastructureError(f"{self.target.describe()}: {what}: {exc}") from None
            finally:
                sftp.close()

    def put(self, local: Path, remote: str) -> None:
        remote = _sftp_path(remote)
        parent = posixpath.dirname(remote)
        if parent:
            self.check(f"mkdir -p {quote(parent)}", timeout=60)
        with self._sftp(f"put {local} -> {remote}") as sftp:
            sftp.put(str(local), remote)

    def get(self, remote: str, local: Path) -> None:
        """SFTP without prefetch. Unbounded prefetch can hang large downloads, and bounded
        prefetch (paramiko 5.1) races: `_prefetch_done` turns true whenever no read is in flight,
        the reader falls back to plain reads and closes the file while the prefetch thread still
        sends ("Socket is closed" in a stray thread). Many or large files: `get_tree`."""
        remote = _sftp_path(remote)
        Path(local).parent.mkdir(parents=True, exist_ok=True)
        with self._sftp(f"get {remote} -> {local}") as sftp:
            sftp.get(remote, str(local), prefetch=False)

    def put_tree(self, local_dir: Path, remote_dir: str, *, timeout: float = TREE_TIMEOUT_S) -> None:
        """Copy a directory's contents as one tar stream: one round trip, not one per file."""
        local_dir = Path(local_dir)
        if not local_dir.is_dir():
            raise InfrastructureError(f"{self.host.name}: put_tree: {local_dir} is not a directory")

        def feed(writer: ChannelWriter) -> None:
            with tarfile.open(fileobj=writer, mode="w|") as tar:
                tar.add(str(local_dir), arcname=".")

        err = io.BytesIO()
        target = quote(remote_dir)
        status = self._exec(
            f"mkdir -p {target} && tar -C {target} -xf -", timeout, feed, err.write, err.write
        )
        if status != 0:
            raise InfrastructureError(
                f"{self.host.name}: put_tree {local_dir} -> {remote_dir}: tar exited {status}: "
                f"{err.getvalue().decode(errors='replace').strip()[-500:]}"
            )

    def get_tree(self, remote_dir: str, local_dir: Path, *, timeout: float = TREE_TIMEOUT_S) -> None:
        """Fetch a directory as a tar stream, spooled to disk, extracted with the `data` filter
        (no absolute paths, no links out of the tree, no device files)."""
        local_dir = Path(local_dir)
        err = io.BytesIO()
        with tempfile.TemporaryFile(prefix="dayzero-tree-") as spool:
            status = self._exec(f"tar -C {quote(remote_dir)} -cf - .", timeout, None, spool.write, err.write)
            if status != 0:
                raise InfrastructureError(
                    f"{self.host.name}: get_tree {remote_dir} -> {local_dir}: tar exited {status}: "
                    f"{err.getvalue().decode(errors='replace').strip()[-500:]}"
                )
            spool.seek(0)
            local_dir.mkdir(parents=True, exist_ok=True)
            try:
                with tarfile.open(fileobj=spool, mode="r:") as tar:
                    tar.extractall(local_dir, filter="data")
            except tarfile.TarError as exc:
                raise InfrastructureError(f"{self.host.name}: get_tree {remote_dir}: {exc}") from None


def _sftp_path(remote: str) -> str:
    """SFTP starts in the home directory and does not expand `~`."""
    return remote[2:] if remote.startswith("~/") else remote
