"""Metric math, saturation, anti-gaming and floors: pure functions over synthetic raw records."""

from __future__ import annotations

import pytest

from dayzero.checks.compliance import compliance_findings, trailing_eos
from dayzero.checks.measurement import Measurement
from dayzero.checks.metrics import DEFINITIONS, percentile, run_summary, saturation
from dayzero.checks.performance import INVALID, check_floor, spread
from dayzero.spec import card as model_card
from dayzero.spec.card import Compliance, Floor, SaturationLimits, floors_for
from dayzero.spec.matrix import Cell


def record(i=0, send=100.0, ttft=0.1, gaps=(0.02,) * 9, tokens=None, max_tokens=10, **kw):
    """A completed streamed request: first chunk `ttft` after send, then chunks `gaps` apart."""
    offsets = [ttft]
    for g in gaps:
        offsets.append(offsets[-1] + g)
    n = len(offsets) if tokens is None else tokens
    rec = {
        "id": f"r{i}",
        "kind": "completion",
        "max_tokens": max_tokens,
        "send": send,
        "first": send + ttft,
        "end": send + offsets[-1] + 0.001,
        "chunks": offsets,
        "text": "x" * len(offsets),
        "finish_reason": "length",
        "usage": {"prompt_tokens": 8, "completion_tokens": n},
        "error": None,
    }
    rec.update(kw)
    return rec


def test_percentile_interpolates_like_numpy():
    values = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
    assert percentile(values, 50) == 5.5
    assert percentile(values, 90) == pytest.approx(9.1)
    assert percentile(values, 99) == pytest.approx(9.91)
    assert percentile([7], 99) == 7


def test_summary_has_the_full_metric_set_with_definitions():
    records = [record(i, send=100.0 + i * 0.5) for i in range(4)]
    s = run_summary(records, accelerators=2, concurrency=4)
    assert s["completed"] == 4 and s["failed"] == 0
    assert s["output_tokens"] == 40 and s["input_tokens"] == 32
    # TTFT 100 ms for every request; e2e 281 ms; TPOT = (e2e - ttft) / (n - 1) = 181 / 9
    assert s["median_ttft_ms"] == pytest.approx(100.0)
    assert s["median_tpot_ms"] == pytest.approx(181 / 9, rel=1e-3)
    assert s["median_itl_ms"] == pytest.approx(20.0)
    assert s["p99_e2e_latency_ms"] == pytest.approx(281.0)
    assert s["median_interactivity"] == pytest.approx(1000 / (181 / 9), rel=1e-3)
    duration = 1.5 + 0.281
    assert s["duration_s"] == pytest.approx(duration, abs=1e-3)
    assert s["output_throughput"] == pytest.approx(40 / duration, rel=1e-3)
    assert s["request_throughput"] == pytest.approx(4 / duration, rel=1e-3)
    assert s["total_token_throughput"] == pytest.approx(72 / duration, rel=1e-3)
    assert s["output_throughput_per_accelerator"] == pytest.approx(s["output_throughput"] / 2, rel=1e-3)
    assert s["output_throughput_per_user"] == pytest.approx(s["output_throughput"] / 4, rel=1e-3)
    for stat in ("mean", "median", "p90", "p99"):
        for metric in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_latency_ms"):
            assert s[f"{stat}_{metric}"] is not None, f"{stat}_{metric}"
    assert {"ttft_ms", "tpot_ms", "itl_ms", "e2e_latency_ms", "output_throughput"} <= set(DEFINITIONS)


def test_failed_requests_are_counted_not_averaged():
    records = [record(0), {**record(1), "error": "HTTP 500: boom"}]
    s = run_summary(records)
    assert s["completed"] == 1 and s["failed"] == 1 and s["output_tokens"] == 10


def test_saturation_by_cpu_or_event_loop_lag():
    calm = {"procs": [{"proc": 0, "cpu_s": 1.0, "wall_s": 10.0, "lag_ms": {"p99": 2.0}}]}
    busy = {"procs": [{"proc": 0, "cpu_s": 9.7, "wall_s": 10.0, "lag_ms": {"p99": 2.0}}]}
    laggy = {"procs": [{"proc": 1, "cpu_s": 1.0, "wall_s": 10.0, "lag_ms": {"p99": 180.0}}]}
    assert saturation(calm) == []
    assert "CPU 97%" in saturation(busy)[0]
    assert "event-loop lag p99 180.0 ms" in saturation(laggy)[0]
    assert saturation(laggy, SaturationLimits(lag_p99_ms=500)) == []


def test_compliance_catches_short_outputs_inflated_counts_and_eos_runs():
    rules = Compliance()
    honest = [record(i) for i in range(4)]
    assert compliance_findings(honest, exact_output=True, rules=rules) == []
    short = [record(i, gaps=(0.02,) * 4, max_tokens=10) for i in range(4)]  # 5 of 10 tokens
    assert "mean output 5.0 tokens vs 10.0 requested" in compliance_findings(short, True, rules)[0]
    assert compliance_findings(short, False, rules) == []  # chat: max_tokens is only a cap
    inflated = [record(i, tokens=20, max_tokens=20) for i in range(4)]  # 20 claimed, 10 streamed
    assert any(
        "reports 80 output tokens but streamed only 40" in f
        for f in compliance_findings(inflated, True, rules)
    )
    eos = [record(0, text="hello<|im_end|><|im_end|>")]
    assert any("more than one EOS" in f for f in compliance_findings(eos, False, rules))
    assert trailing_eos("answer</s>", rules.eos) == 1
    wrong_isl = [record(0, input_len=64)]  # usage says 8 prompt tokens
    assert any("input length off" in f for f in compliance_findings(wrong_isl, True, rules))


def card(floors):
    data = {
        "model": "m",
        "engine": {"name": "llama.cpp"},
        "modes": {"low_latency": {"concurrency": 1}, "high_throughput": {"concurrency": 4}},
        "floors": floors,
    }
    return model_card.parse(None, data)


def test_floors_expand_sweeps_and_normalise():
    c = Cell("m", "cpu", "high_throughput", "baseline")
    floors = floors_for(
        card(
            [
                {"metric": "output_throughput", "concurrency": [1, "mode"], "min": 10, "workload": "w"},
                {"metric": "p99_ttft_ms", "concurrency": "mode", "max": 2000},
                {"metric": "output_throughput", "concurrency": 8, "min": 5, "normalise": "per_accelerator"},
                {"when": {"mode": "low_latency"}, "metric": "output_throughput", "concurrency": 1, "min": 1},
            ]
        ),
        c,
    )
    assert [f.name for f in floors] == [
        "floor:output_throughput@w/c1",
        "floor:output_throughput@w/c4",
        "floor:p99_ttft_ms@default/c4",
        "floor:output_throughput_per_accelerator@default/c8",
    ]
    assert floors[2].direction == "max" and floors[2].bound == 2000


def m(values, key="output_throughput", **kw):
    return Measurement("w", 4, tuple({key: v, "failed": 0} for v in values), **kw)


def test_floor_above_reality_fails_with_value_bound_margin_and_spread():
    result = check_floor(Floor("output_throughput", 200.0, 4, workload="w"), m([101.0, 110.0, 104.0]))
    assert result.verdict == "failed"
    assert result.measured == 104.0 and result.bound == 200.0
    assert "output_throughput median 104 over 3 runs (spread 101..110, 8.7%) < min 200 (margin -48.0%)" in (
        result.message
    )


def test_floor_met_and_latency_bound():
    ok = check_floor(Floor("output_throughput", 50.0, 4, workload="w"), m([101.0, 110.0, 104.0]))
    assert ok.passed and "(margin +108.0%)" in ok.message
    lat = check_floor(
        Floor("p99_ttft_ms", 100.0, 4, direction="max", workload="w"), m([120.0], "p99_ttft_ms")
    )
    assert (
        lat.verdict == "failed" and "p99_ttft_ms median 120 in 1 run > max 100 (margin -20.0%)" in lat.message
    )


def test_failed_requests_fail_a_floor_even_when_fast():
    meas = Measurement("w", 4, ({"output_throughput": 500.0, "failed": 2},))
    result = check_floor(Floor("output_throughput", 50.0, 4, workload="w"), meas)
    assert result.verdict == "failed" and "2 request(s) failed" in result.message


def test_anti_gaming_findings_fail_the_floor():
    meas = m([500.0], compliance=("mean output 4.0 tokens vs 16.0 requested (-75%, tolerance +-10%)",))
    result = check_floor(Floor("output_throughput", 50.0, 4, workload="w"), meas)
    assert result.verdict == "failed" and "anti-gaming: mean output 4.0 tokens" in result.message
    assert result.details["compliance"] == list(meas.compliance)


def test_saturated_measurement_is_invalid_not_low():
    meas = m([3.0], invalid=("run 1: client process 0 saturated: CPU 99% of a core >= 90%",))
    result = check_floor(Floor("output_throughput", 50.0, 4, workload="w"), meas)
    assert result.verdict == INVALID and result.measured is None
    assert "not compared with the floor" in result.message and "CPU 99%" in result.message


def test_plain_summary_is_one_run():
    result = check_floor(Floor("output_throughput", 50.0, 1), {"output_throughput": 60.0, "failed": 0})
    assert result.passed and "in 1 run" in result.message


def test_spread_keeps_every_value():
    assert spread([10.0, 12.0, 11.0]) == {
        "median": 11.0,
        "min": 10.0,
        "max": 12.0,
        "spread_pct": 18.2,
        "values": [10.0, 12.0, 11.0],
    }


def test_a_non_compliant_server_fails_even_when_the_client_was_saturated():
    """Short outputs are counted, not timed: a busy client does not turn them into 'invalid'."""
    floor = Floor("output_throughput", 1.0, 2, workload="r")
    busy = ("run 1: client process 0 saturated: CPU 100% of a core >= 90%",)
    fast = ({"output_throughput": 900.0},)
    short = Measurement("r", 2, fast, invalid=busy, compliance=("mean output 4.0",))
    result = check_floor(floor, short)
    assert result.verdict == "failed"
    assert "anti-gaming: mean output 4.0" in result.message and "timings not compared" in result.message
    only_busy = Measurement("r", 2, fast, invalid=busy)
    assert check_floor(floor, only_busy).verdict == "invalid"
