"""Recipe rendering: cell + concrete hosts -> per-role env and command. Pure functions.

A cell's *template* (argv and env with placeholders, per role) depends only on the matrix; its
digest identifies the recipe in evidence, so a changed flag makes older evidence stale. Rendering
fills the placeholders from the leased hosts: `{host}`, `{bind}`, `{port}`, `{rank}`, `{nnodes}`,
`{dist_init_addr}`, `{peers}`, `{tp}`, `{weights}`, `{role.<name>.host}`, `{role.<name>.port}` and
the host's `vars` over the card's `vars` (defaults, e.g. threads a host may lower).

Multi-node: a role spanning N > 1 nodes adds the engine's `multinode_args` to its command. Every
rank runs that command (SGLang: `--nnodes/--node-rank/--dist-init-addr`), unless the engine names
a `worker` command: then ranks 1..N-1 run it on the worker port instead and rank 0 reaches them
through `{peers}` (llama.cpp: `rpc-server` on ranks 1..N-1, `llama-server --rpc {peers}` on 0).
Each launch says how it is known to be ready (`Launch.ready`): rank 0 of a role (and a router)
answers the engine's health path, a worker rank accepts on its port, any other rank is running.

Containers: on a host whose inventory says `container: docker|podman`, each launch runs inside
the card's per-hardware image (`dayzero.spec.container`): `Launch.container` is the `docker run`
prefix, `Launch.argv` stays the engine's own argv (what `dayzero lint` parses) and
`Launch.command` is the whole line. The image is part of the recipe digest. On a Slurm node that
says `container: pyxis`, `Launch.step` holds the srun flags that run the role's step in the image
(`--container-image=...`) and the command stays the engine's own.

Secrets: a card marks an env value secret with `{secret_from_env: NAME}` (or writes
`{secret.NAME}` in a value or arg). The template, and so the digest, keeps the placeholder; the
value is read from the controller's environment at render time and registered with
`dayzero.redact`, so no writer can put it in a report.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from dayzero import redact
from dayzero.errors import ConfigError
from dayzero.spec import container, mamba
from dayzero.spec.card import ModelCard
from dayzero.spec.inventory import Host
from dayzero.spec.matrix import Cell, Matrix, parallel_size
from dayzero.spec.references import PLACEHOLDER, RENDERED
from dayzero.spec.shell import exports, join


class MissingValue(ConfigError):
    """A value the recipe needs is null in the matrix ("to confirm"): the cell needs data."""


DIST_INIT_PORT = 20000
SERVER = "server"
HTTP, TCP, ALIVE = "http", "tcp", "alive"  # how a launch is known to be ready


@dataclass(frozen=True)
class RoleTemplate:
    role: str
    nodes: int
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    port: int
    colocate: str | None = None
    endpoint: bool = False
    worker_argv: tuple[str, ...] = ()  # ranks 1..N-1 run this instead (engine.worker), if set
    worker_port: int = 0
    health: str = ""  # the role's own readiness path (a router's /readiness); "": the engine's


@dataclass(frozen=True)
class Launch:
    """One process to start: a role's rank on one host."""

    role: str
    rank: int
    host: str
    address: str
    port: int
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    endpoint: bool
    container: tuple[str, ...] = ()  # `docker run ... <image>` around the engine argv, if any
    step: tuple[str, ...] = ()  # srun flags of the role's step (pyxis: --container-image=...), if any
    ready: str = HTTP  # http: answers the health path; tcp: accepts on its port; alive: runs
    health: str = ""  # the path `ready == http` asks; "": the engine's health_path

    @property
    def command(self) -> str:
        """The whole line that runs: the container prefix, if any, then the engine argv."""
        return join((*self.container, *self.argv))

    @property
    def engine_command(self) -> str:
        """The engine's own command (inside the container, if any)."""
        return join(self.argv)

    @property
    def shell(self) -> str:
        """What an operator would paste: quoted exports then the quoted command."""
        return exports(dict(self.env)) + self.command


@dataclass(frozen=True)
class Recipe:
    cell_id: str
    digest: str
    launches: tuple[Launch, ...]

    @property
    def endpoint(self) -> Launch:
        return next(launch for launch in self.launches if launch.endpoint)

    @property
    def hosts(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(launch.host for launch in self.launches))


def _strs(values) -> tuple[str, ...]:
    return tuple(str(v) for v in values or ())


def _env_value(value) -> str:
    """A plain value, or the placeholder of a secret the controller resolves at render time."""
    if isinstance(value, dict):
        return "{secret." + value["secret_from_env"] + "}"
    return str(value)


def _secrets(temps: Sequence[RoleTemplate], card: ModelCard) -> dict[str, str]:
    """`secret.NAME` -> value from the controller's environment, for every secret a template names."""
    names = {
        m.group(1)[len("secret.") :]
        for t in temps
        for text in (*t.argv, *(v for _, v in t.env))
        for m in PLACEHOLDER.finditer(text)
        if m.group(1).startswith("secret.")
    }
    out = {}
    for name in sorted(names):
        value = os.environ.get(name)
        if not value:
            raise ConfigError(
                card.path, "recipe env", f"secret {name} is not set in the controller's environment"
            )
        redact.register(value)
        out[f"secret.{name}"] = value
    return out


def templates(card: ModelCard, cell: Cell) -> tuple[RoleTemplate, ...]:
    """The cell's roles before any host is known: base recipe + hardware + mode + strategy + options."""
    data = card.raw  # the templates, layered as written (typing them would restate the schema)
    hw = data["hardware"][cell.hardware]
    mode = data["modes"][cell.mode]
    base_port = data["recipe"].get("port", 8000)
    roles = mode.get("roles") or {SERVER: {"endpoint": True}}
    layers = [data["strategies"][cell.strategy]] + [data["options"][o] for o in cell.options]
    out = []
    for name, spec in roles.items():
        own = "command" in spec
        argv = list(_strs(spec["command"])) if own else list(_strs(data["recipe"]["command"]))
        env = {
            **data["recipe"].get("env", {}),
            **hw.get("env", {}),
            **mode.get("env", {}),
            **spec.get("env", {}),
        }
        if not own:
            argv += _strs(hw.get("args")) + _strs(mode.get("args")) + _strs(spec.get("args"))
            for layer in layers:
                if name in layer.get("roles", [name]):
                    argv = _without(argv, layer.get("replaces") or ()) + list(_strs(layer.get("args")))
                    env.update(layer.get("env", {}))
        elif spec.get("args"):
            argv += _strs(spec["args"])
        nodes = 1 if spec.get("colocate") or own else spec.get("nodes", cell.nodes)
        worker = card.engine.worker if nodes > 1 else None
        if nodes > 1:
            argv += card.engine.multinode_args
        out.append(
            RoleTemplate(
                role=name,
                nodes=nodes,
                argv=tuple(argv),
                env=tuple((k, _env_value(v)) for k, v in env.items()),
                port=spec.get("port", base_port),
                colocate=spec.get("colocate"),
                endpoint=spec.get("endpoint", len(roles) == 1),
                worker_argv=worker.argv if worker else (),
                worker_port=worker.port if worker else 0,
                health=spec.get("health_path", ""),
            )
        )
    return tuple(out)


def _without(argv: list[str], flags: Sequence[str]) -> list[str]:
    """`argv` less each of `flags` and its value (`--f v` or `--f=v`): what a layer's `replaces` drops."""
    out: list[str] = []
    skip = False
    for token in argv:
        if skip:
            skip = False
            if not token.startswith("-"):
                continue
        if token in flags:
            skip = True
            continue
        if token.split("=", 1)[0] in flags and "=" in token:
            continue
        out.append(token)
    return out


def _template_payload(t: RoleTemplate) -> dict:
    """A template as hashed: the worker fields only where a worker runs, so the digest of every
    recipe without one is what it was before workers existed."""
    data = dict(t.__dict__)
    if not t.worker_argv:
        del data["worker_argv"], data["worker_port"]
    if not t.health:  # the digest of every role without its own path is what it was before
        del data["health"]
    return data


def _vars(card: ModelCard, cell: Cell) -> dict[str, str]:
    """The card's placeholder defaults, then its hardware entry's (a host's own vars win over both)."""
    return {**card.vars, **card.hardware[cell.hardware].vars}


def host_vars_needed(card: ModelCard, cell: Cell) -> dict[str, str]:
    """Placeholders of the cell's recipe that only a host's `vars` can fill (the card sets no
    default): name -> where the card uses it first. Pure: an inventory is checked against it
    before anything renders, so a missing `model_root` is the inventory's error, not the card's."""
    texts = [("weights", card.weights or ""), ("engine.bind", card.engine.bind)]
    for t in templates(card, cell):
        where = f"modes.{cell.mode} ({t.role})"
        texts += [(where, text) for text in (*t.argv, *(v for _, v in t.env))]
        texts += [("engine.worker", text) for text in t.worker_argv]
    defaults = {**_vars(card, cell), **_parallel(card, cell)}
    needed: dict[str, str] = {}
    for where, text in texts:
        for match in PLACEHOLDER.finditer(text):
            name = match.group(1)
            if name in RENDERED or name in defaults or name.startswith(("role.", "secret.")):
                continue
            needed.setdefault(name, where)
    return needed


def digest(card: ModelCard, cell: Cell) -> str:
    payload = {
        "engine": card.engine.name,
        "weights": card.weights,
        "vars": _vars(card, cell),
        "roles": [_template_payload(t) for t in templates(card, cell)],
    }
    if mamba.stated(card.mamba_ratio):  # the commands carry the ratio computed from it
        payload["mamba_ratio"] = dict(card.mamba_ratio)
    if image := card.hardware[cell.hardware].image:  # a new image (tag or @sha256 digest) is a new recipe
        payload["image"] = image
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=list).encode()).hexdigest()[:16]


def placeholder_hosts(matrix: Matrix, cell: Cell, n: int) -> list[Host]:
    """Hosts node0..N for a recipe without an inventory, like the cookbook prints it. They carry
    the catalogue's accelerator count; a null one stays unknown, so no `--tp` is guessed."""
    return [
        Host(
            name=f"node{i}",
            hardware=cell.hardware,
            address=f"<node{i}>",
            accelerators=matrix.hardware[cell.hardware].accelerators_per_node,
            vars=(("model_root", "<model_root>"),),
        )
        for i in range(n)
    ]


def hosts_needed(card: ModelCard, cell: Cell) -> int:
    return sum(t.nodes for t in templates(card, cell) if not t.colocate)


def _substitute(text: str, values: dict[str, str], where: str, card: ModelCard) -> str:
    def one(match: re.Match) -> str:
        key = match.group(1)
        if key not in values:
            raise ConfigError(
                card.path,
                where,
                f"unknown placeholder {{{key}}}; known here: {', '.join(sorted(values))}",
            )
        return values[key]

    return PLACEHOLDER.sub(one, text)


def _tp(matrix: Matrix, cell: Cell, t: RoleTemplate, hosts: Sequence[Host]) -> str:
    """The mode's `parallel.tp`, else the accelerators across a role's hosts. A count that is
    unknown (a null in the catalogue) stops rendering where `{tp}` is used: the cell needs data,
    never a guessed `--tp`."""
    stated = (matrix.card(cell).raw["modes"][cell.mode].get("parallel") or {}).get("tp")
    if stated:
        return str(stated)
    counts = [h.accelerators for h in hosts]
    if None not in counts:
        return str(sum(counts))
    if any("{tp}" in text for text in (*t.argv, *(v for _, v in t.env))):
        raise MissingValue(
            matrix.root / "hardware.yaml",
            f"hardware.{cell.hardware}.accelerators_per_node",
            f"is null (to confirm) and {cell.id} ({t.role}) needs it for {{tp}}",
        )
    return ""


def parallel_accelerators(card: ModelCard, cell: Cell) -> int | None:
    """The accelerators a cell uses by its mode's `parallel` sizes (tp x dp x pp), what its
    per-accelerator figures divide by; None where the mode states none (every one of its hosts)."""
    return parallel_size(card.raw["modes"][cell.mode].get("parallel"))


def _parallel(card: ModelCard, cell: Cell) -> dict[str, str]:
    """`{dp}`, `{ep}`, `{pp}` where the mode states them (`parallel:`)."""
    sizes = card.raw["modes"][cell.mode].get("parallel") or {}
    return {k: str(v) for k, v in sizes.items() if k != "tp"}


def _container(matrix: Matrix, cell: Cell, host: Host, env_names: list[str], name: str) -> tuple[str, ...]:
    """The `docker run` prefix when the host runs its engines in a container, else nothing."""
    if host.container in ("none", container.PYXIS):
        return ()
    card = matrix.card(cell)
    try:
        return container.wrap(
            host.container,
            vendor=matrix.hardware[cell.hardware].vendor,
            accelerators=host.accelerators,
            image=container.image_of(card, cell.hardware),
            env_names=env_names,
            model_root=host.var.get("model_root"),
            name=f"dayzero-{name}",
        )
    except ValueError as exc:
        raise ConfigError(
            matrix.root / "hardware.yaml", f"hardware.{cell.hardware}.vendor", str(exc)
        ) from None


def _step(matrix: Matrix, cell: Cell, host: Host) -> tuple[str, ...]:
    """The srun flags of a role's step on a Slurm node that runs its engines with pyxis, else none:
    the kind's image, else the card's, with the model root and the workdir mounted."""
    if host.container != container.PYXIS:
        return ()
    image = host.container_image or container.image_of(matrix.card(cell), cell.hardware)
    return container.pyxis_flags(image, [host.var.get("model_root", ""), host.workdir])


def render(
    matrix: Matrix,
    cell: Cell,
    hosts: Sequence[Host],
    port_offset: int = 0,
    geometry: Mapping[str, float | None] | None = None,
) -> Recipe:
    """Fill the cell's templates with concrete hosts (in role order; colocated roles share).
    A server role whose mode pins no `--mamba-full-memory-ratio` gets the cookbook's computed one
    when the Mamba geometry (`geometry`, else the card's `mamba_ratio`) states every input."""
    card = matrix.card(cell)
    geometry = card.mamba_ratio if geometry is None else geometry
    temps = templates(card, cell)
    need = sum(t.nodes for t in temps if not t.colocate)
    if len(hosts) != need:
        raise ValueError(f"{cell.id} needs {need} host(s), got {len(hosts)}")
    placed: dict[str, list[Host]] = {}
    cursor = 0
    for t in temps:
        if not t.colocate:
            placed[t.role] = list(hosts[cursor : cursor + t.nodes])
            cursor += t.nodes
    for t in temps:
        if t.colocate:
            placed[t.role] = placed[t.colocate][:1]
    shared = _secrets(temps, card)
    for t in temps:
        shared[f"role.{t.role}.host"] = placed[t.role][0].address
        shared[f"role.{t.role}.port"] = str(t.port + port_offset)
    launches = []
    for t in temps:
        role_hosts = placed[t.role]
        worker_port = t.worker_port + port_offset
        peers = ",".join(f"{h.address}:{worker_port}" for h in role_hosts[1:]) if t.worker_argv else ""
        for rank, host in enumerate(role_hosts):
            worker = bool(rank and t.worker_argv)
            port = worker_port if worker else t.port + port_offset
            values = {
                **shared,
                **_vars(card, cell),  # the card's and its hardware entry's defaults; the host's own vars win
                **host.var,
                "host": host.address,
                "port": str(port),
                "rank": str(rank),
                "nnodes": str(len(role_hosts)),
                "dist_init_addr": f"{role_hosts[0].address}:{DIST_INIT_PORT + port_offset}",
                "peers": peers,
                **_parallel(card, cell),
                "tp": _tp(matrix, cell, t, role_hosts),
            }
            values["bind"] = _substitute(card.engine.bind, values, "engine.bind", card)
            values["weights"] = _substitute(card.weights or "", values, "weights", card)
            where = "engine.worker" if worker else f"modes.{cell.mode} ({t.role})"
            argv = t.worker_argv if worker else t.argv
            env = tuple((k, _substitute(v, values, where, card)) for k, v in t.env)
            launches.append(
                Launch(
                    role=t.role,
                    rank=rank,
                    host=host.name,
                    address=host.address,
                    port=port,
                    argv=mamba.written([_substitute(a, values, where, card) for a in argv], geometry),
                    env=env,
                    endpoint=t.endpoint and rank == 0,
                    ready=TCP if worker else (ALIVE if rank else HTTP),
                    health=t.health,
                    container=_container(
                        matrix, cell, host, [k for k, _ in env], f"{t.role}-{rank}-{values['port']}"
                    ),
                    step=_step(matrix, cell, host),
                )
            )
    return Recipe(cell.id, digest(card, cell), tuple(launches))
