"""Bytes a model holds on one rank: weights at a precision, KV cache per token, state per sequence.

Pure arithmetic on an `Architecture` (a card's `architecture:` section, or one read from a
Hugging Face config.json by `dayzero.spec.hfconfig`) under a parallel `Layout`. What a
quantization keeps wide (embeddings and output head in bf16, or all but the experts) and what
every tensor-parallel rank holds whole (an MLA latent, the KV heads when there are fewer than
ranks, the MLA down-projections and routers) are stated here once, with where they were read.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

GGML = "ggml-common.h block layouts (bytes per block / weights per block x 8)"
MX = "OCP Microscaling Formats (MX) v1.0: 32 elements share one 8-bit E8M0 scale"
WIDE = "embedding and output head kept in bf16"


@dataclass(frozen=True)
class Precision:
    """Bits per weight as stored; the embedding and output head's type where it keeps them wider
    (`wide`: a precision name, or GGUF_HEAD); `experts_only`: a MoE's experts alone are quantized
    (attention, dense and shared layers stay bf16), as gpt-oss's MXFP4 checkpoint."""

    name: str
    bits: float
    wide: str | None
    source: str
    community: bool = False  # a common community quantization, listed by default
    experts_only: bool = False


# llama.cpp's quantizer (src/llama-quant.cpp, llama_tensor_get_type) keeps the output head (or a
# tied token embedding) at Q6_K, or at Q8_0 where the row length is no multiple of 256 (QK_K),
# and an untied token embedding at the base type: SmolLM2's Q4_1 GGUF holds token_embd at Q8_0.
GGUF_HEAD = "gguf"
PRECISIONS: dict[str, Precision] = {
    p.name: p
    for p in (
        Precision("bf16", 16.0, None, "2 bytes a weight"),
        Precision("fp8", 8.0, "bf16", f"1 byte a weight; {WIDE} (DeepSeek-V3, llm-compressor FP8)"),
        Precision("int4", 4.125, "bf16", f"w4a16, a bf16 scale per 128 weights; {WIDE} (AWQ, GPTQ)"),
        Precision("mxfp8", 8.25, "bf16", f"{MX}; {WIDE}"),
        Precision("mxfp4", 4.25, "bf16", f"{MX}; experts only, the rest bf16 (gpt-oss)", experts_only=True),
        Precision("q8_0", 8.5, None, GGML + ": block_q8_0 34 B / 32"),
        Precision("q4_1", 5.0, GGUF_HEAD, GGML + ": block_q4_1 20 B / 32"),
        Precision("q4_0", 4.5, GGUF_HEAD, GGML + ": block_q4_0 18 B / 32"),
        Precision("q6_k", 6.5625, None, GGML + ": block_q6_K 210 B / 256"),
        Precision("q4_k", 4.5, GGUF_HEAD, GGML + ": block_q4_K 144 B / 256", True),
        Precision("q3_k", 3.4375, GGUF_HEAD, GGML + ": block_q3_K 110 B / 256", True),
        Precision("q2_k", 2.625, GGUF_HEAD, GGML + ": block_q2_K 84 B / 256", True),
    )
}
# Cache element sizes by the names engines give them (SGLang and vLLM's --kv-cache-dtype and
# Mamba dtypes, llama.cpp's -ctk/-ctv types with their block sizes); "auto" is the model's dtype.
DTYPE_BYTES = {
    "bf16": 2.0,
    "bfloat16": 2.0,
    "f16": 2.0,
    "float16": 2.0,
    "fp16": 2.0,
    "f32": 4.0,
    "float32": 4.0,
    "fp8": 1.0,
    "fp8_e4m3": 1.0,
    "fp8_e5m2": 1.0,
    "fp8_inc": 1.0,
    "fp4_e2m1": 0.5,
    "q8_0": 34 / 32,
    "q5_1": 24 / 32,
    "q5_0": 22 / 32,
    "q4_1": 20 / 32,
    "q4_0": 18 / 32,
    "iq4_nl": 18 / 32,
}
# Per layer kind: the fields its cache needs (all of them, or "needs data"); optional ones after.
LAYER_FIELDS = {
    "attention": ("kv_heads", "head_dim"),
    "mla": ("kv_lora_rank", "qk_rope_head_dim"),
    "dsa": ("kv_lora_rank", "qk_rope_head_dim", "index_head_dim"),
    "kda": ("heads", "head_dim", "conv_kernel"),
    "mamba": ("d_inner", "d_state", "conv_kernel"),
    "mamba2": ("heads", "head_dim", "d_state", "groups", "conv_kernel"),
}
OPTIONAL_FIELDS = {"attention": ("sliding_window",)}
REPLICATED_LATENT = ("mla", "dsa")  # one latent per token, held whole by every TP rank


@dataclass(frozen=True)
class Layers:
    kind: str
    count: int
    dims: Mapping[str, int | None] = field(default_factory=dict)


@dataclass(frozen=True)
class Architecture:
    """Parameter counts by part (what quantizations and TP treat differently) and layer groups."""

    source: str
    parameters: float
    embedding_parameters: float | None = None  # the token embedding (vocab x hidden)
    hidden_size: int | None = None
    context_length: int | None = None
    layers: tuple[Layers, ...] = ()
    tied: bool = True  # the output head is the token embedding
    expert_parameters: float = 0.0  # routed experts: what experts-only quantizations quantize
    replicated_parameters: float = 0.0  # held whole by every TP rank (MLA down-projections, routers)
    dtype: str = "bfloat16"  # the checkpoint's: an engine's "auto" cache type

    @property
    def head_parameters(self) -> float:
        return 0.0 if self.tied else (self.embedding_parameters or 0.0)


@dataclass(frozen=True)
class Layout:
    """Ranks a replica is split over: tensor, expert (experts divided by it instead of TP) and
    pipeline parallel (layers divided)."""

    tp: int = 1
    ep: int = 1
    pp: int = 1

    def __str__(self) -> str:
        parts = [f"TP{self.tp}"] + [f"{k.upper()}{v}" for k, v in (("ep", self.ep), ("pp", self.pp)) if v > 1]
        return " ".join(parts)

    @property
    def ranks(self) -> int:
        return self.tp * self.pp * (1 if self.ep <= self.tp else self.ep // self.tp)


def _bits(name: str | None, arch: Architecture, p: Precision) -> float:
    if name is None:
        return p.bits
    if name == GGUF_HEAD:
        return PRECISIONS["q8_0" if (arch.hidden_size or 0) % 256 else "q6_k"].bits
    return PRECISIONS[name].bits


@dataclass(frozen=True)
class WeightParts:
    """Bytes per part at a precision, whole model (`per_rank` divides them under a layout)."""

    embedding: float
    head: float
    experts: float
    replicated: float
    rest: float

    @property
    def total(self) -> float:
        return self.embedding + self.head + self.experts + self.replicated + self.rest

    def per_rank(self, layout: Layout) -> float:
        """Vocabulary-parallel embedding and head, experts over EP (else TP), the rest over TP;
        replicated parts whole; every part over the pipeline's stages."""
        experts = self.experts / (layout.ep if layout.ep > 1 else layout.tp)
        sharded = (self.embedding + self.head + self.rest) / layout.tp
        return (sharded + experts + self.replicated) / layout.pp


def weight_parts(arch: Architecture, p: Precision) -> WeightParts:
    embedding = arch.embedding_parameters or 0.0
    head = arch.head_parameters
    experts = arch.expert_parameters
    rest = arch.parameters - embedding - head - experts - arch.replicated_parameters
    wide = _bits(p.wide, arch, p) if p.wide else p.bits
    # GGUF: an untied token embedding at the base type, the head (or the tied embedding) wider.
    embed_bits = p.bits if p.wide == GGUF_HEAD and not arch.tied else wide
    body = 16.0 if p.experts_only and experts else p.bits
    return WeightParts(
        embedding * embed_bits / 8,
        head * wide / 8,
        experts * p.bits / 8,
        arch.replicated_parameters * body / 8,
        rest * body / 8,
    )


def weights_bytes(arch: Architecture, p: Precision, layout: Layout = Layout()) -> float:
    return weight_parts(arch, p).per_rank(layout)


@dataclass(frozen=True)
class CacheDtypes:
    """Bytes per element of K, V, a Mamba layer's convolution window and its recurrent state."""

    k: float
    v: float
    conv: float
    ssm: float
    said: str  # where they come from, for the reader

    @property
    def kv_bytes(self) -> float:
        return (self.k + self.v) / 2

    @property
    def state_bytes(self) -> float:
        return self.ssm


def dtype_bytes(name: str, model_dtype: str) -> float:
    return DTYPE_BYTES.get(model_dtype if name == "auto" else name, 2.0)


@dataclass(frozen=True)
class Cache:
    """Bytes per token (full-attention KV), per token up to a window (sliding-window layers) and
    per sequence (recurrent state), on one rank; or the fields missing to know them."""

    per_token: float
    per_sequence: float
    missing: tuple[str, ...] = ()
    windowed: tuple[tuple[float, int], ...] = ()  # (bytes per token, window)

    def per_sequence_at(self, context: int) -> float | None:
        if self.missing:
            return None
        windows = sum(b * min(context, w) for b, w in self.windowed)
        return context * self.per_token + windows + self.per_sequence

    def bytes(self, context: int, concurrency: int) -> float | None:
        one = self.per_sequence_at(context)
        return None if one is None else concurrency * one


def _shard(n: int, tp: int) -> float:
    """Heads (or groups) one rank holds: split over TP, each rank at least one (replicated)."""
    return max(1, math.ceil(n / tp))


def cache(arch: Architecture, dtypes: CacheDtypes, layout: Layout = Layout()) -> Cache:
    per_token = per_sequence = 0.0
    windowed: list[tuple[float, int]] = []
    missing: list[str] = []
    tp = layout.tp
    for i, g in enumerate(arch.layers):
        absent = [
            f"architecture.layers[{i}].{k} ({g.kind})" for k in LAYER_FIELDS[g.kind] if g.dims.get(k) is None
        ]
        if absent:
            missing += absent
            continue
        d, n = g.dims, g.count / layout.pp
        if g.kind == "attention":
            b = n * _shard(d["kv_heads"], tp) * d["head_dim"] * (dtypes.k + dtypes.v)
            if d.get("sliding_window"):
                windowed.append((b, int(d["sliding_window"])))
            else:
                per_token += b
        elif g.kind in REPLICATED_LATENT:
            width = d["kv_lora_rank"] + d["qk_rope_head_dim"] + d.get("index_head_dim", 0)
            per_token += n * width * dtypes.k
        elif g.kind == "kda":  # a (head_dim x head_dim) state per head, short convolutions on q, k, v
            width, window = _shard(d["heads"], tp) * d["head_dim"], d["conv_kernel"] - 1
            per_sequence += n * (width * d["head_dim"] * dtypes.ssm + 3 * width * window * dtypes.conv)
        elif g.kind == "mamba":  # Mamba-1: conv window on x, (d_inner x d_state) SSM state
            inner, window = d["d_inner"] / tp, d["conv_kernel"] - 1
            per_sequence += n * (inner * window * dtypes.conv + inner * d["d_state"] * dtypes.ssm)
        else:  # mamba2: conv window on x, B and C; SSM state (heads x head_dim x d_state)
            heads, window = _shard(d["heads"], tp), d["conv_kernel"] - 1
            conv = (heads * d["head_dim"] + 2 * _shard(d["groups"], tp) * d["d_state"]) * window
            per_sequence += n * (conv * dtypes.conv + heads * d["head_dim"] * d["d_state"] * dtypes.ssm)
    return Cache(per_token, per_sequence, tuple(missing), tuple(windowed))


def from_card(data: Mapping) -> Architecture:
    """An `architecture:` section (schema-checked) as an Architecture."""
    layers = tuple(
        Layers(
            g["kind"],
            int(g["count"]),
            {k: g.get(k) for k in (*LAYER_FIELDS[g["kind"]], *OPTIONAL_FIELDS.get(g["kind"], ()))},
        )
        for g in data.get("layers") or ()
    )
    return Architecture(
        data["source"],
        float(data["parameters"]),
        data.get("embedding_parameters"),
        data.get("hidden_size"),
        data.get("context_length"),
        layers,
        bool(data.get("tied_embeddings", True)),
        float(data.get("expert_parameters") or 0.0),
        float(data.get("replicated_parameters") or 0.0),
        data.get("dtype") or "bfloat16",
    )
