"""The connection pool: one paramiko connection per (process, target, trust settings).

- A handshake costs tens of milliseconds, a channel on an open connection well under one, so every
  `SSHTransport` of a host shares its connection; dead ones are replaced on the next use.
  At most `MAX_SESSIONS` channels are open at once per connection (OpenSSH's MaxSessions).
- paramiko does not follow ProxyJump: a jump is a `direct-tcpip` channel on the jump host's
  (pooled) connection, passed as `sock=`; chains nest the same way.
- TCP_NODELAY: without it, each small request waits for a delayed ACK (~40 ms per command).
"""

from __future__ import annotations

import atexit
import logging
import os
import socket
import threading
import time
from dataclasses import dataclass, field

import paramiko

from dayzero.errors import HostUnreachable, InfrastructureError
from dayzero.lab.transport.base import CONNECT_TIMEOUT_S, CONNECT_TRIES
from dayzero.lab.transport.ssh.config import SshTarget, identity_problem
from dayzero.lab.transport.ssh.hostkeys import Trust, TrustPolicy, changed_key_error

log = logging.getLogger(__name__)

MAX_SESSIONS = 10  # OpenSSH's default MaxSessions: channels beyond it are refused
KEEPALIVE_S = 5
# Sent data (a keepalive at least) unacknowledged this long ends the connection (TCP_USER_TIMEOUT):
# a network that drops packets ends every command on it within KEEPALIVE_S + DEAD_AFTER_S, not
# after TCP's ~15 minutes of retransmissions. paramiko's keepalive wants no reply: alone it only
# gives TCP something to retransmit.
DEAD_AFTER_S = 20
# Tries of a dial (CONNECT_TRIES) are this far apart; a host that still does not answer is
# HostUnreachable, and the host pool quarantines it for the run.
RETRY_PAUSE_S = 1.0
# A host that fell silent mid-command, or whose dial used the whole connect timeout unanswered,
# is not dialled again for this long: the cell's teardown (kill, log copy, lease release: each a
# reconnect that would wait CONNECT_TIMEOUT_S again) fails at once, and the host's watchdog stops
# what runs there once its lease goes stale. (Measured: a host whose sshd stopped mid-cell kept
# its cell's teardown waiting 15 s a step, 135 s in all, before this applied to dials too.)
SILENT_HOLD_S = 60.0
# TCP's handshake (to the host, or from its jump host through a tunnel) gets this share of the
# connect timeout; SSH's banner and login get the rest. A live host's TCP answers in a round trip,
# or after a lost SYN or two (resent at 1 and 3 s: 5 s at the 15 s default sees three SYNs go),
# while a loaded sshd may take seconds to say its banner; a host that is down behind a network
# dropping its packets says nothing ever: it costs this share, not the whole timeout (7 hosts
# behind a silent bastion: 15.9 s -> 5 s).
FIRST_CONTACT_SHARE = 1 / 3


@dataclass
class Connection:
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
        self._connections: dict[tuple[SshTarget, Trust], Connection] = {}
        self._key_locks: dict[tuple[SshTarget, Trust], threading.Lock] = {}
        self._silent: dict[tuple[SshTarget, Trust], float] = {}  # when each fell silent
        self._unanswered: dict[tuple[SshTarget, Trust], tuple[float, str]] = {}  # a dial's time-out
        self._failed: dict[tuple[SshTarget, Trust], tuple[float, str]] = {}  # each one's last failed dial

    def silenced(self, target: SshTarget, trust: Trust) -> None:
        """The host stopped answering: close its connection, do not dial it for SILENT_HOLD_S."""
        with self._lock:
            self._silent[(target, trust)] = time.monotonic()
            conn = self._connections.pop((target, trust), None)
        if conn is not None:
            conn.client.close()

    def get(self, target: SshTarget, trust: Trust, connect_timeout: float = CONNECT_TIMEOUT_S) -> Connection:
        """The host's live connection, dialled if need be. A dial that failed after this call
        began (another thread's, while this one waited for it) is this call's answer too: the
        hosts behind one jump host, probed at once, dial it once."""
        key = (target, trust)
        asked = time.monotonic()
        with self._lock:
            key_lock = self._key_locks.setdefault(key, threading.Lock())
            since = time.monotonic() - self._silent.get(key, -SILENT_HOLD_S)
        if since < SILENT_HOLD_S:
            raise InfrastructureError(
                f"{target.describe()}: not dialled: it stopped answering {since:.0f}s ago"
            )
        with key_lock:  # one handshake per host at a time; other hosts connect in parallel
            conn = self._connections.get(key)
            if conn is not None and conn.active():
                return conn
            if conn is not None:
                log.info("%s: connection lost, reconnecting", target.describe())
                conn.client.close()
            when, why = self._unanswered.get(key, (-SILENT_HOLD_S, ""))
            if (ago := time.monotonic() - when) < SILENT_HOLD_S:
                raise HostUnreachable(f"{why}; not dialled again {ago:.0f}s later")
            when, why = self._failed.get(key, (asked, ""))
            if when > asked:
                raise HostUnreachable(why)
            try:
                conn = _connect(target, trust, self, connect_timeout)
            except HostUnreachable as exc:
                self._failed[key] = (time.monotonic(), str(exc))
                if not exc.retry:  # it used the whole timeout: the next dial would wait as long
                    self._unanswered[key] = (time.monotonic(), str(exc))
                raise
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
        self._silent = {}
        self._unanswered = {}
        self._failed = {}


POOL = _Pool()
os.register_at_fork(after_in_child=POOL.forget)
atexit.register(POOL.close_all)  # paramiko warns that unclosed clients can hang interpreter exit


def close_all() -> None:
    """Close every pooled connection of this process (later transports reconnect)."""
    POOL.close_all()


def _tunnel(
    target: SshTarget, trust: Trust, pool: _Pool, timeout: float, first_contact: float
) -> paramiko.Channel:
    """A `direct-tcpip` channel from the jump host to the target: what OpenSSH's -J does (the
    jump host's TCP handshake with the target within `first_contact`). A jump host that cannot
    be reached fails the target at once: its own dial tried again."""
    try:
        hop = pool.get(target.jump, trust, timeout)
    except HostUnreachable as exc:
        raise _unreachable(target.describe(), f"jump host {exc}", False) from None
    try:
        return hop.transport.open_channel(
            "direct-tcpip", (target.hostname, target.port), ("127.0.0.1", 0), timeout=first_contact
        )
    except (paramiko.SSHException, OSError, EOFError) as exc:
        why = f"jump host {target.jump.label} could not open a tunnel to {target.hostname}:{target.port}"
        if "Timeout opening channel" in str(exc):  # paramiko's words: the jump host's connect hung
            raise _unreachable(target.describe(), f"{why}: {silent_cause(first_contact)}", False) from None
        raise _unreachable(target.describe(), f"{why}: {exc or type(exc).__name__}", True) from None


def _client(target: SshTarget, trust: Trust) -> paramiko.SSHClient:
    client = paramiko.SSHClient()
    if trust.known_hosts.exists():
        try:
            client.load_system_host_keys(str(trust.known_hosts))  # read-only: never saved back
        except (OSError, paramiko.SSHException) as exc:
            raise InfrastructureError(
                f"{target.describe()}: cannot read {trust.known_hosts}: {exc}"
            ) from None
    client.set_missing_host_key_policy(TrustPolicy(target, trust))
    return client


def unreachable_cause(
    exc: BaseException, hostname: str, port: int, timeout: float, took: float = 0.0
) -> tuple[str, bool]:
    """Why a dial failed, in words a lab engineer can act on, and whether another try may help
    (refused, unresolved: a host rebooting; no answer used the time up already). An SSH error
    after `took` seconds, near all of `timeout`, is a port that took the connection and never
    spoke SSH (paramiko says "No existing session" then). Pure."""
    if isinstance(exc, socket.gaierror):
        return f"name {hostname!r} does not resolve ({exc.strerror or exc})", True
    if isinstance(exc, paramiko.ssh_exception.NoValidConnectionsError):
        errors = list(exc.errors.values())
        if errors and all(isinstance(e, ConnectionRefusedError) for e in errors):
            return f"connection refused on port {port} (no sshd listening)", True
        return "; ".join(sorted({e.strerror or str(e) for e in errors})) or str(exc), True
    if isinstance(exc, ConnectionRefusedError):
        return f"connection refused on port {port} (no sshd listening)", True
    if isinstance(exc, TimeoutError):
        return f"no answer within {timeout:.3g}s", False
    if isinstance(exc, paramiko.SSHException) and ("banner" in str(exc) or took >= 0.9 * timeout):
        return f"no SSH answer within {timeout:.3g}s (the port takes connections; nothing speaks SSH)", False
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror, True
    if isinstance(exc, EOFError):  # paramiko's bare EOFError: the peer hung up mid-handshake
        return "the connection was closed before SSH answered", True
    return str(exc) or type(exc).__name__, True


def silent_cause(first_contact: float) -> str:
    """A TCP handshake nothing answered, in words with its fix. Pure."""
    return (
        f"no answer within {first_contact:.3g}s (the host is down, or a network drops its packets; "
        "on a slow link, raise --connect-timeout: a third of it is this wait)"
    )


def _connect(target: SshTarget, trust: Trust, pool: _Pool, timeout: float) -> Connection:
    """Dial the target: up to CONNECT_TRIES tries, all within `timeout` seconds, TCP's handshake
    within FIRST_CONTACT_SHARE of it; HostUnreachable names the host and the cause of the last
    one. An identity file that cannot log in is said at once, never dialled: no try can help."""
    if (problem := identity_problem(target)) is not None:
        raise HostUnreachable(f"{target.describe()}: cannot log in: {problem}")
    started = time.monotonic()
    deadline = started + timeout
    first_contact = timeout * FIRST_CONTACT_SHARE
    for tries in range(1, CONNECT_TRIES + 1):
        try:
            left = max(deadline - time.monotonic(), 0.1)
            return _dial(target, trust, pool, left, min(first_contact, left))
        except HostUnreachable as exc:
            if not exc.retry or tries == CONNECT_TRIES or deadline - time.monotonic() < RETRY_PAUSE_S:
                took, word = time.monotonic() - started, "try" if tries == 1 else "tries"
                raise HostUnreachable(f"{exc} ({tries} {word} in {took:.0f}s)", exc.retry) from None
        time.sleep(RETRY_PAUSE_S)
    raise AssertionError("not reached")  # pragma: no cover


def _unreachable(where: str, cause: str, retry: bool) -> HostUnreachable:
    return HostUnreachable(f"{where}: cannot connect: {cause}", retry)


def _socket(target: SshTarget, first_contact: float) -> socket.socket:
    """The TCP connection, made here rather than by paramiko: its errors say what went wrong
    (paramiko's say "[Errno None] Unable to connect")."""
    try:
        return socket.create_connection((target.hostname, target.port), timeout=first_contact)
    except TimeoutError:
        raise _unreachable(target.describe(), silent_cause(first_contact), False) from None
    except OSError as exc:  # a name that does not resolve, refused, no answer, no route
        why = unreachable_cause(exc, target.hostname, target.port, first_contact)
        raise _unreachable(target.describe(), *why) from None


def _dial(target: SshTarget, trust: Trust, pool: _Pool, timeout: float, first_contact: float) -> Connection:
    """One try: TCP (or the jump host's tunnel) within `first_contact`, SSH within `timeout`."""
    started, where = time.monotonic(), target.describe()
    client = _client(target, trust)
    if target.jump is not None:
        sock = _tunnel(target, trust, pool, timeout, first_contact)
    else:
        sock = _socket(target, first_contact)
    try:
        client.connect(
            target.hostname,
            target.port,
            username=target.user,
            key_filename=list(target.identities) or None,
            allow_agent=target.use_agent,
            look_for_keys=not target.identities,
            timeout=timeout,
            banner_timeout=timeout,
            auth_timeout=timeout,
            sock=sock,
        )
    except InfrastructureError:
        client.close()
        raise
    except paramiko.BadHostKeyException as exc:
        client.close()
        raise changed_key_error(target, trust, exc) from None
    except paramiko.AuthenticationException as exc:
        client.close()
        tried = ", ".join([*(f"identity {p}" for p in target.identities), "ssh-agent keys"])
        raise HostUnreachable(
            f"{where}: authentication failed ({exc}); the server accepted none of: {tried}. "
            f"Check `identity` (or IdentityFile in ssh config) and the host's authorized_keys."
        ) from None
    except (paramiko.SSHException, OSError, EOFError) as exc:
        client.close()
        why = unreachable_cause(exc, target.hostname, target.port, timeout, time.monotonic() - started)
        raise _unreachable(where, *why) from None
    transport = client.get_transport()
    transport.set_keepalive(KEEPALIVE_S)
    if isinstance(transport.sock, socket.socket):  # a jump's channel rides on its own socket
        transport.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        transport.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, DEAD_AFTER_S * 1000)
    log.debug("%s: connected", where)
    return Connection(client)
