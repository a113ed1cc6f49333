"""Which host keys are trusted: OpenSSH's known_hosts model, strictly.

Host keys are checked like OpenSSH with `StrictHostKeyChecking yes`: an unknown key is refused
unless the inventory opts in with `accept_new_host_keys` (then it is recorded, appended, never
rewritten), and a *changed* key is always refused (accepting it silently is CWE-295). Non-22 ports
are keyed `[host]:port`, as OpenSSH does. Refusals carry a fingerprint in `ssh-keygen -lf` form and
an `ssh-keyscan` command that runs as pasted.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import os
import shlex
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path

import paramiko

from dayzero.errors import HostKeyError
from dayzero.lab.transport.ssh.config import SshTarget
from dayzero.spec.inventory import Inventory

log = logging.getLogger(__name__)


class NewHostKeyWarning(UserWarning):
    """An unknown host key was trusted and recorded because the inventory opted in."""


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


class TrustPolicy(paramiko.MissingHostKeyPolicy):
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


def changed_key_error(target: SshTarget, trust: Trust, exc: paramiko.BadHostKeyException):
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
