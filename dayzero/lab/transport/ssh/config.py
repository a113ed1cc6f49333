"""Where to connect: an inventory host plus ssh config (HostName, User, Port, IdentityFile,
IdentitiesOnly, HostKeyAlias, ProxyJump) resolved once into a frozen `SshTarget`, jumps included.

paramiko does not follow ProxyJump, so the chain of jump hosts is resolved here (inventory hosts
and ssh-config aliases alike, loops refused) and the pool tunnels through it.
"""

from __future__ import annotations

import getpass
import os
from dataclasses import dataclass, replace
from pathlib import Path

import paramiko

from dayzero.errors import ConfigError
from dayzero.spec.inventory import Host, Inventory


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
