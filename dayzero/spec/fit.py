"""What fits where: a model's weights at each precision and its cache, against a machine's memory.

Pure arithmetic from the card's `architecture:` section. Weights: every parameter (a MoE holds
all its experts) at a precision's bits, the output head at the wider type quantizers keep it in.
Cache: per token for attention layers (K and V per KV head; MLA's compressed latent and rope key;
DSA's indexer key besides), per sequence for linear-attention layers (KDA's recurrent state), at
the cache dtypes the card's recipe sets. A field the card leaves null is never guessed: the
answer says "needs data" and names it. Memory is per hardware kind as the catalogue states it
(times the accelerators of the nodes the card places a replica on), or a machine given in bytes.
Sizes are in GB (1e9 bytes), as accelerator memory is sold.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from dayzero.errors import DayzeroError
from dayzero.spec.card import ModelCard

GGML = "ggml-common.h block layouts (bytes per block / weights per block x 8)"
MX = "OCP Microscaling Formats (MX) v1.0: 32 elements share one 8-bit E8M0 scale"


@dataclass(frozen=True)
class Precision:
    """Bits per weight as stored, and the type the output head is kept at (None: the same)."""

    name: str
    bits: float
    head: str | None
    source: str
    community: bool = False  # a common community quantization, listed by default


# llama.cpp's quantizer (src/llama-quant.cpp, llama_tensor_get_type) keeps the output head (or a
# tied token embedding) at Q6_K, or at Q8_0 where the row length is no multiple of 256 (QK_K):
# SmolLM2's Q4_1 GGUF holds token_embd at Q8_0 (hidden 576), read with gguf-py 0.19.
GGUF_HEAD = "gguf"
PRECISIONS: dict[str, Precision] = {
    p.name: p
    for p in (
        Precision("bf16", 16.0, None, "2 bytes a weight"),
        Precision("fp8", 8.0, "bf16", "1 byte a weight; embedding and head kept in bf16"),
        Precision("mxfp8", 8.25, "bf16", MX),
        Precision("mxfp4", 4.25, "bf16", MX),
        Precision("q8_0", 8.5, None, GGML + ": block_q8_0 34 B / 32"),
        Precision("q4_1", 5.0, GGUF_HEAD, GGML + ": block_q4_1 20 B / 32"),
        Precision("q4_0", 4.5, GGUF_HEAD, GGML + ": block_q4_0 18 B / 32"),
        Precision("q6_k", 6.5625, None, GGML + ": block_q6_K 210 B / 256"),
        Precision("q4_k", 4.5, GGUF_HEAD, GGML + ": block_q4_K 144 B / 256", True),
        Precision("q3_k", 3.4375, GGUF_HEAD, GGML + ": block_q3_K 110 B / 256", True),
        Precision("q2_k", 2.625, GGUF_HEAD, GGML + ": block_q2_K 84 B / 256", True),
    )
}
# Cache element sizes by the recipe flags that set them (SGLang --kv-cache-dtype and
# --mamba-ssm-dtype, llama.cpp --cache-type-k/-v); "auto" is the weights' dtype (bf16 here).
KV_FLAGS = ("--kv-cache-dtype", "--cache-type-k", "-ctk")
STATE_FLAGS = ("--mamba-ssm-dtype",)
DTYPE_BYTES = {
    "auto": 2.0,
    "bf16": 2.0,
    "bfloat16": 2.0,
    "f16": 2.0,
    "float16": 2.0,
    "fp16": 2.0,
    "f32": 4.0,
    "float32": 4.0,
    "fp8_e4m3": 1.0,
    "fp8_e5m2": 1.0,
    "fp8": 1.0,
    "q8_0": 34 / 32,
    "fp4_e2m1": 0.5,
}
# Per layer kind: the fields its cache needs (all of them, or "needs data").
LAYER_FIELDS = {
    "attention": ("kv_heads", "head_dim"),
    "mla": ("kv_lora_rank", "qk_rope_head_dim"),
    "dsa": ("kv_lora_rank", "qk_rope_head_dim", "index_head_dim"),
    "kda": ("heads", "head_dim", "conv_kernel"),
}
GB = 1e9


@dataclass(frozen=True)
class Layers:
    kind: str
    count: int
    dims: Mapping[str, int | None] = field(default_factory=dict)


@dataclass(frozen=True)
class Architecture:
    source: str
    parameters: float
    embedding_parameters: float | None = None
    hidden_size: int | None = None
    context_length: int | None = None
    layers: tuple[Layers, ...] = ()


@dataclass(frozen=True)
class CacheDtypes:
    kv_bytes: float
    state_bytes: float
    said: str  # where they come from, for the reader


@dataclass(frozen=True)
class Cache:
    """Bytes per token (KV) and per sequence (state), or the fields missing to know them."""

    per_token: float
    per_sequence: float
    missing: tuple[str, ...] = ()

    def bytes(self, context: int, concurrency: int) -> float | None:
        if self.missing:
            return None
        return concurrency * (context * self.per_token + self.per_sequence)


@dataclass(frozen=True)
class Target:
    """Memory to fit into: a hardware kind's (the card's nodes of it) or a machine's."""

    name: str
    memory: float | None  # bytes; None: not known (`missing` says which field)
    describe: str
    missing: str = ""
    node_memory: float | None = None  # a kind's per node, for the nodes the model needs


def architecture(card: ModelCard) -> Architecture | None:
    data = card.raw.get("architecture")
    if not data:
        return None
    layers = tuple(
        Layers(g["kind"], int(g["count"]), {k: g.get(k) for k in LAYER_FIELDS[g["kind"]]})
        for g in data.get("layers") or ()
    )
    return Architecture(
        data["source"],
        float(data["parameters"]),
        data.get("embedding_parameters"),
        data.get("hidden_size"),
        data.get("context_length"),
        layers,
    )


def precision(name: str) -> Precision:
    if name not in PRECISIONS:
        raise DayzeroError(f"--precision: expected one of {', '.join(PRECISIONS)}, got {name!r}")
    return PRECISIONS[name]


def card_precisions(card: ModelCard) -> list[str]:
    """The precisions the card's weight files are stored at (`model_files[].precision`)."""
    return [f.precision for f in card.model_files if f.role == "weights" and f.precision]


def head_bits(arch: Architecture, p: Precision) -> float:
    if p.head == GGUF_HEAD:
        return PRECISIONS["q8_0" if (arch.hidden_size or 0) % 256 else "q6_k"].bits
    return PRECISIONS[p.head].bits if p.head else p.bits


def weights_bytes(arch: Architecture, p: Precision) -> float:
    head = arch.embedding_parameters or 0.0
    return ((arch.parameters - head) * p.bits + head * head_bits(arch, p)) / 8


def cache_dtypes(argv: Sequence[str]) -> CacheDtypes:
    """The KV and state element sizes a recipe's command sets (the last value wins, as argparse)."""
    found: dict[str, str] = {}
    for k, token in enumerate(argv[:-1]):
        for which, flags in (("kv", KV_FLAGS), ("state", STATE_FLAGS)):
            if token in flags:
                found[which] = argv[k + 1]
    kv, state = found.get("kv", "auto"), found.get("state", "float32" if "kv" in found else "auto")
    kv_b, state_b = DTYPE_BYTES.get(kv, 2.0), DTYPE_BYTES.get(state, 4.0)
    said = f"KV {kv}: {kv_b:g} B" + (f", state {state}: {state_b:g} B" if "state" in found else "")
    return CacheDtypes(kv_b, state_b, said)


def cache(arch: Architecture, dtypes: CacheDtypes) -> Cache:
    per_token = per_sequence = 0.0
    missing = []
    for i, g in enumerate(arch.layers):
        absent = [f"architecture.layers[{i}].{k} ({g.kind})" for k, v in g.dims.items() if v is None]
        if absent:
            missing += absent
            continue
        d = g.dims
        if g.kind == "attention":
            per_token += g.count * 2 * d["kv_heads"] * d["head_dim"] * dtypes.kv_bytes
        elif g.kind in ("mla", "dsa"):
            width = d["kv_lora_rank"] + d["qk_rope_head_dim"] + d.get("index_head_dim", 0)
            per_token += g.count * width * dtypes.kv_bytes
        else:  # kda: a (head_dim x head_dim) state per head, and the short convolutions' window on q, k, v
            width = d["heads"] * d["head_dim"]
            elements = width * d["head_dim"] + 3 * width * (d["conv_kernel"] - 1)
            per_sequence += g.count * elements * dtypes.state_bytes
    return Cache(per_token, per_sequence, tuple(missing))


def parse_memory(text: str) -> float:
    """`64GB`, `64 GiB`, `1.5TB`, `512MiB` -> bytes."""
    m = re.fullmatch(r"\s*([0-9.]+)\s*([KMGT]i?B)\s*", text, re.IGNORECASE)
    if not m:
        raise DayzeroError(f"--memory: expected a size such as 64GB or 96GiB, got {text!r}")
    unit = m.group(2).upper()
    power = "KMGT".index(unit[0]) + 1
    return float(m.group(1)) * ((1024 if "I" in unit else 1000) ** power)


def kind_targets(card: ModelCard, hardware: Mapping) -> list[Target]:
    """Each hardware kind of the card, with the memory of the nodes the card places a replica on."""
    out = []
    for kind, placement in card.hardware.items():
        hw = hardware[kind]
        if hw.memory_gb is None or hw.accelerators_per_node is None:
            field_name = "memory_gb" if hw.memory_gb is None else "accelerators_per_node"
            missing = f"matrix/hardware.yaml hardware.{kind}.{field_name}"
            out.append(Target(kind, None, f"{kind} ({placement.nodes} node(s))", missing))
            continue
        node = hw.memory_gb * GB * hw.accelerators_per_node
        describe = (
            f"{kind} ({placement.nodes} node(s) x {hw.accelerators_per_node} x {hw.memory_gb:g} GB"
            f" = {placement.nodes * node / GB:g} GB)"
        )
        out.append(Target(kind, placement.nodes * node, describe, node_memory=node))
    return out


@dataclass(frozen=True)
class Verdict:
    target: str
    precision: str
    context: int
    concurrency: int
    weights: float
    cache: float | None
    memory: float | None
    word: str  # fits | weights only | does not fit | needs data
    nodes_needed: int | None = None

    def short(self) -> str:
        w = f"{self.weights / GB:.4g} GB"
        if self.memory is None:
            return f"{self.precision} {w}: needs data"
        times = f"{self.weights / self.memory:.3g}x its memory"
        if self.word == "does not fit":
            return f"{self.precision} no: weights {w} = {times}"
        total = f"{(self.weights + (self.cache or 0)) / GB:.4g} of {self.memory / GB:.4g} GB"
        if self.cache is None:
            return f"{self.precision} weights fit ({w} of {self.memory / GB:.4g} GB), cache needs data"
        if self.word == "weights only":
            return f"{self.precision} weights fit, cache does not ({total})"
        return f"{self.precision} fits ({total})"

    def to_json(self) -> dict:
        return {k: v for k, v in self.__dict__.items()}


def judge(
    target: Target, p: Precision, arch: Architecture, c: Cache, context: int, concurrency: int
) -> Verdict:
    weights = weights_bytes(arch, p)
    cache_b = c.bytes(context, concurrency)
    need = weights + (cache_b or 0.0)
    nodes = math.ceil(need / target.node_memory) if target.node_memory else None
    if target.memory is None:
        word = "needs data"
    elif weights > target.memory:
        word = "does not fit"
    elif cache_b is None:
        word = "needs data"
    else:
        word = "fits" if need <= target.memory else "weights only"
    return Verdict(target.name, p.name, context, concurrency, weights, cache_b, target.memory, word, nodes)


@dataclass(frozen=True)
class Fit:
    model: str
    arch: Architecture
    precisions: tuple[Precision, ...]
    own: tuple[str, ...]  # the card's own
    dtypes: CacheDtypes
    cache: Cache
    contexts: tuple[int, ...]
    concurrency: int
    targets: tuple[Target, ...]
    verdicts: tuple[Verdict, ...]


def default_contexts(arch: Architecture) -> tuple[int, ...]:
    top = arch.context_length or 8192
    return tuple(sorted({c for c in (8192, 131072) if c < top} | {top}))


def plan(
    card: ModelCard,
    hardware: Mapping,
    *,
    precisions: Iterable[str] = (),
    contexts: Iterable[int] = (),
    concurrency: int = 1,
    memory: float | None = None,
    kinds: Iterable[str] | None = None,
) -> Fit | None:
    """Every asked-for precision (else the card's own and the common community ones) against each
    target at each context; None where the card has no architecture section."""
    arch = architecture(card)
    if arch is None:
        return None
    own = card_precisions(card)
    names = list(dict.fromkeys(precisions)) or list(
        dict.fromkeys([*own, *(n for n, p in PRECISIONS.items() if p.community)])
    )
    chosen = tuple(precision(n) for n in names)
    dtypes = cache_dtypes(card.raw.get("recipe", {}).get("command", ()))
    c = cache(arch, dtypes)
    ctxs = tuple(contexts) or default_contexts(arch)
    targets = [t for t in kind_targets(card, hardware) if kinds is None or t.name in kinds]
    if memory is not None:
        targets.insert(0, Target("machine", memory, f"a {memory / GB:.4g} GB machine"))
    verdicts = tuple(judge(t, p, arch, c, x, concurrency) for t in targets for p in chosen for x in ctxs)
    return Fit(card.model, arch, chosen, tuple(own), dtypes, c, ctxs, concurrency, tuple(targets), verdicts)


def weights_lines(fit: Fit) -> list[str]:
    out = []
    for p in fit.precisions:
        whose = "the card's" if p.name in fit.own else "community GGUF" if p.community else "asked for"
        out.append(
            f"weights at {p.name} ({p.bits:g} bits): {weights_bytes(fit.arch, p) / GB:.4g} GB ({whose})"
        )
    return out


def cache_lines(fit: Fit) -> list[str]:
    c = fit.cache
    head = f"cache ({fit.dtypes.said}, as the recipe sets)"
    if c.missing:
        return [f"{head}: needs data: {', '.join(c.missing)}"]
    per = f"{c.per_token:g} B per token" + (f" + {c.per_sequence:g} B per sequence" if c.per_sequence else "")
    sizes = ", ".join(
        f"{c.bytes(x, fit.concurrency) / GB:.4g} GB at {x} tokens x {fit.concurrency}" for x in fit.contexts
    )
    return [f"{head}: {per}; {sizes}"]


def target_lines(fit: Fit) -> list[str]:
    out = []
    for t in fit.targets:
        if t.memory is None:
            out.append(f"{t.describe}: needs data: {t.missing}")
            continue
        for x in fit.contexts:
            got = [v for v in fit.verdicts if v.target == t.name and v.context == x]
            at = f" at {x} tokens x {fit.concurrency}" if not fit.cache.missing else ""
            need = ""
            if t.node_memory:
                what = "weights alone" if fit.cache.missing else "weights and cache"
                counts = ", ".join(f"{v.precision} {v.nodes_needed}" for v in got)
                need = f"; nodes of {t.name} for the {what}: {counts}"
            out.append(f"{t.describe}{at}: " + "; ".join(v.short() for v in got) + need)
            if fit.cache.missing:
                break  # the same line at every context
    return out


def lines(fit: Fit) -> list[str]:
    a = fit.arch
    groups = ", ".join(f"{g.count} {g.kind}" for g in a.layers)
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
            "bytes_per_sequence": None if c.missing else c.per_sequence,
            "needs_data": list(c.missing),
        },
        "contexts": list(fit.contexts),
        "concurrency": fit.concurrency,
        "targets": [
            {"name": t.name, "memory": t.memory, "describe": t.describe, "needs_data": t.missing}
            for t in fit.targets
        ],
        "verdicts": [v.to_json() for v in fit.verdicts],
    }
