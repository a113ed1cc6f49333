"""A Hugging Face config.json as a card's `architecture:` section: parameters by part and layers.

Read from a file (no hub access at run time). Parameters are counted from the config's shapes,
as the modeling code builds them: GQA attention (with sliding windows per `layer_types`), MLA
(DeepSeek: q/kv down-projections held whole by every TP rank), dense and MoE MLPs (routed experts
apart: what experts-only quantizations quantize), Mamba-1 (Jamba) and Mamba-2 (Nemotron-H)
mixers. A family it does not know is an error naming the field it looked for, never a guess.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path

from dayzero.errors import ConfigError

# hybrid_override_pattern: M Mamba-2, * attention, - MLP, E MoE; one block a layer
NEMOTRON_BLOCKS = {
    "M": ("mamba2", "none"),
    "*": ("attention", "none"),
    "-": ("none", "dense"),
    "E": ("none", "moe"),
}


def _get(cfg: Mapping, path: Path | str, *names: str, default=None):
    for n in names:
        if cfg.get(n) is not None:
            return cfg[n]
    if default is not None:
        return default
    raise ConfigError(path, names[0], f"expected {' or '.join(names)} in the model's config.json")


def _attention(cfg: Mapping, path) -> tuple[dict, float]:
    h = cfg["hidden_size"]
    heads = _get(cfg, path, "num_attention_heads")
    kv = _get(cfg, path, "num_key_value_heads", default=heads)
    hd = cfg.get("head_dim") or h // heads
    params = h * heads * hd * 2 + h * kv * hd * 2
    if cfg.get("attention_bias"):
        params += heads * hd + 2 * kv * hd + h
    if cfg.get("model_type", "").startswith("qwen3"):
        params += 2 * hd  # q_norm, k_norm
    if cfg.get("model_type") == "gpt_oss":
        params += heads  # attention sinks
    return {"kv_heads": kv, "head_dim": hd}, params


def _mla(cfg: Mapping, path) -> tuple[dict, float, float]:
    """(dims, parameters, of which replicated): DeepSeek-V2/V3's multi-head latent attention."""
    h, heads = cfg["hidden_size"], cfg["num_attention_heads"]
    kvr, rope = _get(cfg, path, "kv_lora_rank"), _get(cfg, path, "qk_rope_head_dim")
    nope, vd, qr = cfg["qk_nope_head_dim"], cfg["v_head_dim"], cfg.get("q_lora_rank")
    q = (h * qr + qr + qr * heads * (nope + rope)) if qr else h * heads * (nope + rope)
    down = h * (kvr + rope) + kvr + ((h * qr + qr) if qr else 0)
    params = q + h * (kvr + rope) + kvr + kvr * heads * (nope + vd) + heads * vd * h
    return {"kv_lora_rank": kvr, "qk_rope_head_dim": rope}, params, down


def _mlp(cfg: Mapping, inter: int) -> float:
    gated = cfg.get("mlp_hidden_act", cfg.get("hidden_act")) != "relu2"
    return (3 if gated else 2) * cfg["hidden_size"] * inter


def _moe(cfg: Mapping, path) -> tuple[float, float, float]:
    """(routed experts, shared experts and router, of which replicated: the router)."""
    h = cfg["hidden_size"]
    n = _get(cfg, path, "n_routed_experts", "num_local_experts", "num_experts")
    inter = _get(cfg, path, "moe_intermediate_size", "intermediate_size")
    if cfg.get("model_type") == "gpt_oss":  # gate_up and down with biases
        routed = n * (h * 2 * inter + 2 * inter + inter * h + h)
        router = h * n + n
    else:
        routed = n * 3 * h * inter
        router = h * n + (n if cfg.get("topk_method") == "noaux_tc" else 0)
    shared = (cfg.get("n_shared_experts") or 0) * 3 * h * inter
    return routed, shared + router, router


def _mamba(cfg: Mapping, path) -> tuple[dict, float]:
    """Mamba-1 (Jamba): in/x/dt/out projections, the depthwise convolution, A and D."""
    h = cfg["hidden_size"]
    inner = _get(cfg, path, "mamba_expand") * h
    state, k = _get(cfg, path, "mamba_d_state"), _get(cfg, path, "mamba_d_conv")
    rank = cfg.get("mamba_dt_rank")
    rank = math.ceil(h / 16) if rank in (None, "auto") else rank
    params = (
        h * 2 * inner
        + inner * k
        + (inner if cfg.get("mamba_conv_bias", True) else 0)
        + inner * (rank + 2 * state)
        + rank * inner
        + inner
        + inner * state
        + inner
        + inner * h
        + rank
        + 2 * state  # Jamba's dt, B, C layernorms
    )
    return {"d_inner": inner, "d_state": state, "conv_kernel": k}, params


def _mamba2(cfg: Mapping, path) -> tuple[dict, float]:
    """Mamba-2 (Nemotron-H): one in-projection to x, z, B, C and dt; a gated norm; out."""
    h = cfg["hidden_size"]
    heads, hd = _get(cfg, path, "mamba_num_heads"), _get(cfg, path, "mamba_head_dim")
    state, groups = _get(cfg, path, "ssm_state_size"), _get(cfg, path, "n_groups")
    k = _get(cfg, path, "conv_kernel")
    inner, bc = heads * hd, 2 * groups * state
    params = h * (2 * inner + bc + heads) + (inner + bc) * (k + 1) + 3 * heads + inner + inner * h
    dims = {"heads": heads, "head_dim": hd, "d_state": state, "groups": groups, "conv_kernel": k}
    return dims, params


def _blocks(cfg: Mapping, path) -> list[tuple[str, str]]:
    """Each layer's (mixer, mlp): mixer attention/sliding/mla/mamba/mamba2, mlp dense/moe/none."""
    n = _get(cfg, path, "num_hidden_layers")
    pattern = cfg.get("hybrid_override_pattern")
    if pattern:  # Nemotron-H: one block a layer
        return [NEMOTRON_BLOCKS[c] for c in pattern]
    if cfg.get("attn_layer_period"):  # Jamba
        return [
            (
                "attention" if i % cfg["attn_layer_period"] == cfg["attn_layer_offset"] else "mamba",
                "moe" if i % cfg["expert_layer_period"] == cfg["expert_layer_offset"] else "dense",
            )
            for i in range(n)
        ]
    mixer = "mla" if cfg.get("kv_lora_rank") else "attention"
    types = cfg.get("layer_types") or ["full_attention"] * n
    experts = cfg.get("n_routed_experts") or cfg.get("num_local_experts") or cfg.get("num_experts")
    out = []
    for i in range(n):
        m = "sliding" if types[i] == "sliding_attention" and mixer == "attention" else mixer
        moe = bool(experts) and i >= (cfg.get("first_k_dense_replace") or 0)
        moe = moe and i not in (cfg.get("mlp_only_layers") or ())
        moe = moe and (i + 1) % (cfg.get("decoder_sparse_step") or 1) == 0
        out.append((m, "moe" if moe else "dense"))
    return out


def architecture(cfg: Mapping, path: Path | str = "config.json", source: str = "") -> dict:
    """The card's `architecture:` section for this config (every field filled that it states)."""
    h, vocab = _get(cfg, path, "hidden_size"), _get(cfg, path, "vocab_size")
    tied = bool(cfg.get("tie_word_embeddings", True))
    blocks = _blocks(cfg, path)
    per_layer_norms = 1 if cfg.get("hybrid_override_pattern") else 2
    params = vocab * h * (1 if tied else 2) + h + per_layer_norms * h * len(blocks)
    experts = replicated = 0.0
    groups: dict[tuple, dict] = {}
    for mixer, mlp in blocks:
        dims: dict = {}
        if mixer in ("attention", "sliding"):
            dims, p = _attention(cfg, path)
            kind = "attention"
            if mixer == "sliding":
                dims = {**dims, "sliding_window": cfg["sliding_window"]}
        elif mixer == "mla":
            dims, p, down = _mla(cfg, path)
            kind, replicated = "mla", replicated + down
        elif mixer in ("mamba", "mamba2"):
            dims, p = (_mamba if mixer == "mamba" else _mamba2)(cfg, path)
            kind = mixer
        else:
            kind, p = None, 0
        params += p
        if kind:
            key = (kind, *sorted(dims.items()))
            groups.setdefault(key, {"kind": kind, "count": 0, **dims})["count"] += 1
        if mlp == "dense":
            params += _mlp(cfg, _get(cfg, path, "intermediate_size"))
        elif mlp == "moe":
            routed, other, router = _moe(cfg, path)
            params, experts, replicated = params + routed + other, experts + routed, replicated + router
    return {
        "source": source or f"{Path(path).name}: counted from its shapes by dayzero.spec.hfconfig",
        "parameters": int(params),
        "embedding_parameters": vocab * h,
        "tied_embeddings": tied,
        "expert_parameters": int(experts),
        "replicated_parameters": int(replicated),
        "hidden_size": h,
        "context_length": cfg.get("max_position_embeddings"),
        "dtype": cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16",
        "layers": [{k: v for k, v in g.items()} for g in groups.values()],
    }


def read(path: Path) -> dict:
    """A config.json file as a mapping (its `text_config` where a multimodal config nests one)."""
    try:
        cfg = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(path, "", f"expected a Hugging Face config.json: {exc}") from exc
    if not isinstance(cfg, dict):
        raise ConfigError(path, "", "expected a JSON object")
    return cfg.get("text_config") or cfg
