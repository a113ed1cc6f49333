"""Cross-hardware goldens and the Kimi card's correctness gates: goldens recorded once on a
reference cell, compared on every other cell under a tolerant policy; a cell whose golden is not
recorded yet is Pending ("golden not recorded"), never failed."""

from __future__ import annotations

import json
import random

import pytest
import yaml

from dayzero.checks import NOT_MEASURED
from dayzero.checks.accuracy import load_eval
from dayzero.checks.correctness import check_golden
from dayzero.errors import ConfigError
from dayzero.report.acceptance import rows
from dayzero.run import plan
from dayzero.run.cell import RunContext, new_run_id, run_cell
from dayzero.spec.card import GoldenPolicy, gates_for
from dayzero.spec.inventory import load_inventory
from dayzero.spec.matrix import load_matrix

from .conftest import REPO
from .stub_cells import stub_card, stub_inventory, stub_matrix

KIMI_REF = "kimi-k3.1-pro/b300/balanced/baseline"


def test_kimi_cells_compare_with_the_b300_reference_under_a_tolerant_policy(matrix_dir):
    matrix = load_matrix(matrix_dir)
    ref = plan.probes(matrix.card(matrix.cell(KIMI_REF)), matrix.cell(KIMI_REF))
    assert (ref.golden_cell, ref.policy.policy, ref.concurrency) == (KIMI_REF, "exact", 1)
    for cell in (c for c in matrix.cells if c.model == "kimi-k3.1-pro" and c.supported and c.id != KIMI_REF):
        other = plan.probes(matrix.card(cell), cell)
        assert other.golden_cell == KIMI_REF
        assert other.policy == GoldenPolicy("exact", near_tie_nats=1.0, drift_nats=2.0)
        assert other.top_logprobs == 5  # SGLang streams them: the near-ties are judged by them
        assert other.missing_verdict == NOT_MEASURED
    # a card without cross-hardware goldens keeps its own, and a missing one still fails
    smol = matrix.cell("smollm2-135m/cpu+llama.cpp/low_latency/baseline")
    assert plan.probes(matrix.card(smol), smol).golden_cell == smol.id
    assert plan.probes(matrix.card(smol), smol).missing_verdict == "failed"


def test_a_golden_not_recorded_is_not_measured_not_failed():
    result = check_golden(
        GoldenPolicy("similarity", min_ratio=0.6), "capital", None, "Paris", missing=NOT_MEASURED
    )
    assert result.verdict == NOT_MEASURED and result.message == "golden not recorded"
    assert not result.passed


def test_the_reference_must_be_a_cell_of_the_card(matrix_dir):
    path = matrix_dir / "models" / "kimi-k3.1-pro.yaml"
    card = yaml.safe_load(path.read_text())
    card["goldens"]["reference"] = "kimi-k3.1-pro/b300/nope/baseline"
    path.write_text(yaml.safe_dump(card, sort_keys=False))
    with pytest.raises(ConfigError, match=r"goldens\.reference"):
        load_matrix(matrix_dir)


def test_the_kimi_card_gates_every_supported_cell_on_gsm8k(matrix_dir):
    matrix = load_matrix(matrix_dir)
    items = load_eval(REPO / "suites" / "evals", "gsm8k-mini").items
    assert len(items) == 60
    for cell in (c for c in matrix.cells if c.model == "kimi-k3.1-pro" and c.supported):
        (gate,) = gates_for(matrix.card(cell), cell)
        assert (gate.eval, gate.threshold, gate.style) == ("gsm8k-mini", 0.9, "chat")
        assert gate.concurrency == matrix.card(cell).mode(cell.mode).concurrency


def _run(matrix_dir, tmp_path, goldens, reports, cell_id, record=False):
    matrix = load_matrix(matrix_dir)
    inventory = load_inventory(stub_inventory(tmp_path, ttft=0.01), set(matrix.hardware))
    ctx = RunContext(matrix, inventory, reports, goldens, new_run_id(), say=lambda m: None)
    try:
        return run_cell(ctx, matrix.cell(cell_id), record_goldens=record)
    finally:
        ctx.close()


def test_pending_until_the_reference_golden_is_recorded_then_compared_across(tmp_path, monkeypatch):
    monkeypatch.setenv("DAYZERO_SUITES", str(REPO / "suites"))
    card = stub_card(model="crossy")
    card["recipe"]["port"] = random.randint(20000, 29000)  # ours alone: other runs use the stub too
    card["probes"] = [{"id": "hello", "prompt": "Say hello.", "max_tokens": 6}]
    ref, other = "crossy/cpu/low_latency/baseline", "crossy/cpu/high_throughput/baseline"
    card["modes"]["high_throughput"]["args"] = ["--itl", "0"]  # another recipe than the reference's
    card["goldens"] = {"reference": ref, "policy": {"policy": "similarity", "min_ratio": 0.5}}
    matrix_dir = stub_matrix(tmp_path, card)
    goldens, reports = tmp_path / "goldens", tmp_path / "reports"

    before = _run(matrix_dir, tmp_path, goldens, reports, other)
    assert before.verdict == "passed" and not before.failed_checks  # pytest does not fail it
    doc = json.loads(before.evidence_path.read_text())
    (golden,) = [c for c in doc["checks"] if c["name"] == "golden:hello"]
    assert golden["verdict"] == NOT_MEASURED and golden["message"] == "golden not recorded"
    row = next(r for r in rows(load_matrix(matrix_dir), reports) if r.cell.id == other)
    assert row.status == "Pending" and "golden not recorded" in row.detail and row.evidence

    assert _run(matrix_dir, tmp_path, goldens, reports, ref, record=True).verdict == "passed"
    assert (goldens / "crossy" / "cpu" / "low_latency" / "baseline.json").exists()
    assert not (goldens / "crossy" / "cpu" / "high_throughput").exists()  # recorded once

    after = _run(matrix_dir, tmp_path, goldens, reports, other)
    doc = json.loads(after.evidence_path.read_text())
    (golden,) = [c for c in doc["checks"] if c["name"] == "golden:hello"]
    assert golden["verdict"] == "passed" and golden["bound"] == "similarity >= 0.5"
    assert golden["details"]["provenance_differs"]  # recorded under the reference's recipe
    row = next(r for r in rows(load_matrix(matrix_dir), reports) if r.cell.id == other)
    assert row.status == "Verified" and "golden recorded under recipe" in row.detail


def test_a_mode_may_meet_another_modes_golden_and_a_wrong_one_is_refused(matrix_dir):
    """The SGLang PD cell's probes meet the low_latency cell's golden (one server's greedy output);
    a `same_as` naming no other mode of the card is refused, naming the file and the field."""
    from dayzero.spec.card import golden_source

    matrix = load_matrix(REPO / "matrix")
    pd = matrix.cell("smollm2-135m/cpu+sglang/pd/baseline")
    source, policy = golden_source(matrix.card(pd), pd)
    assert source == "smollm2-135m/cpu+sglang/low_latency/baseline" and policy.policy == "exact"
    assert plan.probes(matrix.card(pd), pd).golden_cell == source and policy.describe().endswith(
        "low_latency cell's golden"
    )
    card = matrix_dir / "models" / "smollm2-135m.yaml"
    card.write_text(card.read_text().replace("same_as: low_latency", "same_as: low_latenc"))
    with pytest.raises(ConfigError, match=r"modes.pd.golden.same_as.*another mode of the card.*'low_latenc'"):
        load_matrix(matrix_dir)
