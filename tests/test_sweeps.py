"""Sweeps, SLO attainment, goodput, the max-load search and the context fit: pure, on hand-made
records and a stub engine model whose latency grows with load."""

from __future__ import annotations

import statistics

import pytest

from dayzero.checks import FAILED, PASSED
from dayzero.checks.slo import goodput, meets, pooled
from dayzero.checks.sweep import context_fit, growth, max_load, next_load, sweep_check
from dayzero.errors import ConfigError
from dayzero.run.plan import MeasurementPlan
from dayzero.run.sweeps import SweepPlan, walk
from dayzero.spec import sweeps as sweep_spec
from dayzero.spec.card import ModelCard, Protocol
from dayzero.spec.sweeps import Slo, Sweep
from dayzero.spec.workloads import Workload


def rec(send=100.0, ttft=0.1, tokens=11, gap=0.02, error=None, **kw):
    """A streamed request: first chunk `ttft` s after send, then `tokens - 1` chunks `gap` apart."""
    chunks = [ttft + k * gap for k in range(tokens)]
    out = {
        "send": send,
        "first": send + ttft,
        "end": send + chunks[-1],
        "chunks": chunks,
        "usage": {"prompt_tokens": 8, "completion_tokens": tokens},
        "error": error,
    }
    out.update(kw)
    return out


SLO = Slo(ttft_ms=200, tpot_ms=30, target=0.9)


def test_every_request_meets_the_slo():
    records = [rec(send=100.0 + i) for i in range(4)]  # TTFT 100 ms, TPOT 20 ms
    g = goodput(records, SLO)
    assert g["attainment"] == 1.0 and g["met"] == 4
    duration = 3 + 0.1 + 10 * 0.02
    assert g["goodput_rps"] == pytest.approx(4 / duration, rel=1e-3)
    assert g["goodput_tok_s"] == pytest.approx(44 / duration, rel=1e-3)


def test_no_request_meets_the_slo_goodput_is_zero():
    records = [rec(send=100.0 + i, ttft=0.5) for i in range(3)]  # TTFT 500 ms > 200
    g = goodput(records, SLO)
    assert g["attainment"] == 0.0 and g["goodput_rps"] == 0.0 and g["goodput_tok_s"] == 0.0


def test_errored_and_unfinished_requests_are_misses():
    records = [
        rec(),
        rec(send=100.5, error="HTTP 503: busy"),
        {"send": 101.0, "first": None, "end": None, "chunks": [], "error": None},
        rec(send=101.5, gap=0.05),  # TPOT 50 ms > 30
    ]
    g = goodput(records, SLO)
    assert (g["requests"], g["met"], g["attainment"]) == (4, 1, 0.25)
    assert not meets(records[1], SLO) and not meets(records[2], SLO)


def test_tokens_per_user_bound_and_one_token_answers():
    per_user = Slo(user_tok_s=40)  # TPOT 20 ms = 50 tok/s per user: met; 50 ms = 20 tok/s: missed
    assert meets(rec(gap=0.02), per_user) and not meets(rec(gap=0.05), per_user)
    assert meets(rec(tokens=1), Slo(tpot_ms=1))  # no TPOT to exceed


def test_pooled_attainment_over_repetitions_and_median_goodput():
    runs = [[rec(), rec(send=101)], [rec(), rec(send=101, ttft=0.9)], [rec()]]
    p = pooled(runs, SLO)
    assert p["requests"] == 5 and p["met"] == 4 and p["attainment"] == 0.8
    assert p["target"] == 0.9 and p["slo"] == {"ttft_ms": 200, "tpot_ms": 30, "target": 0.9}


# --- the max-load search against a stub whose latency grows with load ------------------------------


def stub_answer(p, capacity: float) -> list[tuple[str, dict]]:
    """What an engine with `capacity` streams/s of headroom answers: every request's TTFT grows with
    the load (queueing), plus a spread over requests so attainment falls off gradually."""
    out = []
    for rep in range(p.runs):
        records = []
        for i, req in enumerate(p.requests(rep)):
            ttft = 0.05 * (1 + p.load / capacity) ** 3 * (0.8 + 0.4 * i / max(1, p.prompts_per_run - 1))
            n = req["max_tokens"]
            records.append(rec(send=100.0 + i * 0.01, ttft=ttft, tokens=n, max_tokens=n, text="x" * n))
        out.append((f"runs/x/{p.phase(rep)}.json", {"records": records, "client": {"processes": 1}}))
    return out


def plan_for(sweep: Sweep) -> SweepPlan:
    workload = Workload("w", "random", {"isl": 8, "osl": 4, "vocab": [10, 100]})
    return SweepPlan(sweep, MeasurementPlan(workload, 1, Protocol(min_prompts=10)))


def test_max_load_search_bisects_to_the_last_load_at_slo():
    sweep = Sweep("c", "concurrency", "w", (1, 2, 4, 16), {}, search=4, slo=Slo(ttft_ms=200, target=0.9))
    measured = []

    def measure(p):
        measured.append(p.load)
        return stub_answer(p, capacity=10.0)

    points, skipped = walk(plan_for(sweep), measure, accelerators=1)
    # TTFT of the 9th request of 10: 57.8 ms x (1 + c/10)^3 <= 200 ms up to c = 5.1
    assert measured[:4] == [1, 2, 4, 16] and measured[4:] == [10, 7, 5, 6]
    assert skipped == []
    found = max_load(points, 0.9)
    assert found == {"load": 5.0, "bounded": True, "target": 0.9}
    check = sweep_check(sweep, points, skipped)
    assert check.verdict == PASSED and "max load at SLO" in check.message
    assert check.details["max_load_at_slo"]["load"] == 5.0


def test_rate_search_halves_the_interval_and_stops_at_its_budget_of_steps():
    sweep = Sweep("q", "rate", "w", (1, 8), {}, search=2, slo=Slo(ttft_ms=200, target=0.9))
    seen = []

    def measure(p):
        seen.append(p.load)
        return stub_answer(p, capacity=10.0)

    points, _ = walk(plan_for(sweep), measure, accelerators=1)
    assert seen == [1, 8, 4.5, 6.25]
    assert max_load(points, 0.9)["load"] == 4.5


def test_a_sweep_stops_when_measure_says_so_and_names_the_rest():
    sweep = Sweep("c", "concurrency", "w", (1, 2, 4), {}, budget_s=10)
    answers = iter([True])

    def measure(p):
        return stub_answer(p, 6.0) if next(answers, False) else None

    points, skipped = walk(plan_for(sweep), measure, accelerators=1)
    assert [p["load"] for p in points] == [1] and skipped == [2, 4]
    assert "2 not reached within the 10 s budget" in sweep_check(sweep, points, skipped).message


def test_unbounded_and_below_the_first_point():
    assert max_load([{"load": 1, "attainment": 1.0}, {"load": 2, "attainment": 0.95}], 0.9) == {
        "load": 2,
        "bounded": False,
        "target": 0.9,
    }
    assert max_load([{"load": 1, "attainment": 0.5}], 0.9)["load"] is None
    s = Sweep("c", "concurrency", "w", (1, 2), {}, search=3, slo=Slo(ttft_ms=1))
    assert next_load(s, [{"load": 1, "attainment": 1.0}, {"load": 2, "attainment": 0.0}]) is None


def test_rate_points_have_seeded_poisson_arrivals():
    sweep = Sweep("q", "rate", "w", (2.0,), {}, num_prompts=400)
    p = plan_for(sweep).point(2.0)
    first, again = p.requests(0), p.requests(0)
    assert [r["at"] for r in first] == [r["at"] for r in again]  # the checker draws the same
    gaps = [b["at"] - a["at"] for a, b in zip(first, first[1:], strict=False)]
    assert statistics.fmean(gaps) == pytest.approx(0.5)  # exactly the rate offered
    assert statistics.pstdev(gaps) == pytest.approx(0.5, rel=0.2)  # and exponential's spread
    few = plan_for(Sweep("q", "rate", "w", (1.0,), {}, num_prompts=10)).point(1.0).requests(0)
    assert few[-1]["at"] == pytest.approx(9.0)  # ten requests at 1 req/s span nine seconds
    assert p.phase(0) == "sweep-q-q2-r0" and p.concurrency == sweep.concurrency


def test_context_points_set_the_input_length_and_draw_new_prompts():
    sweep = Sweep("ctx", "context", "w", (16, 64), {})
    short, long = plan_for(sweep).point(16), plan_for(sweep).point(64)
    assert {r["input_len"] for r in short.requests(0)} == {16}
    assert {r["input_len"] for r in long.requests(0)} == {64}
    assert long.requests(0)[0]["prompt"][:16] != short.requests(0)[0]["prompt"]  # no shared prefix
    assert short.concurrency == 1 and long.phase(0) == "sweep-ctx-isl64-r0"


# --- the context fit ----------------------------------------------------------------------------


def test_growth_tells_linear_quadratic_and_flat_apart():
    xs = [64, 1024, 2048, 4096]
    assert growth(xs, [5 + 0.01 * x for x in xs])["growth"] == "linear"
    assert growth(xs, [5 + 0.001 * x + 2e-6 * x * x for x in xs])["growth"] == "quadratic"
    assert growth(xs, [20.0, 20.1, 20.0, 20.2])["growth"] == "flat"
    fit = growth(xs, [5 + 0.01 * x for x in xs])
    assert fit["linear"] == pytest.approx([5, 0.01], rel=1e-6)


def test_context_fit_reports_the_decode_ratio():
    points = [
        {"load": 64, "median_ttft_ms": 10, "median_itl_ms": 15, "median_tpot_ms": 15},
        {"load": 1024, "median_ttft_ms": 200, "median_itl_ms": 18, "median_tpot_ms": 18},
        {"load": 4096, "median_ttft_ms": 900, "median_itl_ms": 30, "median_tpot_ms": 30},
    ]
    fit = context_fit(points)
    assert fit["decode_ratio"] == 2.0
    assert fit["median_ttft_ms"]["growth"] == "linear" and fit["median_ttft_ms"]["quadratic"] is None


def test_gamed_point_fails_the_sweep():
    sweep = Sweep("c", "concurrency", "w", (1,), {})
    point = {"load": 1, "label": "c1", "compliance": ["mean output 2 tokens, asked 32"]}
    assert sweep_check(sweep, [point], []).verdict == FAILED


# --- the card's sections --------------------------------------------------------------------------


def card_with(raw: dict) -> ModelCard:
    return ModelCard("m", None, raw=raw)


def test_sweeps_are_read_with_their_workload_slo():
    card = card_with(
        {
            "slos": {"w": {"ttft_ms": 500}},
            "sweeps": [{"name": "q", "kind": "rate", "workload": "w", "points": [1, 2.5], "search": 2}],
        }
    )
    (s,) = sweep_spec.parse(card)
    assert s.slo == Slo(ttft_ms=500) and s.points == (1.0, 2.5) and s.label(2.5) == "q2.5"


@pytest.mark.parametrize(
    "entry, field",
    [
        ({"name": "c", "kind": "concurrency", "workload": "w", "points": [4, 2]}, "sweeps[0].points"),
        ({"name": "x", "kind": "context", "workload": "w", "points": [64], "search": 1}, "sweeps[0].search"),
    ],
)
def test_bad_sweeps_name_the_field(entry, field):
    with pytest.raises(ConfigError) as err:
        sweep_spec.parse(card_with({"sweeps": [entry]}))
    assert field in str(err.value)
