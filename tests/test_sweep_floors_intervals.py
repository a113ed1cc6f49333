"""A sweep's floor judged on the interval of its points' own data (issue 41, item 2): passed where
the interval clears the bound, failed where it misses it, inconclusive in between; the points an
inconclusive floor hinges on measured again within the protocol's `extra_repetitions`, and the
checker's walk over the bundle's records coming to the same verdict."""

from __future__ import annotations

import contextlib
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

from dayzero.checks import FAILED, INCONCLUSIVE, PASSED
from dayzero.checks.sweep import sweep_check, sweep_floor_check
from dayzero.lab.deploy import run_client
from dayzero.lab.transport.local import LocalTransport
from dayzero.report import benchcard
from dayzero.report.acceptance import interval_flags
from dayzero.report.allure_cell import intervals_text
from dayzero.run import records
from dayzero.run.phases import Endpoint, Live
from dayzero.run.plan import MeasurementPlan
from dayzero.run.plans import Planned
from dayzero.run.plans import sweeps as sweeps_kind
from dayzero.run.sweeps import SweepPlan
from dayzero.spec.card import Protocol
from dayzero.spec.inventory import Host
from dayzero.spec.sweeps import Slo, Sweep, SweepFloor
from dayzero.spec.workloads import Workload, load_workload
from dayzero.submission import recompute
from dayzero.submission.cellview import CellView
from devlab.stub import StubConfig, StubServer

from .test_sweeps import rec, stub_answer

SLO = Slo(ttft_ms=200, target=0.9)
CELL = "m/cpu/a/b"
LOAD_FLOOR = "floor:max_load_at_slo@sweep:c"
RATIO_FLOOR = "floor:decode_ratio@sweep:x"


def conc_plan(prompts: int, bound: float = 4.0, extra: int = 0) -> SweepPlan:
    """The stub engine's concurrency sweep: every request at c1-c4 meets the SLO, hardly any at
    c7 and above (`test_sweeps.stub_answer`, capacity 10); the search measures c10, then c7."""
    floor = SweepFloor("max_load_at_slo", bound, "min")
    sweep = Sweep(
        "c", "concurrency", "w", (1, 2, 4, 16), {}, num_prompts=prompts, search=2, slo=SLO, floor=floor
    )
    workload = Workload("w", "random", {"isl": 8, "osl": 4, "vocab": [10, 100]})
    return SweepPlan(sweep, MeasurementPlan(workload, 1, Protocol(min_prompts=10, extra_repetitions=extra)))


def ctx_answer(p) -> list[tuple[str, dict]]:
    """One request a repetition, decode time per token growing with the input (x4.8 from 64 to
    4096 tokens), each repetition 2% slower than the one before."""
    out = []
    for rep in range(p.runs):
        gap = 0.01 * (1 + p.load / 1000) * (1 + 0.02 * rep)
        records_ = [rec(send=100.0, ttft=0.05, tokens=16, gap=gap, max_tokens=16, text="x" * 16)]
        out.append((f"runs/x/{p.phase(rep)}.json", {"records": records_, "client": {"processes": 1}}))
    return out


def ctx_plan(bound: float, extra: int = 0) -> SweepPlan:
    floor = SweepFloor("decode_ratio", bound, "max")
    sweep = Sweep("x", "context", "w", (64, 1024, 4096), {}, num_prompts=1, floor=floor)
    workload = Workload("w", "random", {"isl": 8, "osl": 16, "vocab": [10, 100]})
    return SweepPlan(sweep, MeasurementPlan(workload, 1, Protocol(min_prompts=1, extra_repetitions=extra)))


def live(sp: SweepPlan, answer=lambda p: stub_answer(p, capacity=10.0), extensions: int = 99):
    """The plan judged as the live run judges it, over a runner that answers every point and
    refuses an extra repetition after `extensions` of them (its time budget spent)."""
    answers: dict[str, tuple[str, dict]] = {}
    asked: list[tuple[float, int]] = []

    def measure(p):
        extra = [a for a in asked if a[1] > p.sweep.repetitions]
        if p.runs > p.sweep.repetitions and len(extra) >= extensions:
            return None
        asked.append((p.load, p.runs))
        got = answer(p)
        answers.update({p.phase(rep): a for rep, a in enumerate(got)})
        return got

    src = SimpleNamespace(
        step=lambda title: contextlib.nullcontext(),
        sweep=lambda plan: (measure, lambda rel: None),
        accelerators=1,
        contended=lambda result, phases: result,
        say=lambda text: None,
    )
    return {c.name: c for c in Planned(sweeps_kind.KIND, sp).judge(src)}, answers, asked


def recomputed(sp: SweepPlan, answers: dict) -> dict:
    """The checker's recomputation from the records the run kept (`submission.cellview.Recorded`)."""
    view = SimpleNamespace(
        doc={"run": {"id": "x"}, "hosts": [{"accelerators": 1}], "checks": []},
        cell=SimpleNamespace(id=CELL, mode="a"),
        card=SimpleNamespace(raw={"modes": {"a": {}}}),
        metrics={},
        plans=(Planned(sweeps_kind.KIND, sp),),
        answer=lambda phase: answers[phase],
    )
    view.doc["records"] = [records.path("x", CELL, phase) for phase in answers]
    return {e.name: e.recompute() for e in recompute.expected_checks(view)}


def both(sp: SweepPlan, **kw):
    checks, answers, asked = live(sp, **kw)
    again = recomputed(sp, answers)
    assert set(again) == set(checks)
    for name, check in checks.items():
        assert again[name] == check, name  # the checker's verdict, message and interval are the run's
    return checks, asked


# --- the max load at SLO, on each point's attainment interval ---------------------------------------


def test_max_load_clearing_its_bound_passes_with_its_interval():
    checks, asked = both(conc_plan(prompts=40, bound=4))
    floor = checks[LOAD_FLOOR]
    assert floor.verdict == PASSED and floor.measured == 4 and floor.family == "floor"
    iv = floor.details["interval"]
    assert iv["lo"] == 4 and iv["hi"] == 4 and iv["method"] == "wilson per point" and iv["n"] == 6 * 40
    assert all(runs == 1 for _, runs in asked)  # settled: nothing measured again


def test_max_load_missing_its_bound_fails():
    checks, _ = both(conc_plan(prompts=40, bound=8))
    floor = checks[LOAD_FLOOR]
    assert floor.verdict == FAILED and floor.details["interval"]["hi"] < 8
    assert "max load at SLO 4 < 8 (c7 missed the target)" in floor.message


def test_max_load_straddling_its_bound_is_inconclusive_never_passed():
    """10 of 10 requests met at c1-c4 is no 90% attainment on its interval (Wilson 72-100%):
    the load at the floor may or may not hold the target."""
    checks, asked = both(conc_plan(prompts=10, bound=4))
    floor = checks[LOAD_FLOOR]
    assert floor.verdict == INCONCLUSIVE and floor.measured == 4
    assert floor.details["interval"]["lo"] == 0 and floor.details["interval"]["hi"] == 4
    assert floor.details["unsettled"] == [1.0, 2.0, 4.0]
    assert "inconclusive: attainment at c1, c2, c4 straddles the 90% target" in floor.message
    assert "interval [0, 4]" in floor.message
    assert all(runs == 1 for _, runs in asked)  # no budget of extra repetitions: none taken


def test_an_inconclusive_point_is_measured_again_until_it_settles():
    """Each extra repetition adds 10 requests to c1, c2 and c4: 40 of 40 met clears 90%."""
    checks, asked = both(conc_plan(prompts=10, bound=4, extra=3))
    floor = checks[LOAD_FLOOR]
    assert floor.verdict == PASSED and floor.details["interval"]["lo"] == 4
    assert [a for a in asked if a[1] > 1] == [(load, runs) for runs in (2, 3, 4) for load in (1, 2, 4)]
    points = {p["load"]: p for p in checks["sweep:c@w"].details["points"]}
    assert (
        len(points[4.0]["records"]) == 4
        and points[4.0]["requests"] == 40
        and len(points[7.0]["records"]) == 1
    )


def test_an_extension_the_budget_cuts_stays_inconclusive():
    """The runner's budget ran out during the second extra repetition: the floor is reported
    inconclusive, and the checker, finding no records of it, stops where the run stopped."""
    checks, asked = both(conc_plan(prompts=10, bound=4, extra=3), extensions=4)
    assert checks[LOAD_FLOOR].verdict == INCONCLUSIVE
    points = {p["load"]: len(p["records"]) for p in checks["sweep:c@w"].details["points"]}
    assert points == {1.0: 3, 2.0: 2, 4.0: 2, 7.0: 1, 10.0: 1, 16.0: 1}


# --- the context sweep's decode-time ratio, on its ends' TPOT intervals ------------------------------


def test_decode_ratio_of_single_requests_is_inconclusive_then_settled_by_repetitions():
    """The card's context sweep measures one request a point: its median decode time has no
    interval (n=1), so no ratio is judged; six requests at each end bound both medians."""
    checks, asked = both(ctx_plan(bound=6))
    floor = checks[RATIO_FLOOR]
    assert floor.verdict == INCONCLUSIVE and "not supported by n=1" in floor.message
    assert floor.details["unsettled"] == [64.0, 4096.0]
    checks, asked = both(ctx_plan(bound=6, extra=5))
    floor = checks[RATIO_FLOOR]
    assert floor.verdict == PASSED and [a for a in asked if a[0] == 1024] == [(1024, 1)]
    iv = floor.details["interval"]
    assert iv["lo"] <= floor.measured <= iv["hi"] <= 6 and iv["n"] == 12 and iv["confidence"] == 0.9


def ctx_rows(first: tuple[float, float, float], last: tuple[float, float, float], n: int = 8) -> list[dict]:
    def row(load, tpot, lo, hi):
        iv = {"lo": lo, "hi": hi, "n": n, "runs": 1, "method": "order-statistic", "confidence": 0.95}
        return {"load": load, "label": f"isl{load}", "median_ttft_ms": load / 10, "median_itl_ms": tpot,
                "median_tpot_ms": tpot, "intervals": {"median_tpot_ms": iv}}  # fmt: skip

    return [row(64, *first), row(4096, *last)]


def ratio_floor(rows: list[dict], bound: float):
    sweep = Sweep("x", "context", "w", (64, 4096), {}, floor=SweepFloor("decode_ratio", bound, "max"))
    return sweep_floor_check(sweep, sweep_check(sweep, rows, []))


def test_decode_ratio_clearing_missing_and_straddling_its_bound():
    rows = ctx_rows((10, 9, 11), (25, 24, 26))  # ratio 2.5, interval [24/11, 26/9] = [2.18, 2.89]
    clears, misses, straddles = (ratio_floor(rows, b) for b in (3, 2, 2.5))
    assert clears.verdict == PASSED and clears.details["interval"]["hi"] == round(26 / 9, 4)
    assert misses.verdict == FAILED and misses.details["interval"]["lo"] == round(24 / 11, 4)
    assert straddles.verdict == INCONCLUSIVE and straddles.measured == 2.5
    assert "decode_ratio 2.5 <= 2.5, interval [2.18182, 2.88889] (90%, n=16)" in straddles.message
    assert "inconclusive: the interval straddles the bound" in straddles.message
    assert "interval" not in clears.message  # said only where it decides otherwise, as the floors do


def test_rows_without_intervals_are_judged_on_their_values_as_before():
    """Evidence written before intervals: the floor is what it was (and says no interval)."""
    rows = [{k: v for k, v in r.items() if k != "intervals"} for r in ctx_rows((10, 9, 11), (25, 24, 26))]
    check = ratio_floor(rows, 2.5)
    assert check.verdict == PASSED and "interval" not in check.details
    assert replace(check, details={}).message.endswith("decode_ratio 2.5 <= 2.5")


# --- shown as the floors' intervals are ------------------------------------------------------------


def test_the_card_the_allure_story_and_the_acceptance_detail_show_the_interval():
    checks, _, _ = live(conc_plan(prompts=10, bound=4))
    doc = {
        "cell": CELL,
        "mode": "a",
        "strategy": "b",
        "checks": [checks[name].to_json() for name in ("sweep:c@w", LOAD_FLOOR)],
    }
    _, (summary,) = benchcard.points_of(doc, "e.json", None)
    assert summary["floor"]["verdict"] == INCONCLUSIVE and summary["floor"]["interval"]["hi"] == 4
    card = benchcard.BenchCard("m", "cpu", "M", (), (summary,))
    assert "floor max_load_at_slo >= 4 [0, 4] (n=60): inconclusive (" in benchcard._summary_lines(card)[0]
    story = intervals_text(doc)
    assert f"{LOAD_FLOOR}: 4 [0, 4] wilson per point n=60 runs=6 -> INCONCLUSIVE (bound 4)" in story
    assert "max_load_at_slo 4 [0, 4] (n=60)" in interval_flags(doc)[0]


def test_the_checker_reads_every_extra_repetition_for_its_input_and_gaming_checks():
    """`CellView.loads` (what `submission.inputs` and `antigaming` regenerate requests for) holds
    each point's extra repetitions where the evidence names them."""
    sp = conc_plan(prompts=10, bound=4, extra=3)
    checks, answers, _ = live(sp)
    doc = {
        "run": {"id": "x"},
        "checks": [checks["sweep:c@w"].to_json()],
        "records": [records.path("x", CELL, phase) for phase in answers],
    }
    view = CellView("e.json", doc, SimpleNamespace(id=CELL), None, {}, Path("."), Path("."))
    view.__dict__["plans"] = (Planned(sweeps_kind.KIND, sp),)  # the cached plans of this sweep alone
    runs = {p.load: p.runs for p in view.loads}
    assert runs == {1.0: 4, 2.0: 4, 4.0: 4, 7.0: 1, 10.0: 1, 16.0: 1}
    assert {ph for p in view.loads for ph in p.phases()} == set(answers)


def test_the_live_runner_measures_only_the_repetitions_a_point_lacks():
    """`run.phases.Live.sweep`, on the stub engine over the real client: a point asked for again
    with more repetitions sends only the new ones (no second warm-up), and answers all of them."""
    host = Host(name="local", address="127.0.0.1", hardware="cpu", transport="local")
    workloads = Path(__file__).resolve().parent.parent / "suites" / "workloads"
    w = load_workload(workloads, "r", {"from": "random", "isl": 8, "osl": 8})
    sweep = Sweep(
        "c",
        "concurrency",
        "r",
        (1,),
        {},
        num_prompts=4,
        slo=SLO,
        floor=SweepFloor("max_load_at_slo", 1, "min"),
    )
    sp = SweepPlan(sweep, MeasurementPlan(w, 1, Protocol(repetitions=1, min_prompts=4, extra_repetitions=2)))
    kept: dict = {}

    def keep(phase, answer):
        kept.setdefault(phase, []).append(answer)
        return f"records/{phase}.json"

    def client(spec: dict, timeout: float) -> dict:  # the host client, run on this machine
        return run_client(LocalTransport(host), spec, timeout=timeout)

    with StubServer(StubConfig(itl=0.002)) as stub:
        measure, _ = Live(
            Endpoint(stub.url, client, keep, say=lambda line: None), None, None, accelerators=1
        ).sweep(sp)
        first = measure(sp.point(1))
        again = measure(replace(sp.point(1), repetitions=3))
    assert len(first) == 1 and [rel for rel, _ in again] == [
        f"records/sweep-c-c1-r{i}.json" for i in range(3)
    ]
    assert {phase: len(answers) for phase, answers in kept.items()} == {
        f"sweep-c-c1-r{i}": 1 for i in range(3)
    }
    assert "warmup" in kept["sweep-c-c1-r0"][0] and "warmup" not in kept["sweep-c-c1-r1"][0]
