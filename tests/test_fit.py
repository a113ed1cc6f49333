"""`dayzero fit`: the arithmetic against what real files and engines say.

SmolLM2's weights against the sizes its card records for the real files (preflight checks them on
every host, and the cached files where this machine has them); its KV cache against the size
llama-server printed (tests/data/llama-server-0.3.36-kv.log, recorded with the card's recipe) and
SGLang's (tests/data/sglang-0.5.23-cpu.log), each within 5%. Kimi's answer to "a Mac Mini?" is a
line with numbers; a null architecture field is "needs data" naming it.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from dayzero.cache import model_path
from dayzero.errors import DayzeroError
from dayzero.spec import fit
from dayzero.spec.matrix import load_matrix

REPO = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def matrix():
    return load_matrix(REPO / "matrix")


def near(got: float, want: float, share: float = 0.05) -> bool:
    return abs(got - want) <= share * want


def dtypes_of(card):
    """The cache types the card's recipe sets, by its engine's own flags."""
    return fit.cache_dtypes(card.raw["recipe"]["command"], fit.engine_memory(card.engine.name))


def smollm(matrix, engine: str):
    card = matrix.engine_cards[("smollm2-135m", engine)]
    (weights,) = [f for f in card.model_files if f.role == "weights"]
    return card, weights


@pytest.mark.parametrize("engine", ["llama.cpp", "sglang"])
def test_the_weights_size_matches_the_real_files(matrix, engine):
    card, weights = smollm(matrix, engine)
    got = fit.weights_bytes(fit.architecture(card), fit.PRECISIONS[weights.precision])
    assert near(got, weights.size), (engine, got, weights.size)
    cached = Path(weights.path.replace("{model_root}", str(model_path().parent)))
    if cached.is_file():  # the real file, where this machine has it (tools/build-engine, build-sglang)
        assert near(got, cached.stat().st_size)


def test_the_kv_cache_matches_what_llama_server_allocated(matrix):
    """The log says its cells per sequence, sequences and size: the same shape computed here."""
    log = (DATA / "llama-server-0.3.36-kv.log").read_text()
    m = re.search(
        r"llama_kv_cache: size = +([0-9.]+) MiB \( *(\d+) cells, +(\d+) layers, +(\d+)/\d+ seqs\)", log
    )
    size_mib, cells, layers, seqs = float(m[1]), int(m[2]), int(m[3]), int(m[4])
    card, _ = smollm(matrix, "llama.cpp")
    arch = fit.architecture(card)
    assert sum(g.count for g in arch.layers) == layers
    cache = fit.cache(arch, dtypes_of(card))
    assert near(cache.bytes(cells, seqs), size_mib * 2**20)


def test_the_kv_cache_matches_what_sglang_allocated(matrix):
    """SGLang prints K and V in GiB with two decimals (0.09 GB: 0.085-0.095)."""
    log = (DATA / "sglang-0.5.23-cpu.log").read_text()
    m = re.search(
        r"KV Cache is allocated\. dtype: torch\.(\w+), #tokens: (\d+), "
        r"K size: ([0-9.]+) GB, V size: ([0-9.]+) GB",
        log,
    )
    tokens, gib = int(m[2]), float(m[3]) + float(m[4])
    card, _ = smollm(matrix, "sglang")
    dtypes = dtypes_of(card)
    assert fit.DTYPE_BYTES[m[1]] == dtypes.kv_bytes  # bfloat16: "auto" is the bf16 weights' dtype
    got = fit.cache(fit.architecture(card), dtypes).bytes(tokens, 1)
    assert near(got, gib * 2**30)


def test_mla_and_kda_layers_size_their_cache_and_a_null_field_is_named(matrix):
    card = matrix.cards["kimi-k3.1-pro"]
    arch = fit.architecture(card)
    dtypes = dtypes_of(card)
    assert (dtypes.kv_bytes, dtypes.state_bytes) == (1.0, 2.0)  # fp8_e4m3, bfloat16
    unknown = fit.cache(arch, dtypes)
    assert unknown.bytes(8192, 1) is None
    assert "architecture.layers[0].kv_lora_rank (dsa)" in unknown.missing
    assert "architecture.layers[1].heads (kda)" in unknown.missing
    dsa = {"kv_lora_rank": 512, "qk_rope_head_dim": 64, "index_head_dim": 128}
    kda = {"heads": 32, "head_dim": 128, "conv_kernel": 4}
    known = replace(arch, layers=(fit.Layers("dsa", 24, dsa), fit.Layers("kda", 69, kda)))
    got = fit.cache(known, dtypes)
    assert got.per_token == 24 * (512 + 64 + 128) * 1.0
    assert got.per_sequence == 69 * (32 * 128 * 128 + 3 * 32 * 128 * 3) * 2.0
    assert got.bytes(1000, 2) == 2 * (1000 * got.per_token + got.per_sequence)


def test_a_verdict_says_fits_weights_only_or_does_not_fit(matrix):
    card, _ = smollm(matrix, "llama.cpp")
    arch, p = fit.architecture(card), fit.PRECISIONS["q4_1"]
    dtypes = fit.CacheDtypes(2.0, 2.0, 2.0, 2.0, "")
    weights = fit.weights_bytes(arch, p)
    words = [
        fit.judge(fit.Target("m", mem, 1, "m"), p, arch, dtypes, 8192, 1, mem).word
        for mem in (weights * 10, weights * 1.1, weights * 0.5)
    ]
    assert words == ["fits", "weights only", "does not fit"]


def test_memory_sizes_read_as_a_reader_writes_them():
    assert fit.parse_memory("64GB") == 64e9
    assert fit.parse_memory("96 GiB") == 96 * 2**30
    assert fit.parse_memory("1.5TB") == 1.5e12
    with pytest.raises(DayzeroError, match="64GB or 96GiB"):
        fit.parse_memory("64 gigs")


def test_a_mac_mini_is_answered_with_numbers():
    out = subprocess.run(
        [sys.executable, "-m", "dayzero.cli", "fit", "kimi-k3.1-pro", "--memory", "64GB"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    (line,) = [x for x in out.stdout.splitlines() if x.startswith("a 64 GB machine")]
    # 2.8T x 4.25 bits, against 64 GB less SGLang's own reserve (at least 10 GiB on a GPU over 60 GiB)
    assert "mxfp4 no: weights 1488 GB a rank = 29.5x its usable 50.44 GB" in line
    assert "q2_k no: weights 918.8 GB" in line
    assert "weights at mxfp4 (4.25 bits): 1488 GB (the card's); experts only, the rest bf16" in out.stdout
    b300 = "8 x b300 (288 GB each, nominal), TP8, usable a rank 288 GB - 14.5 GB engine reserve: "
    assert b300 in out.stdout
    assert "mxfp4 weights fit (185.9 GB of 273.5 GB a rank)" in out.stdout


def test_json_holds_every_verdict_and_the_missing_fields(capsys):
    from dayzero.cli import main

    assert main(["--matrix", str(REPO / "matrix"), "fit", "kimi-k3.1-pro", "--memory", "64GB", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)["sglang"]
    machine = [v for v in doc["verdicts"] if v["target"] == "machine"]
    assert {v["precision"] for v in machine} == {"mxfp4", "q4_k", "q3_k", "q2_k"}
    assert all(v["word"] == "does not fit" for v in machine)
    assert doc["cache"]["bytes_per_token"] is None and doc["cache"]["needs_data"]


@pytest.mark.parametrize(
    "options",
    [["--on", "xyz"], ["--precision", "int3"], ["--memory", "lots"], ["--context", "0"],
     ["--concurrency", "0"], ["--tp", "0"], ["--context", "x"]],
    ids=lambda o: " ".join(o),
)  # fmt: skip
def test_a_bad_option_value_is_bad_input_exit_2(options, capsys):
    """Issue 45: `fit` exited 1 (the verb's "no") on a value it could not read, and sized a
    context of 0 tokens; the verbs' table says bad input is 2."""
    from dayzero import cli

    try:
        status = cli.main(["fit", "smollm2-135m", *options])
    except SystemExit as exc:  # argparse's own refusal
        status = exc.code
    err = capsys.readouterr().err
    assert status == 2 and options[0] in err, err


def test_an_unknown_model_is_bad_input_exit_2(capsys):
    from dayzero import cli

    assert cli.main(["fit", "smollm3"]) == 2
    assert "unknown model 'smollm3'" in capsys.readouterr().err
