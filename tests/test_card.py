"""The typed model card: parsed once at load; what a schema cannot say names file, field and line."""

from __future__ import annotations

import shutil

import pytest
import yaml

from dayzero.errors import ConfigError
from dayzero.spec.card import GoldenPolicy, Probe, floors_for, gates_for, rules_for
from dayzero.spec.matrix import load_matrix

from .conftest import REPO
from .test_matrix import edit

SMOL = "smollm2-135m/cpu+llama.cpp/{mode}/{strategy}"


def test_the_shipped_card_reads_as_types():
    matrix = load_matrix(REPO / "matrix")
    card = matrix.cards["smollm2-135m"]
    assert card.engine.name == "llama.cpp" and card.engine.health_path == "/health"
    assert card.engine.bind == "{host}" and card.engine.multinode_args[:2] == ("--rpc", "{peers}")
    worker = card.engine.worker
    assert worker and worker.argv[0] == "rpc-server" and worker.port == 50052
    assert card.mode("low_latency").golden == GoldenPolicy("exact")
    assert card.mode("high_throughput").golden == GoldenPolicy("first_n_tokens", n=4)
    assert card.mode("high_throughput").concurrency == 4
    assert card.probes[0] == Probe("capital_france", card.probes[0].prompt, 16, ("Paris",))
    assert card.probes[2].expect_contains == ()
    assert card.protocol.compliance.tokens_per_chunk_max == 1.25 and card.protocol.warmup is None
    assert card.hardware["cpu"].nodes == 1 and card.hardware["cpu"].image is None
    assert card.vars == {"threads": "2"} and card.strategies == ("baseline", "ngram_spec")
    kimi = matrix.cards["kimi-k3.1-pro"]
    assert kimi.engine.multinode_args[:2] == ("--nnodes", "{nnodes}")
    assert kimi.hardware["b300"].image == "lmsysorg/sglang:kimi-k3.1"


def test_golden_policy_is_written_as_the_card_wrote_it():
    assert GoldenPolicy("first_n_tokens", n=4).to_json() == {"policy": "first_n_tokens", "n": 4}
    assert GoldenPolicy("exact").to_json() == {"policy": "exact"}
    assert GoldenPolicy("similarity", min_ratio=0.7).to_json() == {"policy": "similarity", "min_ratio": 0.7}


def test_rules_are_selected_per_cell_at_the_modes_concurrency():
    matrix = load_matrix(REPO / "matrix")
    card = matrix.cards["smollm2-135m"]
    low = matrix.cell(SMOL.format(mode="low_latency", strategy="baseline"))
    high = matrix.cell(SMOL.format(mode="high_throughput", strategy="baseline"))
    spec = matrix.cell(SMOL.format(mode="high_throughput", strategy="ngram_spec"))
    assert [f.name for f in floors_for(card, low)] == [
        "floor:output_throughput@random-64-32/c1",
        "floor:median_tpot_ms@random-64-32/c1",
    ]
    assert [f.name for f in floors_for(card, high)] == [
        "floor:median_tpot_ms@random-64-32/c4",
        "floor:output_throughput@random-64-32/c4",
        "floor:output_throughput@random-64-32/c1",  # the sweep, one floor per point
        "floor:output_throughput@random-64-32/c2",
        "floor:output_throughput@agentx-short/c4",
    ]
    assert floors_for(card, high)[0].direction == "max" and floors_for(card, high)[0].bound == 250
    assert [(g.eval, g.concurrency, g.limit) for g in gates_for(card, high)] == [("gsm8k-mini", 4, 30)]
    assert rules_for(card, high) == []
    (rule,) = rules_for(card, spec)
    assert rule.workloads == ("chat-code", "chat-prose") and rule.concurrency == 4 and rule.num_prompts == 6


def test_floors_that_would_share_a_name_are_told_apart_by_what_differs(tmp_path):
    """Check names key nightly comparisons and the checker's recheck: two floors of one cell on one
    metric, workload and concurrency must not collapse into one name."""
    matrix_dir = tmp_path / "matrix"
    shutil.copytree(REPO / "matrix", matrix_dir)
    card_path = matrix_dir / "models" / "smollm2-135m.yaml"
    data = yaml.safe_load(card_path.read_text())
    same = {"when": {"mode": "low_latency"}, "metric": "output_throughput", "concurrency": 1, "min": 1}
    data["floors"] += [
        same | {"max_tokens": 8},
        same | {"max_tokens": 12},
        same | {"max_tokens": 12, "min": 2},
    ]
    card_path.write_text(yaml.safe_dump(data, sort_keys=False))
    matrix = load_matrix(matrix_dir)
    low = matrix.cell(SMOL.format(mode="low_latency", strategy="baseline"))
    names = [f.name for f in floors_for(matrix.cards["smollm2-135m"], low)]
    assert names[2:] == [
        "floor:output_throughput@default/c1/len8",
        "floor:output_throughput@default/c1/len12-#1",
        "floor:output_throughput@default/c1/len12-#2",
    ]
    assert len(set(names)) == len(names) and names[0] == "floor:output_throughput@random-64-32/c1"


@pytest.mark.parametrize(
    "change, where, words",
    [
        (
            lambda d: d["floors"][1].__setitem__("normalise", "per_user"),
            "floors[1].normalise",
            "per_user applies to a throughput",
        ),
        (
            lambda d: d["speculative"][0].__setitem__("min_accept_length", {"chat-math": 1.5}),
            "speculative[0].min_accept_length.chat-math",
            "which this rule does not run",
        ),
        (
            lambda d: d["engine"].__setitem__("health_path", "health"),
            "engine.health_path",
            "expected a path starting with '/'",
        ),
    ],
)
def test_a_bad_value_names_file_field_and_line(matrix_dir, change, where, words):
    card = matrix_dir / "models" / "smollm2-135m.yaml"
    edit(card, change)
    with pytest.raises(ConfigError) as err:
        load_matrix(matrix_dir)
    msg = str(err.value)
    assert str(card) in msg and where in msg and words in msg and "(line " in msg
