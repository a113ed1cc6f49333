"""One command on one channel: its exec line, feeding stdin, draining output, and its deadline.

- Output is read from stdout and stderr together until EOF, *then* the exit status is taken (the
  other order deadlocks once ~2 MiB is buffered, paramiko #448); stdin is fed from its own thread.
- paramiko's timeouts only bound idle time, so a watchdog enforces the wall-clock deadline. Closing
  a channel leaves the command running on the host, so at the deadline its process group is killed
  from a second channel. The group id comes from the command line itself: sshd makes each session a
  process-group leader, and our wrapper writes `dayzero-pgid:$$` as the first line of stderr
  (stripped before the caller sees it). The SSH `signal` request would be the protocol's way, but
  OpenSSH refuses it for root logins ("session signalling requires privilege separation"), so it is
  only the fallback.
"""

from __future__ import annotations

import contextlib
import logging
import select
import shlex
import threading
import time
from collections.abc import Callable

import paramiko
from paramiko.common import cMSG_CHANNEL_REQUEST
from paramiko.message import Message

log = logging.getLogger(__name__)

CHUNK = 1 << 16


Feed = Callable[["ChannelWriter"], None]
Sink = Callable[[bytes], object]


class _ChannelClosed(Exception):
    """The command stopped reading its input, or the channel went away: not a local error."""


class ChannelWriter:
    """File-like writer onto a channel's stdin, for `tarfile` and plain bytes alike."""

    def __init__(self, chan: paramiko.Channel):
        self.chan = chan

    def write(self, data: bytes) -> int:
        try:
            self.chan.sendall(data)
        except OSError as exc:  # paramiko raises socket.error once the channel is closed
            raise _ChannelClosed(str(exc)) from exc
        return len(data)


class Feeder(threading.Thread):
    """Writes stdin while the caller drains stdout/stderr: doing both in one thread can deadlock
    as soon as the command echoes more than a window of output before reading all its input."""

    def __init__(self, chan: paramiko.Channel, feed: Feed):
        super().__init__(daemon=True, name="dayzero-ssh-stdin")
        self.chan, self.feed, self.error = chan, feed, None

    def run(self):
        try:
            self.feed(ChannelWriter(self.chan))
        except _ChannelClosed:
            pass  # like subprocess's BrokenPipe: the command decided it had read enough
        except Exception as exc:  # a local failure (unreadable file): reported by the caller
            self.error = exc
        finally:
            with contextlib.suppress(OSError, EOFError, paramiko.SSHException):
                self.chan.shutdown_write()


def _send_signal(chan: paramiko.Channel, name: str) -> None:
    """RFC 4254 6.9 `signal`: sshd runs killpg() on the session; paramiko has no API for it."""
    if chan.closed or chan.transport is None:
        return
    msg = Message()
    msg.add_byte(cMSG_CHANNEL_REQUEST)
    msg.add_int(chan.remote_chanid)
    msg.add_string("signal")
    msg.add_boolean(False)
    msg.add_string(name)
    with contextlib.suppress(OSError, EOFError, paramiko.SSHException):
        chan.transport._send_user_message(msg)


PGID_MARK = b"dayzero-pgid:"


def wrap(command: str) -> str:
    """The exec line: the login shell reports its pid (sshd made it a process-group leader), then
    becomes `bash -c command`, so bash semantics hold whatever the login shell is."""
    return f"echo {PGID_MARK.decode()}$$ >&2; exec bash -c {shlex.quote(command)}"


class PgidFilter:
    """Takes the `dayzero-pgid:N` line off the front of stderr and passes everything else on.
    Text before it (a noisy ~/.bashrc) is kept; if the mark never comes, nothing is lost."""

    LIMIT = 1 << 16

    def __init__(self, sink: Sink):
        self.sink, self.pgid, self._head, self._done = sink, None, b"", False

    def write(self, data: bytes) -> None:
        if self._done:
            self.sink(data)
            return
        self._head += data
        start = self._head.find(PGID_MARK)
        end = self._head.find(b"\n", start) if start >= 0 else -1
        if end >= 0:
            digits = self._head[start + len(PGID_MARK) : end]
            self.pgid = int(digits) if digits.isdigit() else None
            self._emit(self._head[:start] + self._head[end + 1 :])
        elif len(self._head) > self.LIMIT:
            self._emit(self._head)

    @property
    def done(self) -> bool:
        """The mark was found, or will not come."""
        return self._done

    def flush(self) -> None:
        if not self._done:
            self._emit(self._head)

    def _emit(self, data: bytes) -> None:
        self._done, self._head = True, b""
        if data:
            self.sink(data)


def _kill_group(transport: paramiko.Transport | None, pgid: int) -> None:
    """`kill -KILL -- -pgid` on a second channel: what a timed-out command gets. A refused
    channel (sshd still freeing a closed session) is retried a few times."""
    chan = None
    for delay in (0.0, 0.05, 0.2, 0.5):
        time.sleep(delay)
        if transport is None or not transport.is_active():
            break
        try:
            chan = transport.open_session(timeout=5.0)
            break
        except (paramiko.SSHException, OSError, EOFError) as exc:
            log.debug("channel to kill process group %d refused: %s", pgid, exc)
    if chan is None:
        log.warning("could not open a channel to kill process group %d", pgid)
        return
    try:
        chan.exec_command(f"kill -KILL -- -{pgid} {pgid} 2>/dev/null; exit 0")
        chan.shutdown_write()
        chan.status_event.wait(10.0)
    except (paramiko.SSHException, OSError, EOFError) as exc:
        log.warning("could not kill process group %d: %s", pgid, exc)
    finally:
        with contextlib.suppress(paramiko.SSHException, OSError, EOFError):
            chan.close()


class Watchdog:
    """Ends a command at its deadline, whatever paramiko is blocked in: `exec_command` waits for
    the server's reply without any timeout, and reads only have idle timeouts.

    Before the command starts, the timer closes the channel (that wakes `exec_command`). After it
    started, only the caller's thread may close the channel: paramiko's close() also closes the
    wake-up pipe that `drain` is select()ing on. So the timer kills the process group and sets
    `done`; `drain` sees it and returns, and the caller closes the channel."""

    MARK_WAIT_S = 2.0

    def __init__(self, chan: paramiko.Channel, seconds: float, stderr: PgidFilter):
        self.chan, self.stderr = chan, stderr
        self.fired = self.started = False
        self.done = threading.Event()
        self._lock = threading.Lock()
        self._timer = threading.Timer(max(seconds, 0.0), self._fire)
        self._timer.daemon = True

    def mark_started(self) -> bool:
        """Record that exec succeeded; False if the deadline won the race (channel closed)."""
        with self._lock:
            self.started = not self.fired
            return self.started

    def _fire(self) -> None:
        with self._lock:
            self.fired, started = True, self.started
        if started:
            self._kill(pull=False)  # the caller's `drain` keeps parsing stderr for the mark
        else:
            _send_signal(self.chan, "KILL")
            self.chan.close()
        self.done.set()

    def stop_command(self) -> None:
        """After a local failure in the caller's thread (which then closes the channel)."""
        self._timer.cancel()
        if self.started:
            self._kill(pull=True)

    def _kill(self, pull: bool) -> None:
        pgid = self._pgid(pull)
        if pgid is not None:
            _kill_group(self.chan.get_transport(), pgid)
        else:  # the wrapper never reported: ask sshd (honoured for non-root logins only)
            _send_signal(self.chan, "KILL")

    def _pgid(self, pull: bool) -> int | None:
        """The mark is the first line of stderr, but sshd may send stdout packets before it.
        `pull`: nobody else reads the channel now, so read it here (the output is lost anyway)."""
        give_up = time.monotonic() + self.MARK_WAIT_S
        while not self.stderr.done and not self.chan.closed and time.monotonic() < give_up:
            if pull and (self.chan.recv_ready() or self.chan.recv_stderr_ready()):
                with contextlib.suppress(Exception):
                    if self.chan.recv_ready():
                        self.chan.recv(CHUNK)
                    if self.chan.recv_stderr_ready():
                        self.stderr.write(self.chan.recv_stderr(CHUNK))
            else:
                time.sleep(0.01)
        return self.stderr.pgid

    def __enter__(self):
        self._timer.start()
        return self

    def __exit__(self, *exc):
        self._timer.cancel()


def drain(
    chan: paramiko.Channel,
    on_stdout: Sink,
    on_stderr: Sink,
    stop: threading.Event,
    silence: float | None = None,
) -> bool:
    """Read stdout and stderr as they arrive until EOF: reading only one lets the other fill the
    window and stall the command. `fileno()` is a pipe paramiko marks for either stream or close;
    the short select timeout notices `stop` (the deadline) without a pipe of our own.
    Returns False when nothing came for `silence` seconds (the host stopped answering)."""
    wakeup = chan.fileno()
    heard = time.monotonic()
    while True:
        busy = False
        if chan.recv_ready():
            on_stdout(chan.recv(CHUNK))
            busy = True
        if chan.recv_stderr_ready():
            on_stderr(chan.recv_stderr(CHUNK))
            busy = True
        if busy:
            heard = time.monotonic()
            continue
        if chan.eof_received or chan.closed or stop.is_set():
            return True
        if silence is not None and time.monotonic() - heard > silence:
            return False
        select.select([wakeup], [], [], 0.05)
