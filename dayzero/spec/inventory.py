"""Lab inventories (`hosts/*.yaml`) as frozen `Host` records and, for a Slurm lab, a `SlurmCluster`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from dayzero.cache import cache_root, server_dir
from dayzero.errors import ConfigError, raise_all
from dayzero.spec import yamlfile
from dayzero.spec.suggest import did_you_mean

CACHE_TOKEN = "${DAYZERO_CACHE}"
# The cached llama.cpp build's folder, whose name carries the version and the pinned level.
LLAMA_CPP_TOKEN = "${DAYZERO_LLAMA_CPP}"


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
    container: str = "none"  # docker | podman | pyxis (a Slurm node): the engine runs in an image
    container_image: str | None = None  # pyxis: the image its Slurm kind names, instead of the card's
    # Foreign CPU (a share of the host's cores) above which a missed floor is the lab's (0: off).
    max_foreign_load: float = 0.25

    @property
    def var(self) -> dict[str, str]:
        return dict(self.vars)


@dataclass(frozen=True)
class SlurmHardware:
    """How to ask the cluster for one node of a hardware kind. The gres is in the lab's own names
    (`gpu:nvidia_b300:8`): listing it under `b300` is how a lab maps its gres names to kinds."""

    hardware: str
    gres: str = ""
    accelerators: int = 1
    partition: str | None = None
    constraint: str | None = None
    container: str | None = None  # none | pyxis, instead of the cluster's
    container_image: str | None = None  # pyxis: instead of the card's image for the kind

    @property
    def gres_type(self) -> str | None:
        """`b300` of `gpu:b300:8`; None for an untyped gres (`gpu:8`) or none."""
        parts = self.gres.split(":")
        return parts[1] if len(parts) == 3 else None


@dataclass(frozen=True)
class SlurmCluster:
    """A Slurm cluster: Slurm commands run on `login` after `setup`; a cell's nodes come from one
    allocation in `partition`; `engine_setup`, `workdir`, `python` and `vars` apply on its nodes."""

    login: Host
    partition: str
    hardware: tuple[SlurmHardware, ...]
    setup: str = field(default="", repr=False)  # may hold a secret (a token in an env var)
    account: str | None = None
    qos: str | None = None
    time_limit: str = "1:00:00"
    max_jobs: int = 1
    exclusive: bool = True
    container: str = "none"
    workdir: str = "/tmp/dayzero"
    engine_setup: str = field(default="", repr=False)
    python: str = "python3"
    vars: tuple[tuple[str, str], ...] = ()

    def for_hardware(self, hardware: str) -> SlurmHardware | None:
        return next((h for h in self.hardware if h.hardware == hardware), None)

    def container_of(self, kind: SlurmHardware) -> str:
        """How a kind's roles run: `pyxis` (srun --container-image) or `none`, the kind's word first."""
        return kind.container or self.container

    def kind_of_gres(self, gres_type: str) -> str | None:
        """The hardware kind a node's gres type stands for (`nvidia_b300` -> `b300`), if mapped."""
        return next((h.hardware for h in self.hardware if h.gres_type == gres_type), None)


@dataclass(frozen=True)
class Inventory:
    path: Path
    hosts: tuple[Host, ...]
    known_hosts: Path | None = None
    accept_new_host_keys: bool = False
    ssh_config: Path | None = None
    secrets: tuple[str, ...] = field(default=(), repr=False)
    slurm: SlurmCluster | None = None
    lab: str = ""  # the lab's name (`lab:`), carried into evidence; "" where the inventory names none

    def host(self, name: str) -> Host:
        for h in self.hosts:
            if h.name == name:
                return h
        raise KeyError(name)

    def for_hardware(self, hardware: str) -> tuple[Host, ...]:
        """Hosts that may run cells of `hardware` (a jump host with `slots: 0` never does)."""
        return tuple(h for h in self.hosts if h.hardware == hardware and h.slots > 0)


def _expand_local(value: str) -> str:
    """`${DAYZERO_CACHE}` means this machine's cache, `${DAYZERO_LLAMA_CPP}` its llama.cpp build;
    only a local host shares the controller's disk."""
    return value.replace(LLAMA_CPP_TOKEN, str(server_dir())).replace(CACHE_TOKEN, str(cache_root()))


def _check_hardware(
    path: Path, where: str, kind: str, hardware_names: set[str] | None, parts: tuple = ()
) -> None:
    """`parts`: where the kind is written (a host's, else `defaults`'), for the error's line."""
    if hardware_names is not None and kind not in hardware_names:
        line = next(filter(None, (yamlfile.line_of(path, list(p)) for p in parts)), None)
        raise ConfigError(
            path,
            where,
            f"unknown hardware {kind!r}{did_you_mean(kind, hardware_names)}; "
            f"expected one of {sorted(hardware_names)}" + (f" (line {line})" if line else ""),
        )


def _slurm(path: Path, data: dict, hardware_names: set[str] | None) -> SlurmCluster:
    login = data.get("login", {})
    transport = login.get("transport", "local")
    if transport == "ssh" and not login.get("address"):
        raise ConfigError(path, "slurm.login", "transport ssh needs 'address' (the login node)")
    kinds = []
    for kind, fields in data["hardware"].items():
        _check_hardware(path, f"slurm.hardware.{kind}", kind, hardware_names, (("slurm", "hardware", kind),))
        gres = fields.get("gres", "")
        kinds.append(
            SlurmHardware(
                hardware=kind,
                gres=gres,
                accelerators=fields.get("accelerators", int(gres.rsplit(":", 1)[1]) if gres else 1),
                partition=fields.get("partition"),
                constraint=fields.get("constraint"),
                container=fields.get("container"),
                container_image=fields.get("container_image"),
            )
        )
    return SlurmCluster(
        login=Host(
            name="slurm-login",
            hardware="slurm-login",
            transport=transport,
            address=login.get("address", "localhost"),
            port=login.get("port", 22),
            user=login.get("user"),
            identity=login.get("identity"),
            jump=login.get("jump"),
            slots=0,
        ),
        partition=data["partition"],
        hardware=tuple(kinds),
        setup=data.get("setup", ""),
        account=data.get("account"),
        qos=data.get("qos"),
        time_limit=data.get("time_limit", "1:00:00"),
        max_jobs=data.get("max_jobs", 1),
        exclusive=data.get("exclusive", True),
        container=data.get("container", "none"),
        workdir=data.get("workdir", "/tmp/dayzero"),
        engine_setup=data.get("engine_setup", ""),
        python=data.get("python", "python3"),
        vars=tuple(sorted(data.get("vars", {}).items())),
    )


def _accelerators(path: Path, where: str, fields: dict, hw) -> int:
    """A host's accelerator count: as the catalogue's kind has per node unless the host says why
    it differs (`accelerators_why`); a count it leaves out is the catalogue's (else 1)."""
    per_node = getattr(hw, "accelerators_per_node", None)
    given = fields.get("accelerators")
    if given is None:
        return per_node or 1
    if per_node and given not in (0, per_node) and not fields.get("accelerators_why"):
        raise ConfigError(
            path,
            f"{where}.accelerators",
            f"{given}, but matrix/hardware.yaml gives a {fields['hardware']} node {per_node} "
            f"(every --tp and per-accelerator figure follows it): give {per_node}, or say why this "
            "host differs in accelerators_why",
        )
    return given


def load_inventory(path: Path, hardware_names: set[str] | Mapping | None = None) -> Inventory:
    """`hardware_names`: the matrix's kinds; the catalogue itself (`matrix.hardware`) also holds
    each host's accelerator count to its kind's."""
    path = Path(path)
    data = yamlfile.load(path, "inventory")
    if "hosts" not in data and "slurm" not in data:
        raise ConfigError(path, "", "expected 'hosts', 'slurm' (a Slurm cluster) or both")
    errors = []  # the cluster's and every host's, reported at once
    slurm = None
    try:
        slurm = _slurm(path, data["slurm"], hardware_names) if "slurm" in data else None
    except ConfigError as exc:
        errors.append(exc)
    defaults = data.get("defaults", {})
    hosts = []
    for name, fields in data.get("hosts", {}).items():
        merged = {**defaults, **fields}
        where = f"hosts.{name}"
        try:
            if "hardware" not in merged:
                raise ConfigError(path, where, "missing field 'hardware' (e.g. cpu, b300)")
            written = (("hosts", name, "hardware"), ("defaults", "hardware"))
            _check_hardware(path, f"{where}.hardware", merged["hardware"], hardware_names, written)
            catalogue = (
                hardware_names.get(merged["hardware"]) if isinstance(hardware_names, Mapping) else None
            )
            accelerators = _accelerators(path, where, merged, catalogue)
        except ConfigError as exc:
            errors.append(exc)
            continue
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
                accelerators=accelerators,
                labels=tuple(merged.get("labels", ())),
                workdir=merged.get("workdir", "/tmp/dayzero"),
                engine_setup=merged.get("engine_setup", ""),
                slots=merged.get("slots", 1),
                python=merged.get("python", "python3"),
                vars=tuple(sorted(merged.get("vars", {}).items())),
                container=merged.get("container", "none"),
                max_foreign_load=float(merged.get("max_foreign_load", 0.25)),
            )
        )
    raise_all(errors)
    base = path.parent
    known = data.get("known_hosts")
    cfg = data.get("ssh_config")
    return Inventory(
        path=path,
        hosts=tuple(hosts),
        known_hosts=(base / known).resolve() if known else None,
        accept_new_host_keys=data.get("accept_new_host_keys", False),
        ssh_config=(base / cfg).resolve() if cfg else None,
        secrets=tuple(h.engine_setup for h in hosts if h.engine_setup)
        + (tuple(s for s in (slurm.setup, slurm.engine_setup) if s) if slurm else ()),
        slurm=slurm,
        lab=data.get("lab", ""),
    )
