"""`dayzero import`: peers' result files held against a cell's floors.

The fixtures use the field names the peers write: sglang.bench_serving appends one JSON object
per run to --output-file (JSON lines); `vllm bench serve --save-result` writes one JSON object.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from dayzero.cli import main
from dayzero.run.importers import SGLANG, VLLM, detect, evaluate, parse, read_runs
from dayzero.spec import card as model_card
from dayzero.spec.matrix import Cell

ROOT = Path(__file__).resolve().parent.parent

SGLANG_RUN = {
    "backend": "sglang-oai",
    "dataset_name": "random",
    "request_rate": float("inf"),
    "max_concurrency": 4,
    "random_input_len": 64,
    "random_output_len": 32,
    "random_range_ratio": 1.0,
    "duration": 10.0,
    "completed": 20,
    "total_input_tokens": 1280,
    "total_output_tokens": 640,
    "request_throughput": 2.0,
    "input_throughput": 128.0,
    "output_throughput": 64.0,
    "total_throughput": 192.0,
    "mean_e2e_latency_ms": 1900.0,
    "median_e2e_latency_ms": 1850.0,
    "std_e2e_latency_ms": 100.0,
    "p99_e2e_latency_ms": 2300.0,
    "mean_ttft_ms": 110.0,
    "median_ttft_ms": 100.0,
    "std_ttft_ms": 9.0,
    "p99_ttft_ms": 150.0,
    "mean_tpot_ms": 55.0,
    "median_tpot_ms": 50.0,
    "std_tpot_ms": 3.0,
    "p99_tpot_ms": 70.0,
    "mean_itl_ms": 50.0,
    "median_itl_ms": 50.0,
    "std_itl_ms": 2.0,
    "p95_itl_ms": 60.0,
    "p99_itl_ms": 65.0,
    "concurrency": 3.8,
    "accept_length": 1.6,
}

VLLM_RUN = {
    "date": "20261202-101500",
    "backend": "vllm",
    "model_id": "HuggingFaceTB/SmolLM2-135M-Instruct",
    "num_prompts": 3,
    "request_rate": "inf",
    "max_concurrency": 1,
    "duration": 3.0,
    "completed": 3,
    "failed": 0,
    "total_input_tokens": 192,
    "total_output_tokens": 12,
    "request_throughput": 1.0,
    "output_throughput": 4.0,
    "total_token_throughput": 68.0,
    "input_lens": [64, 64, 64],
    "output_lens": [4, 4, 4],
    "ttfts": [0.1, 0.1, 0.1],
    "itls": [[0.05, 0.05, 0.05]] * 3,
    "generated_texts": ["a b c d"] * 3,
    "errors": ["", "", ""],
    "mean_ttft_ms": 100.0,
    "median_ttft_ms": 100.0,
    "std_ttft_ms": 0.0,
    "p99_ttft_ms": 100.0,
    "mean_tpot_ms": 50.0,
    "median_tpot_ms": 50.0,
    "p99_tpot_ms": 50.0,
    "mean_itl_ms": 50.0,
    "median_itl_ms": 50.0,
    "p99_itl_ms": 50.0,
    "mean_e2el_ms": 250.0,
    "median_e2el_ms": 250.0,
    "p99_e2el_ms": 250.0,
}


def card():
    return model_card.parse(
        ROOT / "m.yaml",
        {
            "model": "m",
            "engine": {"name": "sglang"},
            "modes": {"x": {"concurrency": 4}},
            "floors": [
                {"metric": "output_throughput", "concurrency": "mode", "min": 50},
                {"metric": "p99_ttft_ms", "concurrency": "mode", "max": 120},
                {"metric": "output_throughput", "concurrency": 1, "min": 1},
            ],
        },
    )


def test_fields_map_onto_our_vocabulary():
    s = parse(SGLANG_RUN)
    assert s.tool == SGLANG and s.concurrency == 4 and s.accept_length == 1.6
    assert s.summary["total_token_throughput"] == 192.0 and s.summary["p99_e2e_latency_ms"] == 2300.0
    assert s.summary["duration_s"] == 10.0 and s.workload["random_input_len"] == 64
    v = parse(VLLM_RUN)
    assert v.tool == VLLM and v.summary["median_e2e_latency_ms"] == 250.0 and v.summary["failed"] == 0
    assert not [n for n in v.notes if "per-request" in n]  # arrays agree with the summary


def test_per_request_arrays_are_checked_against_the_summary():
    doctored = {**VLLM_RUN, "median_ttft_ms": 20.0}
    assert any(
        "median_ttft_ms: file says 20.000, its per-request arrays give 100.000" in n
        for n in parse(doctored).notes
    )


def test_detect_refuses_unknown_files():
    assert detect(SGLANG_RUN) == SGLANG and detect(VLLM_RUN) == VLLM
    with pytest.raises(ValueError):
        detect({"hello": 1})


def test_floors_at_the_runs_concurrency_only():
    cell = Cell("m", "cpu", "x", "baseline")
    checks = evaluate(card(), cell, parse(SGLANG_RUN), accelerators=1)
    assert [c.name for c in checks] == ["floor:output_throughput@default/c4", "floor:p99_ttft_ms@default/c4"]
    assert checks[0].passed and checks[1].verdict == "failed"
    assert "p99_ttft_ms median 150 in 1 run > max 120 (margin -25.0%)" in checks[1].message
    assert checks[1].message.endswith("[sglang.bench_serving]")


def test_jsonl_files_keep_every_run(tmp_path):
    path = tmp_path / "sglang.jsonl"
    path.write_text(
        json.dumps({**SGLANG_RUN, "output_throughput": 1.0}) + "\n" + json.dumps(SGLANG_RUN) + "\n"
    )
    runs = read_runs(path)
    assert len(runs) == 2 and runs[-1]["output_throughput"] == 64.0


def test_cli_import_prints_verdicts_and_exit_status(tmp_path, capsys):
    path = tmp_path / "vllm.json"
    path.write_text(json.dumps({**VLLM_RUN, "output_throughput": 70.0}))
    out = tmp_path / "checks.json"
    cell = "smollm2-135m/cpu+llama.cpp/low_latency/baseline"
    code = main(["--matrix", str(ROOT / "matrix"), "import", str(path), "--cell", cell, "--json", str(out)])
    text = capsys.readouterr().out
    assert "vllm bench serve run, concurrency 1" in text
    assert "PASSED  floor:output_throughput@random-64-32/c1" in text
    assert code == 0 and json.loads(out.read_text())["checks"][0]["verdict"] == "passed"
    path.write_text(json.dumps({**VLLM_RUN, "output_throughput": 2.0}))
    assert main(["--matrix", str(ROOT / "matrix"), "import", str(path), "--cell", cell]) == 1
    assert re.search(  # the bound is the card's, whatever it is today
        r"FAILED  floor:output_throughput@random-64-32/c1: output_throughput median 2 in 1 run < min \d+",
        capsys.readouterr().out,
    )
