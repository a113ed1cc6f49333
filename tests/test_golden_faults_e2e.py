"""A broken engine still fails its goldens (issue 39, item 3): a wrong chat template, a wrong RoPE
base, a corrupted weight and another model's tokenizer, each built for real as a modified copy of
the model (tests/golden_faults.py), served by each engine of the embedded default, probed and
compared with the shipped goldens under the near-tie tolerance. Each must fail a golden check,
not launch errors: the tolerance that lets a cross-machine near-tie through must not let these
through.
"""

from __future__ import annotations

import shutil

import pytest
import yaml

from dayzero.lab.cache import model_path
from dayzero.run.cell import RunContext, new_run_id, run_cell
from dayzero.spec.inventory import load_inventory
from dayzero.spec.matrix import load_matrix

from .conftest import REPO, needs_engine
from .golden_faults import FAULTS, build

pytestmark = [pytest.mark.e2e, needs_engine]

ENGINES = ("llama.cpp", "sglang", "vllm")


@pytest.fixture(scope="module")
def probes_only_matrix(tmp_path_factory):
    """The repository's matrix with the SmolLM2 card's checksum of the GGUF (a size check stays on
    the bf16 checkpoint) and its tool-use suite taken out: the probes are what these tests judge."""
    dest = tmp_path_factory.mktemp("faults") / "matrix"
    (dest / "models").mkdir(parents=True)
    (dest / "hardware.yaml").write_text((REPO / "matrix" / "hardware.yaml").read_text())
    for path in (REPO / "matrix" / "models").iterdir():
        if path.is_dir():
            continue
        text = path.read_text()
        if path.name == "smollm2-135m.yaml":
            card = yaml.safe_load(text)
            card.pop("model_files", None)
            card.pop("tool_calls", None)
            text = yaml.safe_dump(card, sort_keys=False)
        (dest / "models" / path.name).write_text(text)
    for sub in (REPO / "matrix" / "models").iterdir():
        if sub.is_dir():
            shutil.copytree(sub, dest / "models" / sub.name)
    return dest


def inventory_with_model_root(tmp_path, model_root):
    doc = yaml.safe_load((REPO / "hosts" / "local.yaml").read_text())
    host = doc["hosts"]["local"]
    host["workdir"] = str(tmp_path / "work")
    host["vars"] = {**host.get("vars", {}), "model_root": str(model_root)}
    host["max_foreign_load"] = 0  # the contention check's second is test_hostload's to hold
    path = tmp_path / "hosts.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("fault", FAULTS)
def test_a_broken_engine_fails_its_goldens(engine, fault, probes_only_matrix, tmp_path):
    root = build(fault, engine, model_path().parent, tmp_path / "model-root")
    matrix = load_matrix(probes_only_matrix)
    inventory = load_inventory(inventory_with_model_root(tmp_path, root), set(matrix.hardware))
    said = []
    ctx = RunContext(
        matrix, inventory, tmp_path / "reports", REPO / "suites" / "goldens", new_run_id(), say=said.append
    )
    cell = matrix.cell(f"smollm2-135m/cpu+{engine}/low_latency/baseline")
    try:
        outcome = run_cell(ctx, cell, correctness_only=True)
    finally:
        ctx.close()
    assert not outcome.error, f"{engine} with a {fault} fault did not serve: {outcome.error}\n" + "\n".join(
        said
    )
    goldens = [c for c in outcome.checks if c.name.startswith("golden:")]
    assert len(goldens) == 4
    # every answer still came back, compared token by token (both sides carry log-probabilities)
    assert all(c.details.get("comparison") == "tokens and log-probabilities" for c in goldens), [
        (c.name, c.details.get("why_text")) for c in goldens
    ]
    failed = [c for c in goldens if c.verdict == "failed"]
    assert failed, f"{engine} with a {fault} fault passed every golden: " + "; ".join(
        f"{c.name}: {c.message}" for c in goldens
    )
    for c in goldens:  # shown by `pytest -rP`: what each fault did to each probe
        print(f"{engine} {fault} {c.name}: {c.verdict}: {c.message.splitlines()[0][:200]}")
    # what the failures say: a divergence that is no near-tie, or log-probabilities that moved
    assert all("not a near-tie" in c.message or "drift" in c.message or "tokens" in c.message for c in failed)
