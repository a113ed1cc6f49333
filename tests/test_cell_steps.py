"""A cell run's steps on a stub engine: golden recording (no evidence), then a run checked against it."""

from __future__ import annotations

import json
import random

from dayzero.run.cell import RunContext, new_run_id, run_cell
from dayzero.spec.goldens import load_golden
from dayzero.spec.inventory import load_inventory
from dayzero.spec.matrix import load_matrix

from .conftest import REPO
from .stub_cells import stub_card, stub_inventory, stub_matrix


def test_golden_record_then_a_run_checked_against_it(tmp_path, monkeypatch):
    monkeypatch.setenv("DAYZERO_SUITES", str(REPO / "suites"))  # workloads and evals
    card = stub_card(model="goldie")
    card["recipe"]["port"] = random.randint(20000, 29000)  # ours alone: other runs use the stub too
    card["probes"] = [{"id": "hello", "prompt": "Say hello.", "max_tokens": 6}]
    matrix = load_matrix(stub_matrix(tmp_path, card))
    inventory = load_inventory(stub_inventory(tmp_path, ttft=0.01), set(matrix.hardware))
    cell = matrix.cell("goldie/cpu/low_latency/baseline")
    goldens, reports = tmp_path / "goldens", tmp_path / "reports"

    ctx = RunContext(matrix, inventory, reports, goldens, new_run_id(), say=lambda m: None)
    try:
        recorded = run_cell(ctx, cell, record_goldens=True)
    finally:
        ctx.close()
    assert recorded.verdict == "passed" and recorded.evidence_path is None, recorded.error
    assert not (reports / "evidence").exists(), "recording goldens writes no evidence"
    golden = load_golden(goldens, cell.id)
    assert set(golden.outputs) == {"hello"} and golden.policy["policy"] == "exact"
    assert golden.provenance["engine_version"] == "stub 1.0" and golden.provenance["host"] == "stubhost"
    assert golden.provenance["recipe_digest"]

    ctx = RunContext(matrix, inventory, reports, goldens, new_run_id(), say=lambda m: None)
    try:
        outcome = run_cell(ctx, cell)
    finally:
        ctx.close()
    assert outcome.verdict == "passed", [c.message for c in outcome.failed_checks] or outcome.error
    doc = json.loads(outcome.evidence_path.read_text())
    assert [c["verdict"] for c in doc["checks"] if c["name"] == "golden:hello"] == ["passed"]
    assert doc["hosts"][0]["facts"]["driver_version"] == "none (cpu)"
    assert doc["hosts"][0]["lease"]["released"] >= doc["hosts"][0]["lease"]["acquired"]
    assert not list((tmp_path / "work" / "leases").glob("slot-*")), "leases released"
