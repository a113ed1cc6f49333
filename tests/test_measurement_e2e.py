"""The measurement path on the real llama-server: one ngram_spec cell with a lean protocol.

It uses hosts/local.yaml (the shared lease), so it waits for any other dayzero run on this
machine. Nothing here asserts a speed: the floor is set far above what any CPU reaches, so the
test checks that a floor above reality fails with value, bound and margin in its message.
"""

from __future__ import annotations

import json
import shutil

import pytest
import yaml

from dayzero.run.cell import RunContext, new_run_id, run_cell
from dayzero.spec.inventory import load_inventory
from dayzero.spec.matrix import load_matrix

from .conftest import REPO, needs_engine

pytestmark = [pytest.mark.e2e, needs_engine]

CELL = "smollm2-135m/cpu+llama.cpp/low_latency/ngram_spec"
METRICS = [
    f"{stat}_{metric}"
    for stat in ("mean", "median", "p90", "p99")
    for metric in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_latency_ms")
] + [
    "request_throughput",
    "output_throughput",
    "total_token_throughput",
    "output_throughput_per_accelerator",
    "output_throughput_per_user",
    "median_interactivity",
]


def lean_card(matrix_dir):
    path = matrix_dir / "models" / "smollm2-135m.yaml"
    card = yaml.safe_load(path.read_text())
    card["protocol"] = {"repetitions": 2, "prompts_per_concurrency": 2, "min_prompts": 3}
    card["workloads"]["random-64-32"] = {"from": "random", "isl": 32, "osl": 16, "vocab": [100, 49000]}
    card["workloads"]["chat-code"] = {"max_tokens": 48}
    card["workloads"]["chat-prose"] = {"max_tokens": 48}
    card["floors"] = [
        {"metric": "output_throughput", "workload": "random-64-32", "concurrency": "mode", "min": 100000},
        {"metric": "p99_ttft_ms", "workload": "random-64-32", "concurrency": "mode", "max": 600000},
    ]
    card["accuracy"] = [{"eval": "gsm8k-mini", "threshold": 0.0, "limit": 6, "max_tokens": 12}]
    card["speculative"] = [{"workloads": ["chat-code", "chat-prose"], "num_prompts": 2}]
    path.write_text(yaml.safe_dump(card, sort_keys=False))
    shutil.rmtree(matrix_dir / "floors")  # calibrated for the floors replaced here


def test_ngram_cell_reports_metrics_acceptance_and_an_honest_floor_failure(matrix_dir, tmp_path):
    lean_card(matrix_dir)
    matrix = load_matrix(matrix_dir)
    inventory = load_inventory(REPO / "hosts" / "local.yaml", set(matrix.hardware))
    reports = tmp_path / "reports"
    ctx = RunContext(matrix, inventory, reports, REPO / "suites" / "goldens", new_run_id(), say=print)
    try:
        outcome = run_cell(ctx, matrix.cell(CELL))
    finally:
        ctx.close()
    assert outcome.error == "" and outcome.verdict == "failed"
    checks = {c.name: c for c in outcome.checks}

    floor = checks["floor:output_throughput@random-64-32/c1"]
    assert floor.verdict == "failed" and floor.bound == 100000 and 0 < floor.measured < 100000
    assert f"output_throughput median {floor.measured:g} over 2 runs" in floor.message
    assert "< min 100000 (margin -" in floor.message and "%)" in floor.message
    summaries = floor.details["summaries"]
    assert len(summaries) == 2 and all(s["failed"] == 0 and s["mean_output_tokens"] == 16 for s in summaries)
    for key in METRICS:
        assert all(s.get(key) is not None for s in summaries), key
    assert not floor.details["compliance"] and floor.details["definitions"]["tpot_ms"]
    # a p99 of 2 x 3 requests is no number (issue 41): the floor is inconclusive, never passed
    p99 = checks["floor:p99_ttft_ms@random-64-32/c1"]
    assert p99.verdict == "inconclusive" and "p99 not supported by n=6" in p99.message

    accuracy = checks["accuracy:gsm8k-mini"]
    assert accuracy.passed and accuracy.details["total"] == 6 and accuracy.details["errors"] == 0

    code = checks["speculative:accept_length@chat-code"]
    prose = checks["speculative:accept_length@chat-prose"]
    for check, tag in ((code, "code"), (prose, "prose")):
        assert check.kind == "health" and check.passed and check.details["tag"] == tag
        assert check.measured >= 1.0 and check.details["source"] == "llama.cpp"
        assert check.message.startswith(f"{tag}: ")
    assert code.details["drafts"] > 0  # ngram drafts from code the prompt already contains

    doc = json.loads(outcome.evidence_path.read_text())
    names = {rel.rsplit("/", 1)[-1] for rel in doc["records"]}
    assert {
        "probes.json",
        "perf-random-64-32-c1-r0.json",
        "perf-random-64-32-c1-r1.json",
        "accuracy-gsm8k-mini.json",
        "spec-chat-code.json",
        "spec-chat-prose.json",
    } <= names
    raw = json.loads((reports / next(r for r in doc["records"] if r.endswith("c1-r0.json"))).read_text())
    record = raw["records"][0]
    assert len(record["chunks"]) == record["usage"]["completion_tokens"] == 16
    assert record["first"] == pytest.approx(record["send"] + record["chunks"][0], abs=1e-5)
    assert raw["warmup"]["requests"] >= 1 and raw["procs"][0]["lag_ms"]["n"] > 0
