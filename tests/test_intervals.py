"""Intervals on every figure (issue 41, items 1-2): the order-statistic bound of a percentile, the
bootstrap of a rate over repetitions and requests, and a floor judged on the interval."""

from __future__ import annotations

import math
import random
import statistics
from pathlib import Path

from dayzero.checks import FAILED, INCONCLUSIVE, PASSED, CheckResult
from dayzero.checks.intervals import (
    judge,
    mean_interval,
    percentile_interval,
    proportion_interval,
    quantile_ranks,
    rate_interval,
)
from dayzero.checks.measurement import aggregate
from dayzero.checks.performance import INVALID, check_floor
from dayzero.lab.deploy import run_client
from dayzero.lab.transport.local import LocalTransport
from dayzero.run.phases import Endpoint, collect, judged_for_contention, until_conclusive
from dayzero.run.plan import MeasurementPlan
from dayzero.spec.card import Compliance, Floor, Protocol, SaturationLimits
from dayzero.spec.inventory import Host
from dayzero.spec.workloads import load_workload
from devlab.stub import StubConfig, StubServer


def test_p99_of_16_requests_is_not_supported_but_the_median_is():
    values = [float(v) for v in range(16)]
    p99 = percentile_interval(values, 99)
    assert not p99.supported and p99.why == "p99 not supported by n=16"
    median = percentile_interval(values, 50)
    assert median.supported and median.lo <= 7.5 <= median.hi


def test_order_statistic_ranks_match_the_binomial_table():
    # the classic distribution-free 95% interval of a median of 20: ranks 6 and 15 (each tail <= 2.5%)
    assert quantile_ranks(20, 0.5) == (6, 15)
    # a p90 needs 36 samples before its largest bounds it at 97.5% (0.9**35 = 0.0250 > 0.025)
    assert quantile_ranks(35, 0.9)[1] is None and quantile_ranks(36, 0.9)[1] == 36


def test_percentile_interval_covers_the_true_quantile_about_95_percent():
    rng = random.Random(1)
    covered = 0
    for _ in range(400):
        sample = [rng.expovariate(1.0) for _ in range(60)]
        iv = percentile_interval(sample, 50)
        covered += iv.lo <= 0.6931 <= iv.hi
    assert 0.93 * 400 <= covered <= 0.995 * 400


def _runs(rate_per_s: float, n: int, jitter: float, seed: int) -> list[list[tuple[float, float]]]:
    rng = random.Random(seed)
    one = 32.0 / rate_per_s
    return [[(32.0, one * (1 + rng.uniform(-jitter, jitter))) for _ in range(n)] for _ in range(3)]


def test_rate_interval_is_deterministic_and_narrows_with_steadier_requests():
    noisy, steady = _runs(60, 16, 0.5, 2), _runs(60, 16, 0.02, 2)
    a = rate_interval([58.0, 60.0, 61.0], noisy)
    assert a == rate_interval([58.0, 60.0, 61.0], noisy)  # the checker recomputes the same bound
    b = rate_interval([58.0, 60.0, 61.0], steady)
    assert a.lo < b.lo <= 60.0 <= b.hi < a.hi
    assert a.n == 48 and a.runs == 3


def test_a_run_with_no_completed_request_leaves_the_rate_unsupported():
    iv = rate_interval([60.0, 0.0], [[(32.0, 0.5)], []])
    assert not iv.supported and "n=1" in iv.why


def test_proportion_and_mean_intervals():
    acc = proportion_interval(5, 10)
    assert acc.lo < 0.5 < acc.hi and round(acc.lo, 3) == 0.237
    assert not proportion_interval(0, 0).supported
    assert proportion_interval(5, 4).why == "5 of 4 is no proportion"
    m = mean_interval([[1.0, 2.0, 3.0], [2.0, 2.0, 2.0]])
    assert m.lo <= 2.0 <= m.hi


def test_judge_is_three_valued_both_directions():
    iv = percentile_interval([float(v) for v in range(100)], 50)  # roughly [39, 59]
    assert judge(iv, 30, "min") == PASSED
    assert judge(iv, 70, "min") == FAILED
    assert judge(iv, 50, "min") == INCONCLUSIVE
    assert judge(iv, 70, "max") == PASSED and judge(iv, 30, "max") == FAILED
    assert judge(percentile_interval([1.0] * 16, 99), 0.5, "min") == INCONCLUSIVE
    assert judge(None, 1, "min") is None


def _answer(tpot_s: float, n: int, seed: int) -> dict:
    rng = random.Random(seed)
    records, t = [], 1.0
    for i in range(n):
        step = tpot_s * (1 + rng.uniform(-0.3, 0.3))
        first = t + 0.05
        end = first + step * 31
        chunks = [first + step * k for k in range(32)]
        records.append(
            {"id": i, "send": t, "first": first, "end": end, "chunks": chunks}
            | {"usage": {"completion_tokens": 32}}
        )
        t = end
    return {"records": records, "procs": []}


def _measure(tpot_s: float, n: int = 16) -> object:
    answers = [(f"r{k}.json", _answer(tpot_s, n, k)) for k in range(3)]
    return aggregate(
        "random-64-32",
        1,
        answers,
        accelerators=1,
        exact_output=False,
        limits=SaturationLimits(),
        rules=Compliance(),
        client={},
    )


def test_a_floor_is_passed_failed_or_inconclusive_on_its_interval():
    m = _measure(0.02)  # ~50 tok/s with +-30% per request
    iv = m.intervals["output_throughput"]
    assert iv.lo < m.values("output_throughput")[0] < iv.hi
    passed = check_floor(Floor("output_throughput", iv.lo * 0.9, 1, workload="random-64-32"), m)
    failed = check_floor(Floor("output_throughput", iv.hi * 1.1, 1, workload="random-64-32"), m)
    middle = check_floor(Floor("output_throughput", (iv.lo + iv.hi) / 2, 1, workload="random-64-32"), m)
    assert (passed.verdict, failed.verdict, middle.verdict) == (PASSED, FAILED, INCONCLUSIVE)
    assert "inconclusive" in middle.message and middle.details["interval"]["lo"] == round(iv.lo, 4)
    assert set(middle.details["intervals"]) >= {"median_tpot_ms", "p99_ttft_ms", "output_throughput_per_user"}


def test_a_p99_floor_on_16_requests_is_inconclusive_never_passed():
    m = _measure(0.02, n=5)  # 15 requests pooled over 3 runs: no p99
    result = check_floor(Floor("p99_tpot_ms", 10_000, 1, direction="max", workload="random-64-32"), m)
    assert result.verdict == INCONCLUSIVE and "p99 not supported by n=15" in result.message


def test_a_number_measured_on_a_contended_host_is_marked_and_never_a_verdict():
    """Issue 41 item 4: every check of a contended phase carries `details.contended`; a floor
    missed or inconclusive then is invalid (the lab's), one passed stays passed but marked."""
    ep = Endpoint("http://x", client=lambda spec, t: {}, keep=lambda phase, answer: "")
    ep.contended["perf-run2"] = "h1: foreign load 1.7 of 2 cores"
    phases = ["perf-run1", "perf-run2"]
    for verdict, judged in ((PASSED, PASSED), (FAILED, INVALID), (INCONCLUSIVE, INVALID)):
        out = judged_for_contention(CheckResult("floor:x", "performance", verdict, "m"), phases, ep)
        assert out.verdict == judged
        assert out.details["contended"] == {"perf-run2": "h1: foreign load 1.7 of 2 cores"}
    quiet = judged_for_contention(CheckResult("floor:x", "performance", FAILED, "m"), ["perf-run1"], ep)
    assert quiet.verdict == FAILED and "contended" not in quiet.details


def test_a_phase_is_extended_while_a_floor_is_inconclusive_within_the_budget_only():
    """Issue 41 item 2: more repetitions, one at a time, while a floor's interval straddles its
    bound, never more than the protocol's `extra_repetitions`; none where the floor is clear."""
    host = Host(name="local", address="127.0.0.1", hardware="cpu", transport="local")
    workloads = Path(__file__).resolve().parent.parent / "suites" / "workloads"
    w = load_workload(workloads, "r", {"from": "random", "isl": 8, "osl": 8})
    kept: dict = {}

    def keep(phase, answer):
        kept[phase] = answer
        return f"records/{phase}.json"

    ep = Endpoint(
        url="",
        client=lambda spec, timeout: run_client(LocalTransport(host), spec, timeout=timeout),
        keep=keep,
        say=lambda line: None,
    )
    protocol = Protocol(repetitions=1, min_prompts=8, extra_repetitions=2)
    with StubServer(StubConfig(itl=0.002)) as stub:
        ep.url = stub.url
        clear = MeasurementPlan(w, 1, protocol, floors=(Floor("output_throughput", 0.01, 1, workload="r"),))
        answers, _, _ = until_conclusive(ep, clear, 1, collect(ep, clear, 1))
        assert len(answers) == 1 and list(kept) == ["perf-r-c1-r0"]
        kept.clear()
        # a p99 of 8 requests a run is never supported: inconclusive however many runs the budget allows
        never = MeasurementPlan(
            w, 1, protocol, floors=(Floor("p99_tpot_ms", 1e6, 1, direction="max", workload="r"),)
        )
        answers, _, _ = until_conclusive(ep, never, 1, collect(ep, never, 1))
    assert len(answers) == 3 and list(kept) == ["perf-r-c1-r0", "perf-r-c1-r1", "perf-r-c1-r2"]
    assert "warmup" in kept["perf-r-c1-r0"] and "warmup" not in kept["perf-r-c1-r2"]


def test_the_throughput_picture_draws_each_interval_as_an_error_bar():
    from dayzero.report import plots

    svg = plots.throughput_chart([("out", 1, 60.0, (55.0, 64.0)), ("out", 4, 100.0, None), ("x", 1, 50.0)])
    assert svg.count('class="error-bar"') == 1 and 'data-series="out"' in svg
    assert "95% interval" in svg


def test_slo_attainment_and_goodput_carry_their_intervals():
    from dayzero.checks.slo import pooled
    from dayzero.spec.sweeps import Slo

    runs = [_answer(0.02, 16, k)["records"] for k in range(3)]
    got = pooled(runs, Slo(tpot_ms=20.0))  # about half the requests meet it
    att, good = got["slo_intervals"]["attainment"], got["slo_intervals"]["goodput_tok_s"]
    assert att["n"] == 48 and att["lo"] < got["attainment"] < att["hi"]
    assert good["runs"] == 3 and good["lo"] <= got["goodput_tok_s"] <= good["hi"]


def test_the_allure_story_lists_each_figure_with_its_interval_and_contention():
    from dayzero.report.allure_cell import intervals_text, throughput_points

    iv = {"lo": 40.0, "hi": 44.0, "n": 48, "runs": 3, "method": "bootstrap"}
    no_p99 = {"lo": None, "hi": None, "n": 16, "runs": 1, "why": "p99 not supported by n=16"}
    busy = {"perf-w-c1-r1": "h1: busy"}
    checks = [
        {"name": "floor:output_throughput@w/c1", "kind": "performance", "verdict": "passed", "message": "",
         "measured": 42.0, "bound": 20.0, "family": "floor",
         "details": {"interval": iv, "concurrency": 1, "workload": "w", "contended": busy}},
        {"name": "floor:p99_ttft_ms@w/c1", "kind": "performance", "verdict": "inconclusive", "message": "",
         "measured": 90.0, "bound": 100.0, "family": "floor", "details": {"interval": no_p99}},
    ]  # fmt: skip
    text = intervals_text({"checks": checks})
    assert "[40, 44] bootstrap n=48 runs=3 -> PASSED" in text and "CONTENDED: perf-w-c1-r1: h1: busy" in text
    assert "p99 not supported by n=16 -> INCONCLUSIVE" in text
    assert throughput_points({"checks": checks}) == [
        ("output_throughput w (contended)", 1.0, 42.0, (40.0, 44.0))
    ]


def _reference_rate_interval(measured, requests, seed=41):
    """The bootstrap as first shipped, through random.randrange: bundles signed since then carry
    its bounds, so the fast draws must give the very same ones."""
    rng = random.Random(seed)
    base = [sum(c for c, _ in r) / max(sum(t for _, t in r), 1e-12) for r in requests]
    out = []
    for _ in range(1000):
        values = []
        for i in [rng.randrange(len(requests)) for _ in requests]:
            items = [requests[i][rng.randrange(len(requests[i]))] for _ in requests[i]]
            rate = sum(c for c, _ in items) / max(sum(t for _, t in items), 1e-12)
            values.append(measured[i] * rate / base[i])
        out.append(statistics.median(values))
    out.sort()
    return out[int(0.025 * 999)], out[math.ceil(0.975 * 999)]


def test_the_fast_bootstrap_draws_randranges_very_stream():
    rng = random.Random(3)
    for runs, size in [(1, 1), (1, 16), (3, 20), (4, 33), (5, 7)]:  # 1 and powers of two included
        requests = [
            [(float(rng.randint(1, 64)), rng.uniform(0.1, 3.0)) for _ in range(size)] for _ in range(runs)
        ]
        measured = [rng.uniform(10, 100) for _ in range(runs)]
        got = rate_interval(measured, requests)
        assert (got.lo, got.hi) == _reference_rate_interval(measured, requests), (runs, size)


def test_the_fast_bootstrap_of_a_mean_draws_randranges_very_stream():
    rng = random.Random(4)
    runs = [[rng.uniform(0, 5) for _ in range(rng.randint(1, 30))] for _ in range(3)]
    draw, out = random.Random(41), []
    for _ in range(1000):
        pooled = []
        for _ in runs:
            items = runs[draw.randrange(len(runs))]
            pooled += [items[draw.randrange(len(items))] for _ in items]
        out.append(statistics.fmean(pooled))
    out.sort()
    got = mean_interval(runs)
    assert (got.lo, got.hi) == (out[int(0.025 * 999)], out[math.ceil(0.975 * 999)])
