"""A floor on what a sweep found: the max load at SLO (at least N) and the context sweep's
decode-time ratio (at most R). Card syntax and its errors, the check on hand-made sweep points,
and the checker recomputing it from raw records like any floor."""

from __future__ import annotations

import shutil
from dataclasses import replace
from types import SimpleNamespace

import pytest

from dayzero.checks import FAILED, NOT_MEASURED, PASSED
from dayzero.checks.performance import INVALID
from dayzero.checks.sweep import sweep_check, sweep_floor_check
from dayzero.errors import ConfigError
from dayzero.run import records
from dayzero.run.plans import Planned
from dayzero.run.plans import sweeps as sweeps_kind
from dayzero.run.sweeps import walk
from dayzero.spec import sweeps as sweep_spec
from dayzero.spec.card import ModelCard
from dayzero.spec.matrix import load_matrix
from dayzero.spec.sweeps import Slo, Sweep, SweepFloor
from dayzero.submission import recompute

from .conftest import REPO
from .test_matrix import edit
from .test_sweeps import plan_for, stub_answer

SLO = Slo(ttft_ms=200, target=0.9)
AT_LEAST_4 = SweepFloor("max_load_at_slo", 4.0, "min")
AT_MOST_3 = SweepFloor("decode_ratio", 3.0, "max")


def card_with(raw: dict) -> ModelCard:
    return ModelCard("m", "matrix/models/m.yaml", raw=raw)


# --- the card's syntax ----------------------------------------------------------------------------


def test_floors_are_read_with_their_direction():
    card = card_with(
        {
            "slos": {"w": {"ttft_ms": 500}},
            "sweeps": [
                {"name": "q", "kind": "rate", "workload": "w", "points": [1, 2],
                 "floor": {"metric": "max_load_at_slo", "min": 1.5}},
                {"name": "ctx", "kind": "context", "workload": "w", "points": [64, 1024],
                 "floor": {"metric": "decode_ratio", "max": 3}},
                {"name": "c", "kind": "concurrency", "workload": "w", "points": [1]},
            ],
        }
    )  # fmt: skip
    rate, ctx, plain = sweep_spec.parse(card)
    assert rate.floor == SweepFloor("max_load_at_slo", 1.5, "min")
    assert ctx.floor == SweepFloor("decode_ratio", 3.0, "max") and plain.floor is None
    assert rate.floor_name == "floor:max_load_at_slo@sweep:q" and plain.floor_name == ""
    assert ctx.floor.describe() == "decode_ratio <= 3"


CONC = {"name": "c", "kind": "concurrency", "workload": "w", "points": [1, 2]}
CTX = {"name": "x", "kind": "context", "workload": "w", "points": [64, 1024]}


@pytest.mark.parametrize(
    "entry, slos, said",
    [
        (
            {**CTX, "floor": {"metric": "max_load_at_slo", "min": 2}},
            {"w": {}},
            "bounds a concurrency or rate",
        ),
        ({**CONC, "floor": {"metric": "decode_ratio", "max": 2}}, {"w": {}}, "bounds a context sweep"),
        ({**CONC, "floor": {"metric": "max_load_at_slo", "max": 2}}, {"w": {}}, "with `min:`"),
        ({**CTX, "floor": {"metric": "decode_ratio", "min": 2}}, {}, "with `max:`"),
        ({**CTX, "floor": {"metric": "decode_ratio"}}, {}, "with `max:`"),
        (
            {**CONC, "floor": {"metric": "max_load_at_slo", "min": 2}},
            {},
            "needs the sweep's slo: or one for workload 'w'",
        ),
        ({**CTX, "points": [64], "floor": {"metric": "decode_ratio", "max": 2}}, {}, "two input lengths"),
    ],
)
def test_a_bad_floor_names_file_field_and_what_was_expected(entry, slos, said):
    with pytest.raises(ConfigError) as err:
        sweep_spec.parse(card_with({"slos": slos, "sweeps": [entry]}))
    assert err.value.file == "matrix/models/m.yaml" and err.value.path == "sweeps[0].floor"
    assert said in err.value.message


def test_the_matrix_refuses_a_bad_floor_when_it_loads(tmp_path):
    """At load (`dayzero lint`, pytest collection), not when the cell reaches its sweeps."""
    shutil.copytree(REPO / "matrix", tmp_path / "matrix")
    card = tmp_path / "matrix" / "models" / "smollm2-135m.yaml"
    edit(card, lambda d: d["sweeps"][2].update(floor={"metric": "max_load_at_slo", "min": 2}))
    with pytest.raises(ConfigError) as err:
        load_matrix(tmp_path / "matrix")
    assert str(card) in str(err.value) and "sweeps[2].floor" in str(err.value)
    edit(card, lambda d: d["sweeps"][2].update(floor={"metric": "speed", "max": 2}))
    with pytest.raises(ConfigError, match="floor"):
        load_matrix(tmp_path / "matrix")  # the schema names the metrics there are


# --- the check, on hand-made points -----------------------------------------------------------------


def load_sweep(points, floor=AT_LEAST_4, skipped=(), kind="concurrency"):
    sweep = Sweep("c", kind, "w", tuple(p["load"] for p in points) + tuple(skipped), {}, slo=SLO, floor=floor)
    rows = [{"label": sweep.label(p["load"]), **p} for p in points]
    return sweep, sweep_floor_check(sweep, sweep_check(sweep, rows, list(skipped)))


def test_max_load_at_or_above_the_floor_passes():
    _, check = load_sweep(
        [{"load": 2, "attainment": 1.0}, {"load": 4, "attainment": 0.95}, {"load": 8, "attainment": 0.5}]
    )
    assert check.name == "floor:max_load_at_slo@sweep:c" and check.kind == "performance"
    assert check.verdict == PASSED and check.measured == 4 and check.bound == 4.0
    assert check.details["max_load_at_slo"] == {"load": 4, "bounded": True, "target": 0.9}


def test_max_load_below_the_floor_fails_and_says_which_load_missed():
    _, check = load_sweep([{"load": 2, "attainment": 0.95}, {"load": 4, "attainment": 0.6}])
    assert check.verdict == FAILED and check.measured == 2
    assert "max load at SLO 2 < 4" in check.message and "c4 missed the target" in check.message


def test_no_load_at_slo_fails():
    _, check = load_sweep([{"load": 2, "attainment": 0.1}])
    assert check.verdict == FAILED and check.measured is None and "no load" in check.message


def test_a_budget_spent_below_the_floor_is_not_measured_not_failed():
    """Every load measured met the SLO, but the sweep stopped before a load at the floor."""
    _, check = load_sweep([{"load": 2, "attainment": 1.0}], skipped=(4, 8))
    assert check.verdict == NOT_MEASURED and "budget" in check.message


def test_an_unbounded_sweep_at_the_floor_passes():
    _, check = load_sweep([{"load": 2, "attainment": 1.0}, {"load": 4, "attainment": 1.0}])
    assert check.verdict == PASSED and "every load measured met it" in check.message


def test_an_invalid_or_gamed_sweep_is_not_compared():
    _, invalid = load_sweep([{"load": 4, "attainment": 1.0, "invalid": ["client saturated"]}])
    assert invalid.verdict == INVALID and "not compared" in invalid.message
    _, gamed = load_sweep([{"load": 4, "attainment": 1.0, "compliance": ["short outputs"]}])
    assert gamed.verdict == FAILED and "not compared" in gamed.message


def ctx_points(*tpots):
    loads = (64, 1024, 2048, 4096)
    return [
        {"load": x, "median_ttft_ms": x / 10, "median_itl_ms": t, "median_tpot_ms": t}
        for x, t in zip(loads, tpots, strict=False)
    ]


def test_decode_ratio_at_most_its_bound():
    _, ok = load_sweep(ctx_points(10, 12, 20, 30), AT_MOST_3, kind="context")
    assert ok.name == "floor:decode_ratio@sweep:c" and ok.verdict == PASSED and ok.measured == 3.0
    _, over = load_sweep(ctx_points(10, 12, 20, 31), AT_MOST_3, kind="context")
    assert over.verdict == FAILED and "decode_ratio 3.1 > 3" in over.message


def test_decode_ratio_without_the_longest_input_is_not_measured():
    _, short = load_sweep(ctx_points(10, 12), AT_MOST_3, skipped=(2048, 4096), kind="context")
    assert short.verdict == NOT_MEASURED and "4096" in short.message
    _, one = load_sweep(ctx_points(10), AT_MOST_3, kind="context")
    assert one.verdict == NOT_MEASURED


def test_no_floor_no_check():
    assert load_sweep([{"load": 2, "attainment": 1.0}], floor=None)[1] is None


# --- the checker recomputes it from raw records ---------------------------------------------------


def test_the_checker_recomputes_the_floor_and_a_forged_verdict_differs():
    # 40 requests a point: 10 of 10 met is no 90% attainment on its interval (Wilson 72-100%)
    sweep = Sweep(
        "c", "concurrency", "w", (1, 2, 4, 16), {}, num_prompts=40, search=2, slo=SLO, floor=AT_LEAST_4
    )
    sp = plan_for(sweep)
    answers = {}
    for load in (1, 2, 4, 16, 10, 7):  # the card's loads, then two bisection steps
        for rel, answer in stub_answer(sp.point(load), capacity=10.0):
            answers[rel.rsplit("/", 1)[1].removesuffix(".json")] = (rel, answer)
    view = SimpleNamespace(
        doc={"run": {"id": "x"}, "hosts": [{"accelerators": 1}], "records": [], "checks": []},
        cell=SimpleNamespace(id="m/cpu/a/b", mode="a"),
        card=SimpleNamespace(raw={"modes": {"a": {}}}),  # a mode of no parallel size: every accelerator
        metrics={},
        plans=(Planned(sweeps_kind.KIND, sp),),
        answer=lambda phase: answers[phase],
    )
    measured = (1, 2, 4, 16, 10, 7)
    view.doc["records"] = [records.path("x", "m/cpu/a/b", sp.point(x).phase(0)) for x in measured]
    expected = {e.name: e for e in recompute.expected_checks(view)}
    assert set(expected) == {"sweep:c@w", "floor:max_load_at_slo@sweep:c"}
    redone = expected["floor:max_load_at_slo@sweep:c"].recompute()
    points, skipped = walk(sp, lambda p: [answers[ph] for ph in p.phases()], 1)
    run = sweep_floor_check(sweep, sweep_check(sweep, points, skipped))
    assert redone == replace(run, family="floor") and redone.verdict == PASSED and redone.measured == 4
    forged = {**run.to_json(), "measured": 16}
    assert list(recompute.diff(forged, recompute._plain(redone.to_json()), run.name))
