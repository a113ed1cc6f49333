"""Lab inventories (`hosts/*.yaml`) as frozen `Host` records."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from dayzero.errors import ConfigError
from dayzero.lab.cache import cache_root
from dayzero.spec import yamlfile

CACHE_TOKEN = "${DAYZERO_CACHE}"


@dataclass(frozen=True)
class Host:
    name: str
    hardware: str
    transport: str = "ssh"
    address: str = ""
    port: int = 22
    user: str | None = None
    identity: str | None = None
    jump: str | None = None
    accelerators: int = 1
    labels: tuple[str, ...] = ()
    workdir: str = "/tmp/dayzero"
    engine_setup: str = field(default="", repr=False)  # may hold a secret: never in a traceback
    slots: int = 1
    python: str = "python3"
    vars: tuple[tuple[str, str], ...] = ()
    container: str = "none"  # docker | podman: the engine runs in the card's image (dayzero.spec.container)

    @property
    def var(self) -> dict[str, str]:
        return dict(self.vars)


@dataclass(frozen=True)
class Inventory:
    path: Path
    hosts: tuple[Host, ...]
    known_hosts: Path | None = None
    accept_new_host_keys: bool = False
    ssh_config: Path | None = None
    secrets: tuple[str, ...] = field(default=(), repr=False)

    def host(self, name: str) -> Host:
        for h in self.hosts:
            if h.name == name:
                return h
        raise KeyError(name)

    def for_hardware(self, hardware: str) -> tuple[Host, ...]:
        """Hosts that may run cells of `hardware` (a jump host with `slots: 0` never does)."""
        return tuple(h for h in self.hosts if h.hardware == hardware and h.slots > 0)


def _expand_local(value: str) -> str:
    """`${DAYZERO_CACHE}` means this machine's cache; only a local host shares the controller's disk."""
    return value.replace(CACHE_TOKEN, str(cache_root()))


def load_inventory(path: Path, hardware_names: set[str] | None = None) -> Inventory:
    path = Path(path)
    data = yamlfile.load(path, "inventory")
    defaults = data.get("defaults", {})
    hosts = []
    for name, fields in data["hosts"].items():
        merged = {**defaults, **fields}
        where = f"hosts.{name}"
        if "hardware" not in merged:
            raise ConfigError(path, where, "missing field 'hardware' (e.g. cpu, b300)")
        if hardware_names is not None and merged["hardware"] not in hardware_names:
            raise ConfigError(
                path,
                f"{where}.hardware",
                f"unknown hardware {merged['hardware']!r}; expected one of {sorted(hardware_names)}",
            )
        transport = merged.get("transport", "ssh")
        if transport == "ssh" and not merged.get("address"):
            merged["address"] = name  # an ssh alias or DNS name, like Ansible's inventory_hostname
        if transport == "local":
            for key in ("workdir", "engine_setup"):
                if key in merged:
                    merged[key] = _expand_local(merged[key])
            merged["vars"] = {k: _expand_local(v) for k, v in merged.get("vars", {}).items()}
        hosts.append(
            Host(
                name=name,
                hardware=merged["hardware"],
                transport=transport,
                address=merged.get("address", "localhost"),
                port=merged.get("port", 22),
                user=merged.get("user"),
                identity=merged.get("identity"),
                jump=merged.get("jump"),
                accelerators=merged.get("accelerators", 1),
                labels=tuple(merged.get("labels", ())),
                workdir=merged.get("workdir", "/tmp/dayzero"),
                engine_setup=merged.get("engine_setup", ""),
                slots=merged.get("slots", 1),
                python=merged.get("python", "python3"),
                vars=tuple(sorted(merged.get("vars", {}).items())),
                container=merged.get("container", "none"),
            )
        )
    base = path.parent
    known = data.get("known_hosts")
    cfg = data.get("ssh_config")
    return Inventory(
        path=path,
        hosts=tuple(hosts),
        known_hosts=(base / known).resolve() if known else None,
        accept_new_host_keys=data.get("accept_new_host_keys", False),
        ssh_config=(base / cfg).resolve() if cfg else None,
        secrets=tuple(h.engine_setup for h in hosts if h.engine_setup),
    )
