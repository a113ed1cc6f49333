"""`dayzero floors calibrate` (issue 41, item 2): floors at a stated fraction of the worst quiet
run's interval bound, with provenance; a contended or invalid number never feeds one."""

from __future__ import annotations

import yaml

from dayzero import evidence
from dayzero.checks.calibration import calibrate, cpu_kind
from dayzero.cli import main

CELL = "smollm2-135m/cpu+llama.cpp/low_latency/baseline"
EPYC = {"arch": "x86_64", "cpu": "AMD EPYC 9B14 96-Core Processor", "isa": ["avx2", "avx512f"]}
SAPPHIRE = {"arch": "x86_64", "cpu": "Intel(R) Xeon(R) Platinum 8481C", "isa": ["avx512f", "amx_tile"]}


def run_doc(run: str, lo: float, hi: float, tpot_hi: float, *, contended: bool = False) -> dict:
    def floor(metric, direction, measured, iv, bound):
        details = {"workload": "random-64-32", "concurrency": 1, "direction": direction, "interval": iv}
        if contended:
            details["contended"] = {"perf-random-64-32-c1-r0": "local: host contended"}
        name = f"floor:{metric}@random-64-32/c1"
        return {"name": name, "kind": "performance", "verdict": "passed", "message": "m",
                "measured": measured, "bound": bound, "details": details, "family": "floor"}  # fmt: skip

    when = f"2026-12-07T01:0{run[-1]}:00+00:00"
    facts = {"cpus": 2, "machine": EPYC}
    return {
        "schema_version": 1, "cell": CELL, "model": "smollm2-135m", "hardware": "cpu", "mode": "low_latency",
        "strategy": "baseline", "options": [], "source": "dayzero",
        "run": {"id": run, "started": when, "finished": when, "by": "t", "controller": "t",
                "worker": "master", "harness_version": "0.1.0"},
        "recipe": {"digest": "d", "launches": []}, "engine": {"name": "llama.cpp", "version": "b1"},
        "hosts": [{"name": "local", "hardware": "cpu", "accelerators": 0, "facts": facts,
                   "lease": {"slot": 0}}],
        "checks": [
            floor("output_throughput", "min", (lo + hi) / 2, {"lo": lo, "hi": hi, "n": 16, "runs": 3}, 10),
            floor("median_tpot_ms", "max", 15.0, {"lo": 12.0, "hi": tpot_hi, "n": 48, "runs": 3}, 250),
        ],
        "verdict": "passed",
    }  # fmt: skip


def test_the_floor_is_a_fraction_of_the_worst_runs_bound_and_contention_feeds_nothing():
    docs = [
        run_doc("r1", 55.0, 60.0, 17.0),
        run_doc("r2", 50.0, 58.0, 19.0),
        run_doc("r3", 20.0, 25.0, 90.0, contended=True),
    ]
    got = calibrate(CELL, docs, 0.6)
    floors = {f.metric: f for f in got.floors}
    assert floors["output_throughput"].bound == 30.0 and floors["output_throughput"].sides == (55.0, 50.0)
    assert floors["median_tpot_ms"].bound == 31.7  # 19 / 0.6, three significant digits
    assert len(got.left_out) == 2 and all("r3" in w and "contended" in w for w in got.left_out)
    assert got.provenance["cpu_kinds"] == ["amd-epyc-avx512"] and got.provenance["runs"] == ["r1", "r2", "r3"]


def test_cpu_kinds_tell_the_machines_apart():
    assert cpu_kind(EPYC) == "amd-epyc-avx512"
    assert cpu_kind(SAPPHIRE) == "intel-xeon-amx"
    assert cpu_kind(None) == "unknown"


def test_the_verb_reads_runs_and_writes_the_floors_file_with_provenance(tmp_path, capsys):
    for i, (lo, hi) in enumerate(((55.0, 60.0), (52.0, 57.0)), 1):
        evidence.write(tmp_path / f"run{i}", run_doc(f"r{i}", lo, hi, 18.0))
    out = tmp_path / "floors.yaml"
    argv = ["floors", "calibrate", CELL, "--from", str(tmp_path / "run1"), "--from", str(tmp_path / "run2")]
    assert main([*argv, "--fraction", "0.5", "--out", str(out)]) == 0
    doc = yaml.safe_load(out.read_text())
    assert doc["cell"] == CELL and doc["fraction"] == 0.5 and doc["provenance"]["runs"] == ["r1", "r2"]
    assert doc["provenance"]["hosts"]["local"]["machine"]["cpu"].startswith("AMD EPYC")
    assert {f["metric"]: f.get("min", f.get("max")) for f in doc["floors"]} == {
        "output_throughput": 26.0,
        "median_tpot_ms": 36.0,
    }
    assert "output_throughput" in capsys.readouterr().out
    assert main(["floors", "calibrate", CELL, "--from", str(tmp_path / "none"), "--out", str(out)]) == 2


def test_a_calibrated_bound_holds_on_its_cpu_kind_alone_live_and_in_the_checker():
    """The shipped card's llama.cpp throughput floor: its calibrated bound on the AMD EPYC with
    AVX-512 it was measured on, the hand-set bound on every other kind (an Intel with AMX, an
    AVX2-only AMD, hosts of two kinds); the run and the checker read the kind from the same facts."""
    from types import SimpleNamespace

    from dayzero.checks.calibration import hosts_cpu_kind
    from dayzero.spec.card import floors_for
    from dayzero.spec.matrix import load_matrix
    from dayzero.submission.cellview import Recorded

    from .conftest import REPO

    matrix = load_matrix(REPO / "matrix")
    cell = next(c for c in matrix.cells if c.id == CELL)
    (floor,) = [f for f in floors_for(matrix.card(cell), cell) if f.metric == "output_throughput"]
    avx2 = {**EPYC, "isa": ["avx2"]}
    (path,) = (REPO / "matrix" / "floors").glob(f"*/{CELL.replace('/', '__')}.amd-epyc-avx512.yaml")
    (shipped,) = [f for f in yaml.safe_load(path.read_text())["floors"] if f["metric"] == "output_throughput"]
    assert floor.on(cpu_kind(EPYC)).bound == shipped["min"] != floor.bound
    assert floor.on(cpu_kind(SAPPHIRE)).bound == floor.on(cpu_kind(avx2)).bound == floor.bound == 10
    assert hosts_cpu_kind([EPYC, EPYC]) == "amd-epyc-avx512"
    assert hosts_cpu_kind([EPYC, SAPPHIRE]) == "mixed" and hosts_cpu_kind([None]) == "unknown"
    doc = run_doc("r1", 60.0, 70.0, 20.0)
    assert Recorded(SimpleNamespace(doc=doc)).cpu_kind == "amd-epyc-avx512"


def test_the_checker_applies_the_evidences_own_contention_marks_under_the_runs_rule():
    """A bundle's phases marked contended (its host-load samples stay on the lab's side) read as
    the run read them: a passed floor keeps its verdict with the mark, a missed one becomes the lab
    fault it was; an honest bundle measured beside a busy neighbour is no longer a recompute finding."""
    from types import SimpleNamespace

    from dayzero.checks import FAILED, PASSED, CheckResult
    from dayzero.checks.performance import INVALID
    from dayzero.submission.cellview import Recorded

    doc = run_doc("r1", 60.0, 70.0, 20.0, contended=True)
    src = Recorded(SimpleNamespace(doc=doc))
    name = "floor:output_throughput@random-64-32/c1"
    phases = ["perf-random-64-32-c1-r0", "perf-random-64-32-c1-r1"]
    kept = src.contended(CheckResult(name, "performance", PASSED, "m"), phases)
    assert kept.verdict == PASSED and kept.details["contended"] == {phases[0]: "local: host contended"}
    missed = src.contended(CheckResult(name, "performance", FAILED, "m"), phases)
    assert missed.verdict == INVALID and "host contended" in missed.message
    clean = src.contended(CheckResult(name, "performance", FAILED, "m"), ["perf-other-r0"])
    assert clean.verdict == FAILED and "contended" not in clean.details


def other_cell(doc: dict, mode: str = "high_throughput", concurrency: int = 4) -> dict:
    """The same run's evidence of another cell of the main job (its floors at its own concurrency)."""
    checks = [{**c, "name": c["name"].replace("/c1", f"/c{concurrency}")} for c in doc["checks"]]
    return {**doc, "cell": CELL.replace("low_latency", mode), "mode": mode, "checks": checks}


def test_from_a_main_jobs_folder_takes_the_named_cells_evidence_and_the_loader_reads_the_file(
    tmp_path, capsys
):
    """`--from` a whole main job's reports (several cells, each run a folder): the named cell's
    numbers alone make its floors, written where the matrix loader picks them up for that cell;
    a ceiling sits at the worst upper bound over the fraction, above it. A folder without the
    cell is refused, naming the folder and the cells it holds."""
    import shutil

    from dayzero.spec.matrix import load_matrix

    from .conftest import REPO

    matrix = tmp_path / "matrix"
    shutil.copytree(REPO / "matrix", matrix)
    shutil.rmtree(matrix / "floors")
    for i, (lo, hi, tpot) in enumerate(((55.0, 60.0, 18.0), (52.0, 57.0, 21.0)), 1):
        doc = run_doc(f"r{i}", lo, hi, tpot)
        evidence.write(tmp_path / f"job{i}", doc)
        evidence.write(tmp_path / f"job{i}", other_cell(run_doc(f"r{i}", 5.0, 6.0, 900.0)))
    argv = ["--matrix", str(matrix), "floors", "calibrate", CELL, "--from", str(tmp_path / "job1")]
    assert main([*argv, "--from", str(tmp_path / "job2"), "--fraction", "0.5"]) == 0
    (path,) = (matrix / "floors").glob("*/*.yaml")
    assert path.name == f"{evidence.slug(CELL)}.amd-epyc-avx512.yaml"
    doc = yaml.safe_load(path.read_text())
    assert {f["check"]: f.get("min", f.get("max")) for f in doc["floors"]} == {
        "floor:output_throughput@random-64-32/c1": 26.0,  # 0.5 x the worst lower bound, 52
        "floor:median_tpot_ms@random-64-32/c1": 42.0,  # the worst upper bound, 21, / 0.5: above it
    }
    assert "/ fraction" in doc["rule"] and doc["provenance"]["runs"] == ["r1", "r2"]
    loaded = load_matrix(matrix)
    low, high = (loaded.cell(c) for c in (CELL, CELL.replace("low_latency", "high_throughput")))
    from dayzero.spec.card import floors_for

    assert {f.name: f.on("amd-epyc-avx512").bound for f in floors_for(loaded.card(low), low)} == {
        "floor:output_throughput@random-64-32/c1": 26.0,
        "floor:median_tpot_ms@random-64-32/c1": 42.0,
    }
    assert all(f.calibrated == () for f in floors_for(loaded.card(high), high))  # its numbers fed nothing
    capsys.readouterr()
    evidence.write(tmp_path / "elsewhere", other_cell(run_doc("r3", 5.0, 6.0, 900.0)))
    assert main([*argv, "--from", str(tmp_path / "elsewhere")]) == 2
    said = capsys.readouterr().err
    assert (
        str(tmp_path / "elsewhere") in said and f"no evidence of {CELL}" in said and "high_throughput" in said
    )


def test_a_run_contended_on_every_floor_calibrates_nothing_and_says_why(tmp_path, capsys):
    evidence.write(tmp_path / "job", run_doc("r1", 55.0, 60.0, 18.0, contended=True))
    out = tmp_path / "floors.yaml"
    assert main(["floors", "calibrate", CELL, "--from", str(tmp_path / "job"), "--out", str(out)]) == 1
    said = capsys.readouterr().out
    assert said.count("measured on a contended host") == 2 and "r1" in said
    assert "nothing written" in said and not out.exists()  # an earlier calibration is kept


def test_the_help_says_the_file_is_picked_up_by_itself(capsys):
    import pytest

    with pytest.raises(SystemExit):
        main(["floors", "calibrate", "--help"])
    assert "picked up" in capsys.readouterr().out
