"""`dayzero fit` on seven public configurations of different families, against a reference
computed here from each config.json with the plain formulas (tests/data/hf-configs/SOURCES.md):
weights from the published parameter count, KV per token and state per sequence from the
config's shapes, at 8k and 128k tokens, TP1 and TP8, each within 2%; and verdicts on a 64 GB
Mac, one H100 and eight H200s that state their headroom.
"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

from dayzero.spec import fit, hfconfig, sizing
from dayzero.spec.matrix import load_matrix

REPO = Path(__file__).resolve().parents[1]
CONFIGS = Path(__file__).parent / "data" / "hf-configs"
PUBLISHED = {  # parameters, as each release states them (SOURCES.md)
    "llama-3.1-8b": 8.03e9,
    "qwen3-30b-a3b": 30.5e9,
    "gpt-oss-120b": 116.83e9,
    "deepseek-v3": 671e9,
    "jamba-v0.1": 51.6e9,
    "nemotron-h-8b": 8.1e9,
    "smollm2-135m": 134_515_008,
}
MODELS = sorted(PUBLISHED)


def config(name: str) -> dict:
    return hfconfig.read(CONFIGS / f"{name}.json")


def arch(name: str) -> sizing.Architecture:
    return sizing.from_card(hfconfig.architecture(config(name), f"{name}.json"))


def within(got: float, want: float, share: float = 0.02) -> bool:
    return abs(got - want) <= share * abs(want)


# --- the reference: plain formulas over the config's own fields ---


def layer_kinds(c: dict) -> list[str]:
    """Each layer's cache kind: full, sliding, mla, mamba, mamba2, or none."""
    n = c["num_hidden_layers"]
    if "hybrid_override_pattern" in c:
        return [{"M": "mamba2", "*": "full"}.get(ch, "none") for ch in c["hybrid_override_pattern"]]
    if "attn_layer_period" in c:
        return ["full" if i % c["attn_layer_period"] == c["attn_layer_offset"] else "mamba" for i in range(n)]
    if "kv_lora_rank" in c:
        return ["mla"] * n
    types = c.get("layer_types") or ["full_attention"] * n
    return ["sliding" if t == "sliding_attention" else "full" for t in types]


def reference_cache(c: dict, context: int, tp: int, kv: float, conv: float, ssm: float) -> float:
    """One sequence's cache bytes on one rank."""
    total = 0.0
    for kind in layer_kinds(c):
        if kind in ("full", "sliding"):
            heads = max(1, math.ceil(c["num_key_value_heads"] / tp))
            hd = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
            tokens = min(context, c["sliding_window"]) if kind == "sliding" else context
            total += tokens * 2 * heads * hd * kv
        elif kind == "mla":  # the latent and the rope key, whole on every rank
            total += context * (c["kv_lora_rank"] + c["qk_rope_head_dim"]) * kv
        elif kind == "mamba":
            inner = c["mamba_expand"] * c["hidden_size"] / tp
            total += inner * (c["mamba_d_conv"] - 1) * conv + inner * c["mamba_d_state"] * ssm
        elif kind == "mamba2":
            heads = c["mamba_num_heads"] / tp
            x = heads * c["mamba_head_dim"]
            bc = 2 * max(1, c["n_groups"] / tp) * c["ssm_state_size"]
            total += (x + bc) * (c["conv_kernel"] - 1) * conv + x * c["ssm_state_size"] * ssm
    return total


def reference_weights(name: str, precision: str, tp: int) -> float:
    """Published parameters at 2 B (bf16), or 1 B with the embedding and untied head in bf16 (fp8),
    split evenly over TP."""
    c, params = config(name), PUBLISHED[name]
    if precision == "bf16":
        return params * 2 / tp
    wide = c["vocab_size"] * c["hidden_size"] * (1 if c.get("tie_word_embeddings", True) else 2)
    return ((params - wide) + wide * 2) / tp


# --- the tests ---


@pytest.mark.parametrize("name", MODELS)
def test_parameters_counted_from_the_config_match_the_release(name):
    assert within(arch(name).parameters, PUBLISHED[name], 0.01)


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("precision", ["bf16", "fp8"])
@pytest.mark.parametrize("tp", [1, 8])
def test_weights_per_rank_match_the_reference(name, precision, tp):
    got = sizing.weights_bytes(arch(name), sizing.PRECISIONS[precision], sizing.Layout(tp=tp))
    assert within(got, reference_weights(name, precision, tp)), (got, reference_weights(name, precision, tp))


ENGINE_FLAGS = [  # (engine, flags, K/V bytes, conv bytes, SSM bytes)
    ("vllm", [], 2.0, 2.0, 2.0),
    ("vllm", ["--kv-cache-dtype", "fp8", "--mamba-ssm-cache-dtype", "float32"], 1.0, 2.0, 4.0),
    ("sglang", [], 2.0, 2.0, 4.0),  # SGLang's SSM state is float32 unless --mamba-ssm-dtype says
    ("llama.cpp", ["-ctk", "q4_0", "-ctv", "q4_0"], 18 / 32, 4.0, 4.0),  # recurrent states: F32
]


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("engine,flags,kv,conv,ssm", ENGINE_FLAGS)
@pytest.mark.parametrize("tp", [1, 8])
def test_kv_and_state_per_sequence_match_the_reference(name, engine, flags, kv, conv, ssm, tp):
    a, c = arch(name), config(name)
    dtypes = fit.cache_dtypes(flags, fit.engine_memory(engine), a.dtype)
    assert (dtypes.k, dtypes.v, dtypes.conv, dtypes.ssm) == (kv, kv, conv, ssm)
    got = sizing.cache(a, dtypes, sizing.Layout(tp=tp))
    for context in (8192, 131072):
        want = reference_cache(c, context, tp, kv, conv, ssm)
        assert within(got.per_sequence_at(context), want), (context, got, want)
    first_token = got.per_sequence_at(1) - got.per_sequence_at(0)
    assert within(first_token, reference_cache(c, 1, tp, kv, 0, 0))


def test_the_families_size_what_the_old_fit_got_wrong():
    """gpt-oss's sliding layers stop at 128 tokens; an MLA latent is whole on every TP8 rank;
    llama.cpp's q4_0 KV is 18 B per 32; Jamba's and Nemotron-H's states are Mamba's own."""
    vllm = fit.cache_dtypes([], fit.engine_memory("vllm"))
    oss = sizing.cache(arch("gpt-oss-120b"), vllm)
    assert oss.per_sequence_at(131072) == pytest.approx(18 * 2 * 8 * 64 * 2 * (131072 + 128))
    ds = arch("deepseek-v3")
    tp8 = sizing.cache(ds, vllm, sizing.Layout(tp=8))
    assert tp8.per_token == sizing.cache(ds, vllm).per_token == 61 * 576 * 2
    q4 = fit.cache_dtypes(["-ctk", "q4_0", "-ctv", "q4_0"], fit.engine_memory("llama.cpp"))
    assert sizing.cache(arch("llama-3.1-8b"), q4).per_token == 32 * 2 * 8 * 128 * 18 / 32
    f32 = fit.cache_dtypes(["--mamba-ssm-cache-dtype", "float32"], fit.engine_memory("vllm"))
    assert sizing.cache(arch("jamba-v0.1"), f32).per_sequence == 28 * (8192 * 3 * 2 + 8192 * 16 * 4)
    assert sizing.cache(arch("nemotron-h-8b"), f32).per_sequence == 24 * (10240 * 3 * 2 + 128 * 64 * 128 * 4)


def test_experts_only_mxfp4_keeps_the_rest_of_gpt_oss_in_bf16():
    """The released checkpoint: 128 experts x 36 layers at MXFP4, attention, router, embedding
    and head in bf16 (its quantization_config's modules_to_not_convert): about 65 GB."""
    c = config("gpt-oss-120b")
    h, i = c["hidden_size"], c["intermediate_size"]
    experts = c["num_hidden_layers"] * c["num_local_experts"] * 3 * h * i
    want = experts * 4.25 / 8 + (PUBLISHED["gpt-oss-120b"] - experts) * 2
    assert within(sizing.weights_bytes(arch("gpt-oss-120b"), sizing.PRECISIONS["mxfp4"]), want)


@pytest.fixture(scope="module")
def hardware():
    return load_matrix(REPO / "matrix").hardware


TARGETS = ("mac=64GiB", "h100", "8xh200")
# Verdicts at 8192 tokens x 1 (bf16, vLLM's defaults): what each model's release says it runs on.
EXPECTED = {
    "llama-3.1-8b": ("fits", "fits", "fits"),
    "qwen3-30b-a3b": ("does not fit", "fits", "fits"),
    "gpt-oss-120b": ("does not fit", "does not fit", "fits"),
    "deepseek-v3": ("does not fit", "does not fit", "does not fit"),  # 1342 GB of bf16: two nodes
    "jamba-v0.1": ("does not fit", "does not fit", "fits"),
    "nemotron-h-8b": ("fits", "fits", "fits"),
    "smollm2-135m": ("fits", "fits", "fits"),
}


@pytest.mark.parametrize("name", MODELS)
def test_verdicts_on_a_mac_an_h100_and_eight_h200s_state_their_headroom(name, hardware):
    targets = [fit.parse_on(t, hardware) for t in TARGETS]
    got = fit.plan_arch(
        name, arch(name), targets, memory=fit.engine_memory("vllm"), precisions=["bf16"], contexts=[8192]
    )
    assert tuple(v.word for v in got.verdicts) == EXPECTED[name]
    for v in got.verdicts:
        assert v.usable < v_capacity(v, targets)  # the engine's share and the Mac's working set taken
        text = v.short()
        assert ("headroom" in text) if v.word == "fits" else ("no:" in text or "short" in text)


def v_capacity(v, targets) -> float:
    (t,) = [t for t in targets if t.name == v.target]
    return t.capacity


def test_deepseek_fp8_at_32k_x_64_does_not_fit_eight_h200s_per_rank(hardware):
    """Pooled, 8 x 141 GB holds 673 GB of weights and 147 GB of latents; per rank it is 84 GB of
    weights plus the whole 147 GB latent: about 231 GB a GPU."""
    got = fit.plan_arch(
        "deepseek-v3",
        arch("deepseek-v3"),
        [fit.parse_on("8xh200", hardware)],
        memory=fit.engine_memory("vllm"),
        precisions=["fp8"],
        contexts=[32768],
        concurrency=64,
    )
    (v,) = got.verdicts
    assert v.word == "weights only" and 228e9 < v.weights + v.cache < 234e9


def test_the_cli_reads_a_config_and_states_each_target():
    out = subprocess.run(
        [sys.executable, "-m", "dayzero.cli", "fit", "--config", str(CONFIGS / "gpt-oss-120b.json"),
         "--engine", "vllm", "--precision", "mxfp4", "--context", "8192",
         "--on", "mac=64GiB", "--on", "h100", "--on", "8xh200"],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert any("18 attention (window 128), 18 attention" in x for x in lines)
    (h100,) = [x for x in lines if x.startswith("1 x h100")]
    assert "85.52 GB x 0.92 engine share" in h100 and "mxfp4 fits (" in h100 and "headroom" in h100
    (mac,) = [x for x in lines if x.startswith("1 x mac")]
    assert "0.75 GPU working set" in mac and "mxfp4 no: weights 65.19 GB" in mac


def test_the_mamba_ratio_takes_its_sizes_from_fit():
    """A hybrid card whose `mamba_ratio` leaves the state and KV sizes null gets fit's (Nemotron-H
    under SGLang: its float32 SSM state), and a size the card states is kept."""
    from dayzero.spec import card as card_spec

    data = {
        "model": "nemotron-h-8b",
        "engine": {"name": "sglang"},
        "architecture": hfconfig.architecture(config("nemotron-h-8b")),
        "recipe": {"command": ["sglang", "serve", "--model-path", "{weights}"]},
        "mamba_ratio": {"state_bytes_per_slot": None, "kv_bytes_per_token": None, "context_tokens": 9216},
        "hardware": {},
    }
    got = card_spec._mamba_ratio(data)
    assert got["state_bytes_per_slot"] == 24 * (10240 * 3 * 2 + 128 * 64 * 128 * 4)
    assert got["kv_bytes_per_token"] == 4 * 2 * 8 * 128 * 2
    assert got["context_tokens"] == 9216
    pinned = {**data, "mamba_ratio": {**data["mamba_ratio"], "kv_bytes_per_token": 1000}}
    assert card_spec._mamba_ratio(pinned)["kv_bytes_per_token"] == 1000
