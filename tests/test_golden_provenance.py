"""Golden provenance through a real cell run on the stub engine: a golden recorded under another
recipe is flagged in the evidence's golden check and in the acceptance detail, not failed."""

from __future__ import annotations

import json
import random

from dayzero.report.acceptance import rows
from dayzero.run.cell import RunContext, new_run_id, run_cell
from dayzero.spec.inventory import load_inventory
from dayzero.spec.matrix import load_matrix

from .conftest import REPO
from .stub_cells import stub_card, stub_inventory, stub_matrix


def run(matrix_dir, tmp_path, goldens, reports, *, record=False):
    matrix = load_matrix(matrix_dir)
    inventory = load_inventory(stub_inventory(tmp_path, ttft=0.01), set(matrix.hardware))
    ctx = RunContext(matrix, inventory, reports, goldens, new_run_id(), say=lambda m: None)
    try:
        return run_cell(ctx, matrix.cell("goldie/cpu/low_latency/baseline"), record_goldens=record)
    finally:
        ctx.close()


def test_a_golden_from_another_recipe_is_flagged_in_evidence_and_acceptance(tmp_path, monkeypatch):
    monkeypatch.setenv("DAYZERO_SUITES", str(REPO / "suites"))
    card = stub_card(model="goldie")
    card["recipe"]["port"] = random.randint(20000, 29000)  # ours alone: other runs use the stub too
    card["probes"] = [{"id": "hello", "prompt": "Say hello.", "max_tokens": 6}]
    goldens, reports = tmp_path / "goldens", tmp_path / "reports"
    assert run(stub_matrix(tmp_path, card), tmp_path, goldens, reports, record=True).verdict == "passed"

    same = run(stub_matrix(tmp_path, card), tmp_path, goldens, reports)
    check = next(
        c for c in json.loads(same.evidence_path.read_text())["checks"] if c["name"] == "golden:hello"
    )
    assert check["details"]["golden_provenance"]["engine_version"] == "stub 1.0"
    assert "provenance_differs" not in check["details"]

    card["modes"]["low_latency"]["args"] = ["--itl", "0"]  # another recipe, same answers
    matrix_dir = stub_matrix(tmp_path, card)
    other = run(matrix_dir, tmp_path, goldens, reports)
    doc = json.loads(other.evidence_path.read_text())
    check = next(c for c in doc["checks"] if c["name"] == "golden:hello")
    assert other.verdict == "passed" and check["verdict"] == "passed"
    recorded = check["details"]["golden_provenance"]["recipe_digest"]
    flag = f"golden recorded under recipe {recorded}, this run {doc['recipe']['digest']}"
    assert check["details"]["provenance_differs"] == [flag]
    row = next(r for r in rows(load_matrix(matrix_dir), reports) if r.cell.id == doc["cell"])
    assert row.status == "Verified" and flag in row.detail


def test_a_probe_that_errored_or_missed_is_never_recorded_as_a_golden(tmp_path, monkeypatch):
    """`dayzero golden record` on a server whose answer misses its probe (a 503 from a router whose
    workers were not registered yet did this to a real SGLang routed cell: the golden kept "")
    records nothing and says why."""
    monkeypatch.setenv("DAYZERO_SUITES", str(REPO / "suites"))
    card = stub_card(model="goldie")
    card["recipe"]["port"] = random.randint(20000, 29000)
    card["probes"] = [{"id": "hello", "prompt": "Say hello.", "max_tokens": 6, "expect_contains": ["zebra"]}]
    goldens, reports = tmp_path / "goldens", tmp_path / "reports"
    outcome = run(stub_matrix(tmp_path, card), tmp_path, goldens, reports, record=True)
    assert outcome.verdict == "failed" and "golden not recorded: probe:hello" in outcome.error
    assert not list(goldens.rglob("*.json"))
