"""Run commands on lab hosts over SSH (paramiko), with OpenSSH's trust model and ProxyJump.

Why it is built this way:

- Host keys are checked strictly, like OpenSSH with `StrictHostKeyChecking yes`: an unknown key is
  refused unless the inventory opts in with `accept_new_host_keys`, and a *changed* key is always
  refused (accepting it silently is CWE-295). Non-22 ports are keyed `[host]:port`, as OpenSSH does.
- One connection per (process, host, trust settings), shared by every `SSHTransport` of that host:
  a handshake costs tens of milliseconds, a channel on an open connection well under one. Channels
  are closed after each use and at most `MAX_SESSIONS` are open at once (OpenSSH's MaxSessions).
- paramiko does not follow ProxyJump: a jump is a `direct-tcpip` channel on the jump host's
  (pooled) connection, passed as `sock=`; chains nest the same way.
- `run` reads stdout and stderr together until EOF, *then* takes the exit status (the other order
  deadlocks once ~2 MiB is buffered, paramiko #448), and enforces a real wall-clock deadline
  (paramiko's timeouts only bound idle time). Closing a channel leaves the command running on the
  host, so at the deadline its process group is killed from a second channel. The group id comes
  from the command line itself: sshd makes each session a process-group leader, and our wrapper
  writes `dayzero-pgid:$$` as the first line of stderr (stripped before the caller sees it).
  The SSH `signal` request would be the protocol's way, but OpenSSH refuses it for root logins
  ("session signalling requires privilege separation"), so it is only the fallback.
- TCP_NODELAY: without it, each small request waits for a delayed ACK (~40 ms per command).
- Commands may carry secrets (`export TOKEN=...`): they are never logged, and error messages show
  them with every `NAME=value` masked.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import getpass
import hashlib
import io
import logging
import os
import posixpath
import select
import shlex
import socket
import tarfile
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import paramiko
from paramiko.common import cMSG_CHANNEL_REQUEST
from paramiko.message import Message

from dayzero.errors import CommandTimeout, ConfigError, HostKeyError, InfrastructureError
from dayzero.lab.transport.base import CommandResult, Transport
from dayzero.redact import redact_command
from dayzero.spec.inventory import Host, Inventory
from dayzero.spec.shell import quote

log = logging.getLogger(__name__)

MAX_SESSIONS = 10  # OpenSSH's default MaxSessions: channels beyond it are refused
KEEPALIVE_S = 15
CONNECT_TIMEOUT_S = 15.0
SFTP_IDLE_TIMEOUT_S = 120.0
CHUNK = 1 << 16
TREE_TIMEOUT_S = 1800.0

Feed = Callable[["_ChannelWriter"], None]
Sink = Callable[[bytes], object]


class NewHostKeyWarning(UserWarning):
    """An unknown host key was trusted and recorded because the inventory opted in."""


# --- where to connect: inventory + ssh config, resolved once -----------------------------------


@dataclass(frozen=True)
class SshTarget:
    """One hop after ssh config is applied; frozen and hashable, so it keys the connection pool."""

    label: str
    hostname: str
    port: int
    user: str
    identities: tuple[str, ...] = ()
    use_agent: bool = True
    host_key_alias: str | None = None
    jump: SshTarget | None = None

    @property
    def known_hosts_name(self) -> str:
        """The name OpenSSH files this host's key under: `[host]:port` unless the port is 22."""
        name = self.host_key_alias or self.hostname
        return name if self.port == 22 else f"[{name}]:{self.port}"

    def describe(self) -> str:
        via = f" via {self.jump.label}" if self.jump else ""
        return f"{self.label} ({self.user}@{self.hostname}:{self.port}{via})"


@dataclass(frozen=True)
class Trust:
    """Which known_hosts file vouches for host keys, and whether unknown keys may be recorded."""

    known_hosts: Path
    accept_new: bool = False
    ssh_config: Path | None = None  # named in fix-it hints, so that they run as written

    @classmethod
    def of(cls, inventory: Inventory | None) -> Trust:
        config = Path(inventory.ssh_config) if inventory is not None and inventory.ssh_config else None
        if inventory is not None and inventory.known_hosts is not None:
            return cls(Path(inventory.known_hosts), inventory.accept_new_host_keys, config)
        accept = inventory.accept_new_host_keys if inventory is not None else False
        return cls(Path("~/.ssh/known_hosts").expanduser(), accept, config)

    @property
    def hashed(self) -> bool:
        """Does the known_hosts file hash its host names (`HashKnownHosts yes`)?"""
        try:
            return any(line.startswith("|1|") for line in self.known_hosts.read_text().splitlines())
        except OSError:
            return False


def _ssh_config(inventory: Inventory | None) -> paramiko.SSHConfig:
    """The inventory's `ssh_config`, else `~/.ssh/config` when it exists, else an empty config."""
    explicit = inventory.ssh_config if inventory is not None else None
    path = Path(explicit) if explicit else Path("~/.ssh/config").expanduser()
    if not path.exists():
        if explicit:
            raise ConfigError(inventory.path, "ssh_config", f"file not found: {path}")
        return paramiko.SSHConfig()
    try:
        return paramiko.SSHConfig.from_path(str(path))
    except (OSError, paramiko.ssh_exception.ConfigParseError) as exc:
        raise ConfigError(path, "", f"cannot parse ssh config: {exc}") from None


def resolve_target(host: Host, inventory: Inventory | None = None) -> SshTarget:
    """Apply ssh config (HostName/User/Port/IdentityFile/ProxyJump) and the inventory's jumps."""
    return _Resolver(inventory, _ssh_config(inventory)).host(host, ())


@dataclass(frozen=True)
class _Resolver:
    inventory: Inventory | None
    config: paramiko.SSHConfig

    def host(self, host: Host, seen: tuple[str, ...]) -> SshTarget:
        opts = self.config.lookup(host.address)
        seen = self._check_loop(host.name, seen)
        identities = (host.identity,) if host.identity else tuple(opts.get("identityfile", ()))
        return SshTarget(
            label=host.name,
            hostname=opts.get("hostname", host.address),
            port=host.port if host.port != 22 else int(opts.get("port", 22)),
            user=host.user or opts.get("user") or getpass.getuser(),
            identities=tuple(os.path.expanduser(p) for p in identities),
            use_agent=opts.get("identitiesonly", "no").lower() != "yes",
            host_key_alias=opts.get("hostkeyalias"),
            jump=self.jumps(host.jump or opts.get("proxyjump"), seen),
        )

    def alias(self, spec: str, seen: tuple[str, ...]) -> SshTarget:
        """A ProxyJump hop that is not an inventory host: `[user@]alias[:port]`."""
        user, name, port = _parse_hop(spec)
        opts = self.config.lookup(name)
        seen = self._check_loop(spec, seen)
        return SshTarget(
            label=spec,
            hostname=opts.get("hostname", name),
            port=port or int(opts.get("port", 22)),
            user=user or opts.get("user") or getpass.getuser(),
            identities=tuple(os.path.expanduser(p) for p in opts.get("identityfile", ())),
            use_agent=opts.get("identitiesonly", "no").lower() != "yes",
            host_key_alias=opts.get("hostkeyalias"),
            jump=self.jumps(opts.get("proxyjump"), seen),
        )

    def jumps(self, spec: str | None, seen: tuple[str, ...]) -> SshTarget | None:
        """`a,b` means: connect to a, from a to b, from b to the target (OpenSSH's ProxyJump)."""
        if not spec or spec.strip().lower() == "none":
            return None
        chain = None
        for hop in (h.strip() for h in spec.split(",")):
            target = self.hop(hop, seen)
            chain = replace(target, jump=chain) if chain is not None else target
        return chain

    def hop(self, spec: str, seen: tuple[str, ...]) -> SshTarget:
        if self.inventory is not None and any(h.name == spec for h in self.inventory.hosts):
            return self.host(self.inventory.host(spec), seen)
        return self.alias(spec, seen)

    def _check_loop(self, name: str, seen: tuple[str, ...]) -> tuple[str, ...]:
        if name in seen:
            where = self.inventory.path if self.inventory is not None else "<ssh config>"
            raise ConfigError(where, f"hosts.{seen[0]}.jump", f"jump loop: {' -> '.join((*seen, name))}")
        return (*seen, name)


def _parse_hop(spec: str) -> tuple[str | None, str, int | None]:
    rest = spec.removeprefix("ssh://")
    user, _, rest = rest.rpartition("@")
    if rest.startswith("["):
        name, _, port = rest[1:].partition("]")
        port = port.lstrip(":")
    elif rest.count(":") == 1:
        name, port = rest.split(":")
    else:
        name, port = rest, ""
    return user or None, name, int(port) if port else None


# --- host keys ------------------------------------------------------------------------------------


def fingerprint(key: paramiko.PKey) -> str:
    """OpenSSH's `SHA256:...` form, so a message can be compared with `ssh-keygen -lf`."""
    digest = base64.b64encode(hashlib.sha256(key.asbytes()).digest()).decode().rstrip("=")
    return f"SHA256:{digest}"


_KNOWN_HOSTS_LOCK = threading.Lock()


def _record_host_key(path: Path, name: str, key: paramiko.PKey, hashed: bool = False) -> None:
    """Append one line; never rewrite the file (paramiko's save_host_keys would drop comments).
    In a hashed file the name is hashed too: a clear name would undo what hashing hides."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with _KNOWN_HOSTS_LOCK:
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
        with os.fdopen(fd, "rb+") as fh:
            size = fh.seek(0, os.SEEK_END)
            needs_newline = size > 0 and os.pread(fd, 1, size - 1) != b"\n"
            shown = paramiko.HostKeys.hash_host(name) if hashed else name
            line = f"{shown} {key.get_name()} {key.get_base64()}\n"
            fh.write((("\n" if needs_newline else "") + line).encode())


def _keyscan_hint(target: SshTarget, trust: Trust) -> str:
    """A command that runs as pasted: the scan (through the jump host with the inventory's ssh
    config, identity and known_hosts), appended to the file that vouches for host keys."""
    port = f"-p {target.port} " if target.port != 22 else ""
    scan = f"ssh-keyscan {'-H ' if trust.hashed else ''}{port}{shlex.quote(target.hostname)}"
    jump = target.jump
    if jump is not None:
        options = [f"-F {shlex.quote(str(trust.ssh_config))}"] if trust.ssh_config else []
        options.append(f"-o UserKnownHostsFile={shlex.quote(str(trust.known_hosts))}")
        options += [f"-i {shlex.quote(i)}" for i in jump.identities]
        if jump.jump is not None:
            options.append(f"-J {shlex.quote(_hop(jump.jump))}")
        options.append(f"-p {jump.port}")
        scan = f"ssh {' '.join(options)} {shlex.quote(f'{jump.user}@{jump.hostname}')} {shlex.quote(scan)}"
    return f"{scan} >> {shlex.quote(str(trust.known_hosts))}"


def _hop(target: SshTarget) -> str:
    """`user@host:port` for `ssh -J`, outermost jump first."""
    this = f"{target.user}@{target.hostname}:{target.port}"
    return f"{_hop(target.jump)},{this}" if target.jump is not None else this


class _TrustPolicy(paramiko.MissingHostKeyPolicy):
    """Called by paramiko only for keys *absent* from known_hosts; a changed key never gets here."""

    def __init__(self, target: SshTarget, trust: Trust):
        self.target, self.trust = target, trust

    def missing_host_key(self, client, hostname, key):
        where, path = self.target.describe(), self.trust.known_hosts
        if not self.trust.accept_new:
            raise HostKeyError(
                f"{where}: unknown host key for {hostname} ({key.get_name()} {fingerprint(key)}): "
                f"not in {path}, and strict host-key checking refuses unknown keys. After verifying "
                f"the fingerprint, add it: {_keyscan_hint(self.target, self.trust)} -- or set "
                f"`accept_new_host_keys: true` in the inventory to trust and record new keys."
            )
        _record_host_key(path, hostname, key, hashed=self.trust.hashed)
        message = (
            f"{where}: trusting NEW host key for {hostname} ({key.get_name()} {fingerprint(key)}) "
            f"and recording it in {path}, because the inventory sets accept_new_host_keys"
        )
        log.warning(message)
        warnings.warn(message, NewHostKeyWarning, stacklevel=2)


def _changed_key_error(target: SshTarget, trust: Trust, exc: paramiko.BadHostKeyException):
    name, path = target.known_hosts_name, trust.known_hosts
    return HostKeyError(
        f"{target.describe()}: HOST KEY CHANGED for {name}: the server offered "
        f"{exc.key.get_name()} {fingerprint(exc.key)}, but {path} records "
        f"{exc.expected_key.get_name()} {fingerprint(exc.expected_key)}. Someone may be intercepting "
        f"the connection, or the host was reinstalled; refusing to connect (accept_new_host_keys "
        f"never overrides a changed key). After verifying the new key out of band, remove the old "
        f"entry with: ssh-keygen -R '{name}' -f {path}  and add the new one: "
        f"{_keyscan_hint(target, trust)}"
    )


# --- the connection pool ----------------------------------------------------------------------


@dataclass
class _Connection:
    """A live client and the semaphore that keeps its open sessions under MaxSessions."""

    client: paramiko.SSHClient
    sessions: threading.BoundedSemaphore = field(
        default_factory=lambda: threading.BoundedSemaphore(MAX_SESSIONS)
    )

    @property
    def transport(self) -> paramiko.Transport:
        return self.client.get_transport()

    def active(self) -> bool:
        transport = self.client.get_transport()
        return transport is not None and transport.is_active()


class _Pool:
    """Connections of this process, keyed by (target, trust); reconnects ones that died."""

    def __init__(self):
        self._lock = threading.Lock()
        self._connections: dict[tuple[SshTarget, Trust], _Connection] = {}
        self._key_locks: dict[tuple[SshTarget, Trust], threading.Lock] = {}

    def get(self, target: SshTarget, trust: Trust) -> _Connection:
        key = (target, trust)
        with self._lock:
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        with key_lock:  # one handshake per host at a time; other hosts connect in parallel
            conn = self._connections.get(key)
            if conn is not None and conn.active():
                return conn
            if conn is not None:
                log.info("%s: connection lost, reconnecting", target.describe())
                conn.client.close()
            conn = _connect(target, trust, self)
            with self._lock:
                self._connections.pop(key, None)
                self._connections[key] = conn  # after its jumps, so close_all closes it first
            return conn

    def close_all(self) -> None:
        with self._lock:
            connections = list(self._connections.values())
            self._connections.clear()
        for conn in reversed(connections):  # targets before the jump hosts that carry them
            conn.client.close()

    def forget(self) -> None:
        """In a forked child: the parent owns these sockets and their threads did not survive."""
        self._lock = threading.Lock()
        self._connections = {}
        self._key_locks = {}


_POOL = _Pool()
os.register_at_fork(after_in_child=_POOL.forget)
atexit.register(_POOL.close_all)  # paramiko warns that unclosed clients can hang interpreter exit


def close_all() -> None:
    """Close every pooled connection of this process (later transports reconnect)."""
    _POOL.close_all()


def _tunnel(target: SshTarget, trust: Trust, pool: _Pool) -> paramiko.Channel:
    """A `direct-tcpip` channel from the jump host to the target: what OpenSSH's -J does."""
    hop = pool.get(target.jump, trust)
    try:
        return hop.transport.open_channel(
            "direct-tcpip", (target.hostname, target.port), ("127.0.0.1", 0), timeout=CONNECT_TIMEOUT_S
        )
    except (paramiko.SSHException, OSError, EOFError) as exc:
        raise InfrastructureError(
            f"{target.describe()}: jump host {target.jump.label} could not open a tunnel to "
            f"{target.hostname}:{target.port}: {exc or type(exc).__name__}"
        ) from None


def _client(target: SshTarget, trust: Trust) -> paramiko.SSHClient:
    client = paramiko.SSHClient()
    if trust.known_hosts.exists():
        try:
            client.load_system_host_keys(str(trust.known_hosts))  # read-only: never saved back
        except (OSError, paramiko.SSHException) as exc:
            raise InfrastructureError(
                f"{target.describe()}: cannot read {trust.known_hosts}: {exc}"
            ) from None
    client.set_missing_host_key_policy(_TrustPolicy(target, trust))
    return client


def _connect(target: SshTarget, trust: Trust, pool: _Pool) -> _Connection:
    sock = _tunnel(target, trust, pool) if target.jump is not None else None
    client = _client(target, trust)
    where = target.describe()
    try:
        client.connect(
            target.hostname,
            target.port,
            username=target.user,
            key_filename=list(target.identities) or None,
            allow_agent=target.use_agent,
            look_for_keys=not target.identities,
            timeout=CONNECT_TIMEOUT_S,
            banner_timeout=CONNECT_TIMEOUT_S,
            auth_timeout=CONNECT_TIMEOUT_S,
            sock=sock,
        )
    except InfrastructureError:
        client.close()
        raise
    except paramiko.BadHostKeyException as exc:
        client.close()
        raise _changed_key_error(target, trust, exc) from None
    except paramiko.AuthenticationException as exc:
        client.close()
        tried = ", ".join([*(f"identity {p}" for p in target.identities), "ssh-agent keys"])
        raise InfrastructureError(
            f"{where}: authentication failed ({exc}); the server accepted none of: {tried}. "
            f"Check `identity` (or IdentityFile in ssh config) and the host's authorized_keys."
        ) from None
    except (paramiko.SSHException, OSError, EOFError) as exc:
        client.close()
        raise InfrastructureError(f"{where}: cannot connect: {exc or type(exc).__name__}") from None
    transport = client.get_transport()
    transport.set_keepalive(KEEPALIVE_S)
    if isinstance(transport.sock, socket.socket):  # a jump's channel rides on its own socket
        transport.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    log.debug("%s: connected", where)
    return _Connection(client)


# --- one command on one channel ------------------------------------------------------------------


class _ChannelClosed(Exception):
    """The command stopped reading its input, or the channel went away: not a local error."""


class _ChannelWriter:
    """File-like writer onto a channel's stdin, for `tarfile` and plain bytes alike."""

    def __init__(self, chan: paramiko.Channel):
        self.chan = chan

    def write(self, data: bytes) -> int:
        try:
            self.chan.sendall(data)
        except OSError as exc:  # paramiko raises socket.error once the channel is closed
            raise _ChannelClosed(str(exc)) from exc
        return len(data)


class _Feeder(threading.Thread):
    """Writes stdin while the caller drains stdout/stderr: doing both in one thread can deadlock
    as soon as the command echoes more than a window of output before reading all its input."""

    def __init__(self, chan: paramiko.Channel, feed: Feed):
        super().__init__(daemon=True, name="dayzero-ssh-stdin")
        self.chan, self.feed, self.error = chan, feed, None

    def run(self):
        try:
            self.feed(_ChannelWriter(self.chan))
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


def _wrap(command: str) -> str:
    """The exec line: the login shell reports its pid (sshd made it a process-group leader), then
    becomes `bash -c command`, so bash semantics hold whatever the login shell is."""
    return f"echo {PGID_MARK.decode()}$$ >&2; exec bash -c {shlex.quote(command)}"


class _PgidFilter:
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


class _Watchdog:
    """Ends a command at its deadline, whatever paramiko is blocked in: `exec_command` waits for
    the server's reply without any timeout, and reads only have idle timeouts.

    Before the command starts, the timer closes the channel (that wakes `exec_command`). After it
    started, only the caller's thread may close the channel: paramiko's close() also closes the
    wake-up pipe that `_drain` is select()ing on. So the timer kills the process group and sets
    `done`; `_drain` sees it and returns, and the caller closes the channel."""

    MARK_WAIT_S = 2.0

    def __init__(self, chan: paramiko.Channel, seconds: float, stderr: _PgidFilter):
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
            self._kill(pull=False)  # the caller's `_drain` keeps parsing stderr for the mark
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


def _drain(chan: paramiko.Channel, on_stdout: Sink, on_stderr: Sink, stop: threading.Event) -> None:
    """Read stdout and stderr as they arrive until EOF: reading only one lets the other fill the
    window and stall the command. `fileno()` is a pipe paramiko marks for either stream or close;
    the short select timeout notices `stop` (the deadline) without a pipe of our own."""
    wakeup = chan.fileno()
    while True:
        busy = False
        if chan.recv_ready():
            on_stdout(chan.recv(CHUNK))
            busy = True
        if chan.recv_stderr_ready():
            on_stderr(chan.recv_stderr(CHUNK))
            busy = True
        if busy:
            continue
        if chan.eof_received or chan.closed or stop.is_set():
            return
        select.select([wakeup], [], [], 0.05)


# --- the transport -----------------------------------------------------------------------------


class SSHTransport(Transport):
    """Commands on one inventory host over a pooled paramiko connection."""

    def __init__(self, host: Host, inventory: Inventory | None = None):
        self.host = host
        self.target = resolve_target(host, inventory)
        self.trust = Trust.of(inventory)

    @property
    def connection(self) -> paramiko.Transport:
        """The shared paramiko Transport of this host, connecting (or reconnecting) if needed."""
        return _POOL.get(self.target, self.trust).transport

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

    def _exec(self, command: str, timeout: float, feed: Feed | None, on_stdout: Sink, on_stderr: Sink) -> int:
        """Run `bash -c command` on one channel; returns the exit status (-1: killed by a signal)."""
        deadline = time.monotonic() + timeout
        log.debug("%s: exec (%d chars, timeout %.0fs)", self.host.name, len(command), timeout)
        conn = _POOL.get(self.target, self.trust)
        if not conn.sessions.acquire(timeout=max(deadline - time.monotonic(), 0.0)):
            raise self._timeout(command, timeout, "all sessions of the connection stayed busy", killed=False)
        try:
            chan = self._open_session(conn, deadline, command, timeout)
            try:
                return self._exec_on(chan, command, deadline, timeout, feed, on_stdout, on_stderr)
            finally:
                chan.close()  # every channel counts against MaxSessions until closed
        finally:
            conn.sessions.release()

    def _exec_on(self, chan, command, deadline, timeout, feed, on_stdout, on_stderr) -> int:
        chan.fileno()  # create the wake-up pipe before any data can arrive
        stderr = _PgidFilter(on_stderr)
        with _Watchdog(chan, deadline - time.monotonic(), stderr) as dog:
            self._start_command(chan, command, timeout, dog)
            feeder = _Feeder(chan, feed) if feed is not None else None
            if feeder is None:
                chan.shutdown_write()  # stdin is /dev/null, as for LocalTransport
            else:
                feeder.start()
            try:
                _drain(chan, on_stdout, stderr.write, dog.done)
                stderr.flush()
                if not dog.fired:
                    chan.status_event.wait(max(deadline - time.monotonic(), 0.0) + 1.0)
                if dog.fired:  # the kill ends the command (EOF) before the killer is done
                    dog.done.wait(30.0)
            except BaseException:
                dog.stop_command()  # a local failure (or Ctrl-C) must not leave it running
                raise
        chan.close()  # also wakes a feeder blocked on input the command never read
        if feeder is not None:
            feeder.join(timeout=5.0)
            if feeder.error is not None:
                raise InfrastructureError(f"{self.host.name}: could not send input: {feeder.error}")
        return self._exit_status(chan, dog, command, timeout)

    def _start_command(self, chan: paramiko.Channel, command: str, timeout: float, dog: _Watchdog) -> None:
        try:
            chan.exec_command(_wrap(command))
        except (paramiko.SSHException, OSError, EOFError) as exc:
            if dog.fired:
                raise self._timeout(command, timeout) from None
            raise self._lost(f"exec failed: {exc or type(exc).__name__}") from None
        if not dog.mark_started():
            raise self._timeout(command, timeout)

    def _exit_status(self, chan: paramiko.Channel, dog: _Watchdog, command: str, timeout: float) -> int:
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
        self, conn: _Connection, deadline: float, command: str, timeout: float
    ) -> paramiko.Channel:
        """A fresh channel. sshd frees a session slot only when it garbage-collects the closed
        channel, a moment after our CLOSE, so a refusal on a live connection ("no more sessions")
        is retried until the deadline. paramiko keeps one `saved_exception` per connection, so
        under concurrency a refusal can also surface as a bare "Unable to open channel".
        A pooled connection found dead here is replaced once: nothing has run yet."""
        delay, reconnected = 0.005, False
        while True:
            try:
                return conn.transport.open_session(timeout=CONNECT_TIMEOUT_S)
            except (paramiko.SSHException, OSError, EOFError, AttributeError) as exc:
                why = f"{exc or type(exc).__name__}"
                if conn.active():
                    if time.monotonic() + delay > deadline:
                        why = f"the server kept refusing sessions: {why}"
                        raise self._timeout(command, timeout, why, killed=False) from None
                    time.sleep(delay)
                    delay = min(delay * 2, 0.25)
                elif not reconnected:
                    conn, reconnected = _POOL.get(self.target, self.trust), True
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

    def _lost(self, what: str) -> InfrastructureError:
        return InfrastructureError(f"{self.target.describe()}: {what}")

    # -- files ----------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _sftp(self, what: str) -> Iterator[paramiko.SFTPClient]:
        """One SFTP session per transfer, closed after it, so it never holds one of MaxSessions."""
        conn = _POOL.get(self.target, self.trust)
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

        def feed(writer: _ChannelWriter) -> None:
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
