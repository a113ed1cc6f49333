"""Floors files (issue 41, item 2): each cell's calibrated bounds come from its own file,
`matrix/floors/<model>/<cell id, / as __>.<cpu kind>.yaml`, attached at load; two cells under one
card rule keep their own bounds, and a file naming what the matrix does not have is a load error."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from dayzero.checks.calibration import cpu_kind
from dayzero.checks.performance import check_floor
from dayzero.errors import ConfigError
from dayzero.spec import floorfiles
from dayzero.spec.card import floors_for
from dayzero.spec.matrix import load_matrix

from .conftest import REPO
from .test_floors_calibrate import EPYC, SAPPHIRE, run_doc

KIND = cpu_kind(EPYC)  # amd-epyc-avx512
# A host of a kind no shipped file calibrates (the shipped files cover the AMD EPYC with AVX-512
# and the Intel Xeon with AMX): the card's hand-set bounds hold there.
NEOVERSE = {"arch": "aarch64", "cpu": "Neoverse-V1", "isa": ["asimd"]}
UNCALIBRATED = cpu_kind(NEOVERSE)  # aarch64-neoverse
LOW = "smollm2-135m/cpu+sglang/low_latency/baseline"
HIGH = "smollm2-135m/cpu+sglang/high_throughput/baseline"  # the same two rules as LOW's
SHIPPED = "smollm2-135m/cpu+llama.cpp/low_latency/baseline"
THROUGHPUT = "floor:output_throughput@random-64-32/c{}"
TPOT = "floor:median_tpot_ms@random-64-32/c{}"


def floors_file(matrix: Path, cell: str, kind: str, floors: list[dict], **top) -> Path:
    """A floors file as `dayzero floors calibrate` writes it, at the name it writes."""
    path = matrix / "floors" / cell.split("/")[0] / f"{cell.replace('/', '__')}.{kind}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "cell": cell,
        "fraction": 0.6,
        "provenance": {"runs": ["r1"], "cpu_kinds": [kind]},
        "floors": floors,
    }
    path.write_text(yaml.safe_dump({**doc, **top}, sort_keys=False))
    return path


def shipped_bounds(cell: str, kind: str) -> dict[str, float]:
    """check -> bound of the shipped file of `cell` on `kind` (empty where it has none)."""
    path = floorfiles.path_of(REPO / "matrix", cell, kind)
    if not path.exists():
        return {}
    return {f["check"]: f.get("min", f.get("max")) for f in yaml.safe_load(path.read_text())["floors"]}


def bounds(matrix, cell_id: str, kind: str) -> dict[str, float]:
    cell = matrix.cell(cell_id)
    return {f.name: f.on(kind).bound for f in floors_for(matrix.card(cell), cell)}


def test_two_cells_under_one_rule_keep_their_own_bounds_min_and_max(matrix_dir):
    shipped = load_matrix(REPO / "matrix")
    c_low, c_high = (
        shipped.card(shipped.cell(c)).mode(shipped.cell(c).mode).concurrency for c in (LOW, HIGH)
    )
    assert c_low != c_high  # two cells, two names: what a rule-wide bound could not tell apart
    floors_file(
        matrix_dir,
        LOW,
        KIND,
        [
            {"check": THROUGHPUT.format(c_low), "min": 5.5, "interval_sides": [9.2]},
            {"check": TPOT.format(c_low), "max": 300.0, "interval_sides": [180.0]},
        ],
    )
    floors_file(matrix_dir, HIGH, KIND, [{"check": THROUGHPUT.format(c_high), "min": 7.5}])
    matrix = load_matrix(matrix_dir)
    low, high = bounds(matrix, LOW, KIND), bounds(matrix, HIGH, KIND)
    assert low[THROUGHPUT.format(c_low)] == 5.5 and low[TPOT.format(c_low)] == 300.0
    assert high[THROUGHPUT.format(c_high)] == 7.5
    assert high[TPOT.format(c_high)] == 1000  # no bound in its file: the card's
    other = cpu_kind(SAPPHIRE)  # a kind this test wrote no file for: its shipped file, or the card's
    shipped = shipped_bounds(LOW, other)
    card = {THROUGHPUT.format(c_low): 2, TPOT.format(c_low): 1000}
    assert bounds(matrix, LOW, other) == {**card, **shipped}
    assert bounds(matrix, LOW, UNCALIBRATED) == card


def test_each_shipped_file_holds_for_its_cell_alone():
    """Every shipped file bounds its own cell's floors on its own kind, whichever card rule they
    come from; a cell without a file (the rpc_split cells) and a kind without one keep the card's
    bounds."""
    matrix = load_matrix(REPO / "matrix")
    files = sorted((REPO / "matrix" / "floors").glob("*/*.yaml"))
    assert len(files) >= 2  # two cells under one rule at least: what a rule-wide bound could not tell apart
    kinds = set()
    for path in files:
        shipped = yaml.safe_load(path.read_text())
        (kind,) = shipped["provenance"]["cpu_kinds"]
        assert path.name.endswith(f".{kind}.yaml"), path.name
        kinds.add(kind)
        want = {f["check"]: f.get("min", f.get("max")) for f in shipped["floors"]}
        got = bounds(matrix, shipped["cell"], kind)
        assert {name: got[name] for name in want} == want, path.name
        card = bounds(matrix, shipped["cell"], UNCALIBRATED)
        assert all(card[name] != want[name] for name in want), path.name
    assert UNCALIBRATED not in kinds
    split = "smollm2-135m/cpu+llama.cpp/rpc_split/baseline"
    for kind in kinds:
        assert bounds(matrix, split, kind) == bounds(matrix, split, UNCALIBRATED)


def test_the_checker_recomputes_a_floor_with_the_files_bound_on_its_kind_and_the_cards_elsewhere(matrix_dir):
    """The submission checker reads the lab's matrix: the same loader, the same files; its
    floors come from the cell's plans and its CPU kind from the bundle's host facts."""
    from dayzero.submission.cellview import CellView, Recorded

    floors_file(matrix_dir, SHIPPED, KIND, [{"check": THROUGHPUT.format(1), "min": 40.0}])
    matrix = load_matrix(matrix_dir)
    cell = matrix.cell(SHIPPED)
    view = CellView("e.json", {}, cell, matrix.card(cell), {}, REPO / "suites", REPO / "suites" / "goldens")
    (floor,) = [f for f in view.floors() if f.name == THROUGHPUT.format(1)]
    for machine, bound, verdict in ((EPYC, 40.0, "failed"), (NEOVERSE, 10.0, "passed")):
        doc = run_doc("r1", 30.0, 40.0, 20.0)
        doc["hosts"][0]["facts"]["machine"] = machine
        kind = Recorded(SimpleNamespace(doc=doc)).cpu_kind
        result = check_floor(floor.on(kind), {"output_throughput": 35.0})
        assert (result.bound, result.verdict) == (bound, verdict), (kind, result.message)


@pytest.mark.parametrize(
    ("edit", "field", "said"),
    [
        (lambda d: d.update(cell="smollm2-135m/cpu+llama.cpp/nowhere/baseline"), "cell", "no such cell"),
        (
            lambda d: d["floors"][0].update(check="floor:output_throughput@chat/c9"),
            "floors[0].check",
            "no floor",
        ),
        (lambda d: d["floors"][0].update(min="fast"), "floors[0].min", "number"),
        (lambda d: d["floors"][0].update(max=d["floors"][0].pop("min")), "floors[0].max", "min floor"),
        (lambda d: d["provenance"].update(cpu_kinds=["intel-xeon-amx"]), "provenance.cpu_kinds", KIND),
        (lambda d: d["floors"].append(dict(d["floors"][0])), "floors[1].check", "twice"),
    ],
)
def test_a_file_naming_what_the_matrix_has_not_is_a_load_error_naming_file_and_field(
    matrix_dir, edit, field, said
):
    path = floors_file(matrix_dir, SHIPPED, KIND, [{"check": THROUGHPUT.format(1), "min": 30.0}])
    doc = yaml.safe_load(path.read_text())
    edit(doc)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    with pytest.raises(ConfigError) as err:
        load_matrix(matrix_dir)
    assert str(path) in str(err.value) and field in str(err.value) and said in str(err.value), str(err.value)


def test_a_ceiling_sits_above_the_worst_upper_bound_a_floor_below_the_worst_lower(matrix_dir):
    """A max floor's calibrated bound under a quiet run's upper interval bound would fail that
    run: the file is refused, and so is a min floor above a quiet run's lower bound."""
    tpot = {"check": TPOT.format(1), "max": 9.0, "interval_sides": [8.0, 9.76]}
    path = floors_file(matrix_dir, SHIPPED, KIND, [tpot])
    with pytest.raises(ConfigError, match=r"floors\[0\]\.max.*9\.76"):
        load_matrix(matrix_dir)
    floors_file(
        matrix_dir, SHIPPED, KIND, [{"check": THROUGHPUT.format(1), "min": 60.0, "interval_sides": [53.1]}]
    )
    with pytest.raises(ConfigError, match=rf"{re.escape(path.name)}.*floors\[0\]\.min.*53\.1"):
        load_matrix(matrix_dir)
