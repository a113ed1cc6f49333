"""What fits where: one rank's weights and cache against the memory the engine may use there.

From a card's `architecture:` section (or a config.json read by `hfconfig`), sized by `sizing`:
weights at each precision with the parts it keeps wide, KV per token (sliding-window layers
capped at the window), recurrent state per sequence (Mamba-1, Mamba-2, KDA), all per rank under
the layout (TP shards heads, experts and vocabulary; an MLA latent is held whole by every rank).
The cache types come from the engine's own flags in the recipe's command (`Engine.memory`).
Usable memory is the device's real capacity (the catalogue's `capacity_mib`, else its nominal
`memory_gb`) times a Mac's GPU working set, less the engine's default reserve (vLLM's
`--gpu-memory-utilization`, SGLang's own formula); each verdict states the headroom left.
A field the card leaves null is never guessed: the answer says "needs data" and names it.
Sizes are in GB (1e9 bytes), as accelerator memory is sold.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from dayzero.engines.memory import EngineMemory
from dayzero.errors import DayzeroError
from dayzero.spec.cachetypes import STATE_KINDS, cache_dtypes, engine_memory, mamba_geometry
from dayzero.spec.card import ModelCard
from dayzero.spec.sizing import (
    DTYPE_BYTES,
    PRECISIONS,
    Architecture,
    Cache,
    CacheDtypes,
    Layers,
    Layout,
    Precision,
    cache,
    from_card,
    weights_bytes,
)

__all__ = [
    "DTYPE_BYTES",
    "PRECISIONS",
    "Cache",
    "CacheDtypes",
    "Layers",
    "Layout",
    "cache",
    "cache_dtypes",
    "engine_memory",
    "mamba_geometry",
    "weights_bytes",
]
GB = 1e9
MIB = 2**20


def architecture(card: ModelCard) -> Architecture | None:
    data = card.raw.get("architecture")
    return from_card(data) if data else None


def precision(name: str) -> Precision:
    if name not in PRECISIONS:
        raise DayzeroError(f"--precision: expected one of {', '.join(PRECISIONS)}, got {name!r}")
    return PRECISIONS[name]


def card_precisions(card: ModelCard) -> list[str]:
    """The precisions the card's weight files are stored at (`model_files[].precision`)."""
    return [f.precision for f in card.model_files if f.role == "weights" and f.precision]


def parse_memory(text: str) -> float:
    """`64GB`, `64 GiB`, `1.5TB`, `512MiB` -> bytes."""
    m = re.fullmatch(r"\s*([0-9.]+)\s*([KMGT]i?B)\s*", text, re.IGNORECASE)
    if not m:
        raise DayzeroError(f"--memory: expected a size such as 64GB or 96GiB, got {text!r}")
    unit = m.group(2).upper()
    power = "KMGT".index(unit[0]) + 1
    return float(m.group(1)) * ((1024 if "I" in unit else 1000) ** power)


@dataclass(frozen=True)
class Target:
    """Accelerators to fit into: a hardware kind's (the card's nodes of it, or `--on 8xh200`) or a
    machine's; `capacity` is one accelerator's bytes, `working_set` the share its GPU may map."""

    name: str
    capacity: float | None  # bytes per accelerator; None: not known (`missing` says which field)
    accelerators: int
    describe: str
    missing: str = ""
    working_set: float = 1.0
    per_node: int | None = None  # a kind's accelerators per node: nodes needed are counted
    layout: Layout | None = None  # None: TP over every accelerator

    @property
    def parallel(self) -> Layout:
        return self.layout or Layout(tp=self.accelerators)


def usable(t: Target, memory: EngineMemory, argv: Sequence[str]) -> tuple[float | None, str]:
    """Bytes one rank may give weights and cache, and how that was reached."""
    if t.capacity is None:
        return None, ""
    mapped = t.capacity * t.working_set
    said = f"{t.capacity / GB:.4g} GB"
    if t.working_set < 1:
        said += f" x {t.working_set:g} GPU working set"
    share = memory.share_of(argv)
    if share is not None:
        return mapped * share, said + f" x {share:g} engine share"
    if memory.reserve_mib:
        held = memory.reserve_mib(t.parallel.tp) * MIB
        return mapped - held, said + f" - {held / GB:.3g} GB engine reserve"
    return mapped, said


def kind_target(kind: str, hw, count: int | None = None, memory: float | None = None) -> Target:
    """A kind of the catalogue: `count` accelerators (default: one node's) of its real capacity."""
    per_node = hw.accelerators_per_node
    count = count or per_node or 1
    capacity = memory or (
        hw.capacity_mib * MIB if hw.capacity_mib else hw.memory_gb * GB if hw.memory_gb else None
    )
    missing = "" if capacity else f"matrix/hardware.yaml hardware.{kind}.memory_gb"
    where = "reported" if hw.capacity_mib and not memory else "given" if memory else "nominal"
    describe = f"{count} x {kind}" + (f" ({capacity / GB:.4g} GB each, {where})" if capacity else "")
    return Target(kind, capacity, count, describe, missing, hw.working_set or 1.0)


def kind_targets(card: ModelCard, hardware: Mapping) -> list[Target]:
    """Each hardware kind of the card, over the accelerators of the nodes it places a replica on."""
    out = []
    for kind, placement in card.hardware.items():
        hw = hardware[kind]
        if hw.accelerators_per_node is None:
            missing = f"matrix/hardware.yaml hardware.{kind}.accelerators_per_node"
            out.append(Target(kind, None, 1, f"{kind} ({placement.nodes} node(s))", missing))
            continue
        got = kind_target(kind, hw, placement.nodes * hw.accelerators_per_node)
        out.append(replace(got, per_node=hw.accelerators_per_node))  # nodes needed are counted
    return out


def parse_on(text: str, hardware: Mapping) -> Target:
    """`--on`: `h100` (one), `8xh200`, `mac=64GB` (a kind whose memory varies by machine)."""
    m = re.fullmatch(r"(?:(\d+)x)?([a-z][a-z0-9_]*)(?:=(.+))?", text.strip())
    if not m or m[2] not in hardware:
        known = ", ".join(sorted(hardware))
        raise DayzeroError(f"--on: expected [COUNTx]KIND[=MEMORY] with KIND one of {known}, got {text!r}")
    memory = parse_memory(m[3]) if m[3] else None
    return kind_target(m[2], hardware[m[2]], int(m[1] or 1), memory)


@dataclass(frozen=True)
class Verdict:
    target: str
    precision: str
    context: int
    concurrency: int
    layout: str
    weights: float  # one rank's
    cache: float | None  # one rank's
    usable: float | None  # one rank's
    word: str  # fits | weights only | does not fit | needs data
    nodes_needed: int | None = None

    @property
    def headroom(self) -> float | None:
        if self.usable is None or self.cache is None:
            return None
        return self.usable - self.weights - self.cache

    def short(self) -> str:
        w = f"{self.weights / GB:.4g} GB"
        if self.usable is None:
            return f"{self.precision} {w}: needs data"
        u = f"{self.usable / GB:.4g} GB"
        if self.word == "does not fit":
            times = f"{self.weights / self.usable:.3g}x"
            return f"{self.precision} no: weights {w} a rank = {times} its usable {u}"
        if self.cache is None:
            return f"{self.precision} weights fit ({w} of {u} a rank), cache needs data"
        need, left = f"{(self.weights + self.cache) / GB:.4g} of {u} a rank", self.headroom
        if self.word == "weights only":
            return f"{self.precision} weights fit, cache does not ({need}, {-left / GB:.3g} GB short)"
        return f"{self.precision} fits ({need}, headroom {left / GB:.3g} GB, {left / self.usable:.0%})"

    def to_json(self) -> dict:
        return {**self.__dict__, "headroom": self.headroom}


def judge(
    target: Target,
    p: Precision,
    arch: Architecture,
    dtypes: CacheDtypes,
    context: int,
    concurrency: int,
    room: float | None,
) -> Verdict:
    layout = target.parallel
    weights = weights_bytes(arch, p, layout)
    cache_b = cache(arch, dtypes, layout).bytes(context, concurrency)
    need = weights + (cache_b or 0.0)
    if room is None:
        word = "needs data"
    elif weights > room:
        word = "does not fit"
    elif cache_b is None:
        word = "needs data"
    else:
        word = "fits" if need <= room else "weights only"
    nodes = None
    if target.per_node and target.capacity and room:
        share = room / target.capacity  # the same share of each accelerator, at any TP
        for n in range(1, 65):
            wide = Layout(tp=n * target.per_node)
            c = cache(arch, dtypes, wide).bytes(context, concurrency) or 0.0
            if weights_bytes(arch, p, wide) + c <= target.capacity * share:
                nodes = n
                break
    return Verdict(
        target.name, p.name, context, concurrency, str(layout), weights, cache_b, room, word, nodes
    )


@dataclass(frozen=True)
class Fit:
    model: str
    arch: Architecture
    precisions: tuple[Precision, ...]
    own: tuple[str, ...]  # the card's own
    dtypes: CacheDtypes
    cache: Cache  # one sequence's, unsplit (TP1)
    contexts: tuple[int, ...]
    concurrency: int
    targets: tuple[Target, ...]
    verdicts: tuple[Verdict, ...]
    usable_said: Mapping[str, str]  # by target: how its usable memory was reached
    engine_said: str = ""


def default_contexts(arch: Architecture) -> tuple[int, ...]:
    top = arch.context_length or 8192
    return tuple(sorted({c for c in (8192, 131072) if c < top} | {top}))


def plan_arch(
    model: str,
    arch: Architecture,
    targets: Sequence[Target],
    *,
    memory: EngineMemory | None = None,
    argv: Sequence[str] = (),
    precisions: Iterable[str] = (),
    own: Sequence[str] = (),
    contexts: Iterable[int] = (),
    concurrency: int = 1,
) -> Fit:
    """Every asked-for precision (else the card's own and the common community ones) against
    each target at each context."""
    memory = memory or EngineMemory()
    names = list(dict.fromkeys(precisions)) or list(
        dict.fromkeys([*own, *(n for n, p in PRECISIONS.items() if p.community)])
    )
    chosen = tuple(precision(n) for n in names)
    dtypes = cache_dtypes(argv, memory, arch.dtype)
    ctxs = tuple(contexts) or default_contexts(arch)
    rooms = {t.name + t.describe: usable(t, memory, argv) for t in targets}
    verdicts = tuple(
        judge(t, p, arch, dtypes, x, concurrency, rooms[t.name + t.describe][0])
        for t in targets
        for p in chosen
        for x in ctxs
    )
    said = {k: v[1] for k, v in rooms.items()}
    c = cache(arch, dtypes)
    return Fit(
        model,
        arch,
        chosen,
        tuple(own),
        dtypes,
        c,
        ctxs,
        concurrency,
        tuple(targets),
        verdicts,
        said,
        memory.source,
    )


def plan(
    card: ModelCard,
    hardware: Mapping,
    *,
    precisions: Iterable[str] = (),
    contexts: Iterable[int] = (),
    concurrency: int = 1,
    memory: float | None = None,
    kinds: Iterable[str] | None = None,
    on: Sequence[Target] = (),
    layout: Layout | None = None,
) -> Fit | None:
    """The card's architecture against its kinds (or `on`), with its recipe's cache flags;
    None where the card has no architecture section."""
    arch = architecture(card)
    if arch is None:
        return None
    targets = list(on) or [t for t in kind_targets(card, hardware) if kinds is None or t.name in kinds]
    if memory is not None:
        targets.insert(0, Target("machine", memory, 1, f"a {memory / GB:.4g} GB machine"))
    if layout is not None:
        targets = [replace(t, layout=layout) for t in targets]
    return plan_arch(
        card.model,
        arch,
        targets,
        memory=engine_memory(card.engine.name),
        argv=card.raw.get("recipe", {}).get("command", ()),
        precisions=precisions,
        own=card_precisions(card),
        contexts=contexts,
        concurrency=concurrency,
    )


def weights_lines(fit: Fit) -> list[str]:
    out = []
    for p in fit.precisions:
        whose = "the card's" if p.name in fit.own else "community GGUF" if p.community else "asked for"
        size = weights_bytes(fit.arch, p) / GB
        keeps = "; experts only, the rest bf16" if p.experts_only else ""
        if not keeps and p.wide and fit.arch.embedding_parameters:
            keeps = f"; embedding and head at {p.wide}"
        out.append(f"weights at {p.name} ({p.bits:g} bits): {size:.4g} GB ({whose}){keeps}")
    return out


def cache_lines(fit: Fit) -> list[str]:
    c = fit.cache
    said = fit.dtypes.said
    if not any(g.kind in STATE_KINDS for g in fit.arch.layers):
        said = said.split("; conv")[0]
    head = f"cache ({said}, as the recipe sets)"
    if c.missing:
        return [f"{head}: needs data: {', '.join(c.missing)}"]
    per = f"{c.per_token:g} B per token"
    per += "".join(f" + {b:g} B per token up to {w}" for b, w in c.windowed)
    per += f" + {c.per_sequence:g} B per sequence" if c.per_sequence else ""
    sizes = ", ".join(
        f"{c.bytes(x, fit.concurrency) / GB:.4g} GB at {x} tokens x {fit.concurrency}" for x in fit.contexts
    )
    return [f"{head}: {per} (whole model, TP1); {sizes}"]


def target_lines(fit: Fit) -> list[str]:
    out = []
    for t in fit.targets:
        if t.capacity is None:
            out.append(f"{t.describe}: needs data: {t.missing}")
            continue
        for x in fit.contexts:
            got = [v for v in fit.verdicts if v.target == t.name and v.context == x]
            at = f" at {x} tokens x {fit.concurrency}" if not fit.cache.missing else ""
            need = ""
            if t.per_node:
                what = "weights alone" if fit.cache.missing else "weights and cache"
                counts = ", ".join(f"{v.precision} {v.nodes_needed or 'none up to 64'}" for v in got)
                need = f"; nodes of {t.name} for the {what}: {counts}"
            room = fit.usable_said[t.name + t.describe]
            head = f"{t.describe}, {t.parallel}, usable a rank {room}"
            out.append(f"{head}{at}: " + "; ".join(v.short() for v in got) + need)
            if fit.cache.missing:
                break  # the same line at every context
    return out


def lines(fit: Fit) -> list[str]:
    a = fit.arch
    groups = ", ".join(
        f"{g.count} {g.kind}" + (f" (window {w})" if (w := g.dims.get("sliding_window")) else "")
        for g in a.layers
    )
    head = f"{fit.model}: {a.parameters:.4g} parameters" + (f", layers: {groups}" if groups else "")
    return [f"{head} ({a.source})", *weights_lines(fit), *cache_lines(fit), *target_lines(fit)]


def to_json(fit: Fit) -> dict:
    c = fit.cache
    return {
        "model": fit.model,
        "parameters": fit.arch.parameters,
        "source": fit.arch.source,
        "weights": {p.name: {"bits": p.bits, "bytes": weights_bytes(fit.arch, p)} for p in fit.precisions},
        "own": list(fit.own),
        "cache": {
            "dtypes": fit.dtypes.said,
            "bytes_per_token": None if c.missing else c.per_token,
            "bytes_per_token_windowed": [list(w) for w in c.windowed],
            "bytes_per_sequence": None if c.missing else c.per_sequence,
            "needs_data": list(c.missing),
        },
        "contexts": list(fit.contexts),
        "concurrency": fit.concurrency,
        "targets": [
            {
                "name": t.name,
                "accelerators": t.accelerators,
                "layout": str(t.parallel),
                "capacity": t.capacity,
                "usable": fit.usable_said.get(t.name + t.describe),
                "describe": t.describe,
                "needs_data": t.missing,
            }
            for t in fit.targets
        ],
        "engine_memory": fit.engine_said,
        "verdicts": [v.to_json() for v in fit.verdicts],
    }
