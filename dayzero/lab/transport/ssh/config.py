"""Where to connect: an inventory host plus ssh config (HostName, User, Port, IdentityFile,
IdentitiesOnly, HostKeyAlias, ProxyJump) resolved once into a frozen `SshTarget`, jumps included.

paramiko does not follow ProxyJump, so the chain of jump hosts is resolved here (inventory hosts
and ssh-config aliases alike, loops refused) and the pool tunnels through it.
"""

from __future__ import annotations

import fnmatch
import getpass
import os
from dataclasses import dataclass, replace
from pathlib import Path

import paramiko

from dayzero.errors import ConfigError, raise_all
from dayzero.spec.inventory import Host, Inventory
from dayzero.spec.suggest import did_you_mean


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
    identity_field: str = "IdentityFile"  # where `identities` were set, named by their errors

    @property
    def known_hosts_name(self) -> str:
        """The name OpenSSH files this host's key under: `[host]:port` unless the port is 22."""
        name = self.host_key_alias or self.hostname
        return name if self.port == 22 else f"[{name}]:{self.port}"

    def describe(self) -> str:
        via = f" via {self.jump.label}" if self.jump else ""
        return f"{self.label} ({self.user}@{self.hostname}:{self.port}{via})"


def _config_path(inventory: Inventory | None) -> Path:
    explicit = inventory.ssh_config if inventory is not None else None
    return Path(explicit) if explicit else Path("~/.ssh/config").expanduser()


def _ssh_config(inventory: Inventory | None) -> paramiko.SSHConfig:
    """The inventory's `ssh_config`, else `~/.ssh/config` when it exists, else an empty config."""
    explicit = inventory.ssh_config if inventory is not None else None
    path = _config_path(inventory)
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


def check_jumps(inventory: Inventory) -> None:
    """Resolve every SSH host of the inventory before a run: a `jump:` that names no host (a
    misspelt bastion) stops the run with every such line at once, instead of each cell dialling
    it as an alias with the controller's user."""
    hosts = [*inventory.hosts, *([inventory.slurm.login] if inventory.slurm is not None else [])]
    hosts = [h for h in hosts if h.transport == "ssh"]
    resolver = _Resolver(inventory, _ssh_config(inventory)) if hosts else None
    errors = []
    for host in hosts:
        try:
            resolver.host(host, ())
        except ConfigError as exc:
            errors.append(exc)
    raise_all(errors)


def identity_problem(target: SshTarget) -> str | None:
    """Why an identity file of `target` cannot log in, naming the field and the fix, or None.
    Checked before a dial: a missing file or a public key fails every try alike (paramiko said
    "No such file or directory" or "not a valid OPENSSH private key file", no path, retried)."""
    for path in target.identities:
        try:
            with open(path, "rb") as fh:
                head = fh.read(64).lstrip()
        except FileNotFoundError:
            return f"{target.identity_field}: {path} does not exist (give the private key to log in with)"
        except OSError as exc:
            return f"{target.identity_field}: cannot read {path}: {exc.strerror}"
        if path.endswith(".pub") or head.startswith((b"ssh-", b"ecdsa-", b"sk-")):
            private = path.removesuffix(".pub")
            hint = f" ({private}?)" if private != path and os.path.exists(private) else ""
            return f"{target.identity_field}: {path} is a public key: give the private one{hint}"
    return None


@dataclass(frozen=True)
class _Resolver:
    inventory: Inventory | None
    config: paramiko.SSHConfig

    def host(self, host: Host, seen: tuple[str, ...]) -> SshTarget:
        opts = self.config.lookup(host.address)
        seen = self._check_loop(host.name, seen)
        identities = (host.identity,) if host.identity else tuple(opts.get("identityfile", ()))
        field = self.field(host, "identity") if host.identity else self.config_field(host.address)
        return SshTarget(
            label=host.name,
            hostname=opts.get("hostname", host.address),
            port=host.port if host.port != 22 else int(opts.get("port", 22)),
            user=host.user or opts.get("user") or getpass.getuser(),
            identities=tuple(os.path.expanduser(p) for p in identities),
            use_agent=opts.get("identitiesonly", "no").lower() != "yes",
            host_key_alias=opts.get("hostkeyalias"),
            jump=self.jumps(host.jump, seen, self.field(host, "jump"))
            if host.jump
            else self.jumps(opts.get("proxyjump"), seen),
            identity_field=field,
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
            identity_field=self.config_field(name),
        )

    def field(self, host: Host, name: str) -> str:
        """`hosts/lab.yaml: hosts.b300-01.identity`: an inventory field as errors name it."""
        inventory = self.inventory
        if inventory is None:
            return name
        login = inventory.slurm is not None and host == inventory.slurm.login
        where = "slurm.login" if login else f"hosts.{host.name}"
        return f"{inventory.path}: {where}.{name}"

    def config_field(self, name: str) -> str:
        return f"IdentityFile (ssh config {_config_path(self.inventory)}, Host {name})"

    def jumps(self, spec: str | None, seen: tuple[str, ...], field: str = "") -> SshTarget | None:
        """`a,b` means: connect to a, from a to b, from b to the target (OpenSSH's ProxyJump).
        `field`: the inventory's `jump:` it came from, whose hops must name a known host."""
        if not spec or spec.strip().lower() == "none":
            return None
        chain = None
        for hop in (h.strip() for h in spec.split(",")):
            target = self.hop(hop, seen, field)
            chain = replace(target, jump=chain) if chain is not None else target
        return chain

    def hop(self, spec: str, seen: tuple[str, ...], field: str = "") -> SshTarget:
        if self.inventory is not None and any(h.name == spec for h in self.inventory.hosts):
            return self.host(self.inventory.host(spec), seen)
        if field and "@" not in spec and not self.configured(_parse_hop(spec)[1]):
            self.unknown_jump(spec, field)
        return self.alias(spec, seen)

    def configured(self, name: str) -> bool:
        """Does a `Host` pattern of the ssh config other than `*` match `name`?"""
        patterns = [p for p in self.config.get_hostnames() if p != "*" and not p.startswith("!")]
        return any(fnmatch.fnmatchcase(name, p) for p in patterns)

    def unknown_jump(self, spec: str, field: str) -> None:
        file, _, path = field.rpartition(": ")
        names = [h.name for h in self.inventory.hosts] if self.inventory is not None else []
        names += [p for p in self.config.get_hostnames() if p != "*"]
        raise ConfigError(
            file,
            path,
            f"{spec!r} is neither a host of this inventory nor a Host of ssh config "
            f"{_config_path(self.inventory)}{did_you_mean(spec, names)}; name one of them, "
            f"or write user@address[:port] for a jump host known to neither",
        )

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
