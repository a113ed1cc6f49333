"""`dayzero floors calibrate` (issue 41, item 2): floors at a stated fraction of the slowest quiet
run's interval bound, each with how far a 2x slowdown of the fastest run sits past it, with
provenance; a contended or invalid number never feeds one."""

from __future__ import annotations

import pytest
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


def test_the_floor_is_a_fraction_of_the_slowest_run_with_its_margins_and_contention_feeds_nothing():
    docs = [
        run_doc("r1", 55.0, 60.0, 17.0),
        run_doc("r2", 50.0, 58.0, 19.0),
        run_doc("r3", 20.0, 25.0, 90.0, contended=True),
    ]
    got = calibrate(CELL, docs)
    floors = {f.metric: f for f in got.floors}
    throughput, tpot = floors["output_throughput"], floors["median_tpot_ms"]
    # 0.7 of the slowest lower bound, 50 (the contended run's 20 fed nothing)
    assert throughput.bound == 35.0 and throughput.sides == (55.0, 50.0)
    assert throughput.far_sides == (60.0, 58.0) and round(throughput.quiet_margin, 2) == 1.43
    assert round(throughput.slowdown_margin, 2) == 1.17  # the fastest upper bound halved, 30
    # a ceiling: the slowest upper bound, 19, over 0.7; twice the fastest lower bound, 24, is under it
    assert tpot.bound == 27.1 and round(tpot.slowdown_margin, 2) == 0.89
    assert len(got.left_out) == 2 and all("r3" in w and "contended" in w for w in got.left_out)
    assert got.provenance["cpu_kinds"] == ["amd-epyc-avx512"] and got.provenance["runs"] == ["r1", "r2", "r3"]
    assert got.fraction == 0.7 and got.to_json()["fraction"] == 0.7


def test_the_fraction_is_stated_and_runs_too_far_apart_are_short_of_a_slowdown(tmp_path, capsys):
    """One run: the fraction of it, and its own 2x slowdown 1.4x past the floor. Quiet runs 2.5x
    apart: the floor passes the slowest, and a 2x slowdown of the fastest would pass it, which
    the margin says. A fraction outside (0, 1] is refused, by the verb in one line."""
    (one,) = [f for f in calibrate(CELL, [run_doc("r1", 50.0, 50.0, 20.0)]).floors if f.direction == "min"]
    assert one.bound == 35.0 and round(one.slowdown_margin, 2) == 1.4
    (tight,) = [
        f for f in calibrate(CELL, [run_doc("r1", 50.0, 50.0, 20.0)], 0.8).floors if f.direction == "min"
    ]
    assert tight.bound == 40.0
    spread = calibrate(CELL, [run_doc("r1", 20.0, 22.0, 20.0), run_doc("r2", 50.0, 60.0, 20.0)])
    (floor,) = [f for f in spread.floors if f.direction == "min"]
    assert floor.bound == 14.0 and floor.slowdown_margin < 1
    assert floor.to_json()["slowdown_margin"] == 0.467  # 14 / 30
    with pytest.raises(ValueError, match="not in"):
        calibrate(CELL, [run_doc("r1", 50.0, 50.0, 20.0)], 1.5)
    evidence.write(tmp_path / "r1", run_doc("r1", 50.0, 50.0, 20.0))
    argv = ["floors", "calibrate", CELL, "--from", str(tmp_path / "r1"), "--out", str(tmp_path / "f.yaml")]
    assert main([*argv, "--fraction", "1.5"]) == 2
    said = capsys.readouterr().err
    assert "--fraction" in said and "expected a share of the slowest run in (0, 1], got 1.5" in said
    assert "Traceback" not in said and not (tmp_path / "f.yaml").exists()


def test_the_verb_names_the_floors_that_catch_a_slowdown_and_warns_where_none_does(tmp_path, capsys):
    """A cell whose quiet runs spread too far for every floor: a warning; one floor still able to
    catch a 2x slowdown of the fastest run: named, no warning."""
    out = tmp_path / "f.yaml"
    for name, runs in (("apart", ((20.0, 22.0), (50.0, 60.0))), ("close", ((50.0, 52.0), (52.0, 60.0)))):
        for i, (lo, hi) in enumerate(runs, 1):
            evidence.write(tmp_path / name / f"r{i}", run_doc(f"r{i}", lo, hi, 20.0))
        sources = [f"--from={tmp_path / name / run}" for run in ("r1", "r2")]
        assert main(["floors", "calibrate", CELL, "--out", str(out), *sources]) == 0
        said = capsys.readouterr().out
        doc = yaml.safe_load(out.read_text())
        margins = {f["metric"]: f["slowdown_margin"] for f in doc["floors"]}
        assert margins["median_tpot_ms"] == 0.839  # a ceiling of 28.6 against twice 12, 24
        if name == "apart":  # 14 against 30
            assert margins["output_throughput"] == 0.467
            assert "warning:" in said and "no floor of it would fail such a slowdown" in said
            assert "a floor at 0.7 of the slowest" in said
        else:  # 35 against 30
            assert margins["output_throughput"] == 1.167
            assert "warning" not in said
            assert "caught by floor:output_throughput@random-64-32/c1" in said


def test_cpu_kinds_tell_the_machines_apart():
    assert cpu_kind(EPYC) == "amd-epyc-avx512"
    assert cpu_kind(SAPPHIRE) == "intel-xeon-amx"
    assert cpu_kind(None) == "unknown"


def test_the_verb_reads_runs_and_writes_the_floors_file_with_provenance(tmp_path, capsys):
    for i, (lo, hi) in enumerate(((55.0, 60.0), (52.0, 57.0)), 1):
        evidence.write(tmp_path / f"run{i}", run_doc(f"r{i}", lo, hi, 18.0))
    out = tmp_path / "floors.yaml"
    argv = ["floors", "calibrate", CELL, "--from", str(tmp_path / "run1"), "--from", str(tmp_path / "run2")]
    assert main([*argv, "--out", str(out)]) == 0
    doc = yaml.safe_load(out.read_text())
    assert doc["cell"] == CELL and doc["slowdown"] == 2.0 and doc["provenance"]["runs"] == ["r1", "r2"]
    assert doc["provenance"]["hosts"]["local"]["machine"]["cpu"].startswith("AMD EPYC")
    assert {f["metric"]: f.get("min", f.get("max")) for f in doc["floors"]} == {
        "output_throughput": 36.4,  # 0.7 x 52
        "median_tpot_ms": 25.7,  # 18 / 0.7
    }
    assert doc["fraction"] == 0.7
    said = capsys.readouterr().out
    assert "output_throughput" in said and "every run finished within 0.0 h" in said
    assert main(["floors", "calibrate", CELL, "--from", str(tmp_path / "none"), "--out", str(out)]) == 2


def test_runs_of_one_stretch_are_said_so_and_runs_days_apart_are_not(tmp_path, capsys):
    """The speed of a quiet host moves between days (docs/measurement.md): a calibration from one
    hour says that it sampled one stretch of it."""
    docs = [run_doc("r1", 55.0, 60.0, 18.0), run_doc("r2", 52.0, 57.0, 18.0)]
    docs[1]["run"]["finished"] = "2026-12-08T09:00:00+00:00"  # the next day
    for i, doc in enumerate(docs, 1):
        evidence.write(tmp_path / f"run{i}", doc)
    argv = ["floors", "calibrate", CELL, "--from", str(tmp_path / "run1"), "--from", str(tmp_path / "run2")]
    assert main([*argv, "--out", str(tmp_path / "f.yaml")]) == 0
    assert "every run finished within" not in capsys.readouterr().out


def test_a_calibrated_bound_holds_on_its_cpu_kind_alone_live_and_in_the_checker():
    """The shipped card's llama.cpp throughput floor: its own calibrated bound on each kind it was
    measured on (the AMD EPYC with AVX-512, the Intel Xeon with AMX), the hand-set bound on every
    other kind (an AVX2-only AMD, hosts of two kinds); the run and the checker read the kind from
    the same facts."""
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
    for machine in (EPYC, SAPPHIRE):
        kind = cpu_kind(machine)
        (path,) = (REPO / "matrix" / "floors").glob(f"*/{CELL.replace('/', '__')}.{kind}.yaml")
        floors = yaml.safe_load(path.read_text())["floors"]
        (shipped,) = [f for f in floors if f["metric"] == "output_throughput"]
        assert floor.on(kind).bound == shipped["min"] != floor.bound, kind
    assert floor.on(cpu_kind(EPYC)).bound != floor.on(cpu_kind(SAPPHIRE)).bound
    assert floor.on(cpu_kind(avx2)).bound == floor.on("mixed").bound == floor.bound == 10
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
    numbers alone make its floors, written where the matrix loader picks them up for that cell,
    at --fraction of the slowest run. A folder without the cell is refused, naming the folder and
    the cells it holds."""
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
    assert main([*argv, "--from", str(tmp_path / "job2"), "--fraction", "0.75"]) == 0
    (path,) = (matrix / "floors").glob("*/*.yaml")
    assert path.name == f"{evidence.slug(CELL)}.amd-epyc-avx512.yaml"
    doc = yaml.safe_load(path.read_text())
    assert {f["check"]: f.get("min", f.get("max")) for f in doc["floors"]} == {
        "floor:output_throughput@random-64-32/c1": 39.0,  # 0.75 x 52
        "floor:median_tpot_ms@random-64-32/c1": 28.0,  # the slowest upper bound, 21, over 0.75
    }
    assert doc["fraction"] == 0.75 and "fraction x the slowest" in doc["rule"]
    assert doc["provenance"]["runs"] == ["r1", "r2"]
    loaded = load_matrix(matrix)
    low, high = (loaded.cell(c) for c in (CELL, CELL.replace("low_latency", "high_throughput")))
    from dayzero.spec.card import floors_for

    assert {f.name: f.on("amd-epyc-avx512").bound for f in floors_for(loaded.card(low), low)} == {
        "floor:output_throughput@random-64-32/c1": 39.0,
        "floor:median_tpot_ms@random-64-32/c1": 28.0,
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


def test_the_floors_phase_alone_drops_every_other_phase_and_keeps_the_cells(tmp_path):
    """The copy a calibration runs (`spec.floorsonly`): the shipped cards less sweeps, accuracy,
    tool calls and speculative acceptance, top level and `engines:` entries; the same cells with
    the same floors and calibrated bounds, and every runnable cell plans probes and floors alone
    (a new plan kind read from the card shows up here as one the copy still runs)."""
    from dayzero.run import plans
    from dayzero.spec.card import floors_for
    from dayzero.spec.floorsonly import NOT_FLOORS, floors_only, write_copy
    from dayzero.spec.matrix import load_matrix

    from .conftest import REPO

    card = yaml.safe_load((REPO / "matrix" / "models" / "smollm2-135m.yaml").read_text())
    before = yaml.safe_dump(card)
    stripped = floors_only(card)
    assert yaml.safe_dump(card) == before  # the card as it was
    assert {"sweeps", "accuracy", "speculative", "tool_calls"} <= set(card) and not set(NOT_FLOORS) & set(
        stripped
    )
    assert any(set(NOT_FLOORS) & set(e) for e in card["engines"].values())
    assert not any(set(NOT_FLOORS) & set(e) for e in stripped["engines"].values())
    assert {k: v for k, v in stripped.items() if k != "engines"} == {
        k: v for k, v in card.items() if k not in (*NOT_FLOORS, "engines")
    }

    shipped, copy = load_matrix(REPO / "matrix"), load_matrix(write_copy(REPO / "matrix", tmp_path / "m"))
    assert [c.id for c in copy.cells] == [c.id for c in shipped.cells]

    def floors(m, c):
        return [(f.name, f.bound, f.calibrated) for f in floors_for(m.card(c), c)]

    assert all(floors(copy, c) == floors(shipped, c) for c in shipped.cells)
    suites = REPO / "suites"
    runnable = [c for c in copy.cells if c.supported and c.hardware == "cpu"]
    kinds = {p.kind.family for c in runnable for p in plans.of(copy.card(c), c, suites)}
    assert kinds == {"probe", "floor"}
    assert len({p.kind.family for c in runnable for p in plans.of(shipped.card(c), c, suites)}) > 2


def evidence_of(doc: dict, cell: str, machine: dict = EPYC) -> dict:
    """`run_doc`'s run as the evidence of another cell of the same floors (and host machine)."""
    host = {**doc["hosts"][0], "facts": {"cpus": 2, "machine": machine}}
    return {**doc, "cell": cell, "engine": {"name": cell.split("+")[1].split("/")[0], "version": "v1"},
            "hosts": [host]}  # fmt: skip


SELECTION = "cpu and low_latency and baseline"
LLAMA, SGLANG, VLLM = (f"smollm2-135m/cpu+{e}/low_latency/baseline" for e in ("llama.cpp", "sglang", "vllm"))


def bare_matrix(tmp_path):
    import shutil

    from .conftest import REPO

    matrix = tmp_path / "matrix"
    shutil.copytree(REPO / "matrix", matrix)
    shutil.rmtree(matrix / "floors")
    return matrix


def test_a_selection_calibrates_every_cell_found_in_the_runs_and_names_the_rest(tmp_path, capsys):
    """`-m EXPR --from ...`: each selected cell from the folders that hold it (a folder without
    one of them named on stderr), a file each; a selected cell measured in no run is named and
    the exit status is 1. The single-cell form and `--out` keep their meaning."""
    matrix = bare_matrix(tmp_path)
    for i in (1, 2, 3):
        evidence.write(tmp_path / f"r{i}", evidence_of(run_doc(f"r{i}", 50.0 + i, 60.0, 18.0), LLAMA))
        if i != 2:
            evidence.write(tmp_path / f"r{i}", evidence_of(run_doc(f"r{i}", 14.0 + i, 16.0, 70.0), SGLANG))
    argv = ["--matrix", str(matrix), "floors", "calibrate", "-m", SELECTION]
    assert main([*argv, *(f"--from={tmp_path / f'r{i}'}" for i in (1, 2, 3))]) == 1
    said = capsys.readouterr()
    assert f"{SGLANG}: measured nothing in run 2/3 ({tmp_path / 'r2'})" in said.err
    assert f"not calibrated: {VLLM}: no evidence in any run" in said.out
    assert "calibrated 2 of 3 cells on amd-epyc-avx512" in said.out
    written = {p.name: yaml.safe_load(p.read_text()) for p in (matrix / "floors").glob("*/*.yaml")}
    assert sorted(written) == [f"{evidence.slug(c)}.amd-epyc-avx512.yaml" for c in (LLAMA, SGLANG)]
    by_cell = {d["cell"]: d for d in written.values()}
    assert by_cell[LLAMA]["provenance"]["runs"] == ["r1", "r2", "r3"]
    assert by_cell[SGLANG]["provenance"]["runs"] == ["r1", "r3"]
    sglang = {f["metric"]: f.get("min", f.get("max")) for f in by_cell[SGLANG]["floors"]}
    assert sglang == {"output_throughput": 10.5, "median_tpot_ms": 100.0}  # 0.7 x 15; 70 / 0.7
    assert main([*argv[:4], LLAMA, "--from", str(tmp_path / "r2"), "--out", str(tmp_path / "one.yaml")]) == 0
    assert yaml.safe_load((tmp_path / "one.yaml").read_text())["provenance"]["runs"] == ["r2"]
    capsys.readouterr()
    assert main([*argv, "--from", str(tmp_path / "r1"), "--out", str(tmp_path / "two.yaml")]) == 2
    assert "--out: <root>: names one file: expected one cell, got 3 selected" in capsys.readouterr().err


def test_a_selection_over_hosts_of_two_cpu_kinds_writes_nothing(tmp_path, capsys):
    matrix = bare_matrix(tmp_path)
    evidence.write(tmp_path / "r1", evidence_of(run_doc("r1", 50.0, 60.0, 18.0), LLAMA))
    evidence.write(tmp_path / "r1", evidence_of(run_doc("r1", 14.0, 16.0, 70.0), SGLANG, SAPPHIRE))
    argv = ["--matrix", str(matrix), "floors", "calibrate", "-m", SELECTION, "--from", str(tmp_path / "r1")]
    assert main(argv) == 2
    assert "CPU kinds ['amd-epyc-avx512', 'intel-xeon-amx']" in capsys.readouterr().err
    assert not (matrix / "floors").exists()


def test_a_selection_that_names_nothing_runnable_is_refused_with_the_closest_name(tmp_path, capsys):
    matrix = bare_matrix(tmp_path)
    base = ["--matrix", str(matrix), "floors", "calibrate", "--from", str(tmp_path)]
    assert main([*base, "-m", "cpu and lowlatency"]) == 2
    assert "unknown marker 'lowlatency' (did you mean 'low_latency'?)" in capsys.readouterr().err
    assert main([*base, LLAMA.replace("low_latency", "low_latncy")]) == 2
    assert "(did you mean" in capsys.readouterr().err
    assert main([*base, "-m", "cpu and rpc_split"]) == 2  # two hosts, the local inventory has one
    said = capsys.readouterr().err
    assert "left out: smollm2-135m/cpu+llama.cpp/rpc_split/baseline: needs 2 cpu hosts" in said
    assert "selects no cell that hosts/local.yaml can run" in said
    assert main(base) == 2
    assert "expected a CELL or -m EXPR" in capsys.readouterr().err


def test_the_help_and_the_docs_give_the_same_two_commands(capsys):
    """A developer on a new CPU kind reads the procedure in --help or in docs/measurement.md: the
    calibration and the slowdown check, the same lines in both."""
    import pytest

    from .conftest import REPO

    with pytest.raises(SystemExit):
        main(["floors", "calibrate", "--help"])
    said = capsys.readouterr().out
    lines = [
        line.strip() for line in said.splitlines() if line.strip().startswith(("dayzero floors", "DAYZERO_"))
    ]
    assert len(lines) == 2 and "-m cpu" in lines[0] and "test_floors_slowdown_e2e" in lines[1]
    docs = (REPO / "docs" / "measurement.md").read_text()
    assert all(line in docs for line in lines)


def test_the_runs_serve_every_selected_cell_with_the_floors_phase_alone(tmp_path, monkeypatch, capsys):
    """The run path, on the stub engine (its speed is no measurement: this is the path, not the
    numbers): `-m MODEL --runs 2` runs both cells of a stub card twice, each run one pytest of the
    suites on the floors-only copy (the card's sweep is never measured), and writes both files."""
    import random

    from .conftest import REPO
    from .stub_cells import stub_card, stub_inventory, stub_matrix

    card = stub_card(model="calib")
    card["recipe"]["port"] = random.randint(20000, 29000)  # ours alone: other runs use the stub too
    card["sweeps"] = [
        {"name": "conc", "kind": "concurrency", "workload": "default", "points": [1], "num_prompts": 2}
    ]
    matrix, inventory = stub_matrix(tmp_path, card), stub_inventory(tmp_path, ttft=0.01)
    cells = sorted(c.id for c in load(matrix).cells)
    monkeypatch.chdir(REPO)  # the suites are the checkout's
    argv = ["--matrix", str(matrix), "floors", "calibrate", "-m", "calib", "--runs", "2"]
    assert main([*argv, "--hosts", str(inventory), "--work", str(tmp_path / "work")]) == 0, (
        capsys.readouterr()
    )
    said = capsys.readouterr()
    (copy,) = (tmp_path / "work").glob("*/matrix")
    assert f"the runs' matrix, the floors phase alone: {copy}" in said.err
    assert "run 1/2: 2 cell(s)" in said.err and "run 2/2: 2 cell(s)" in said.err
    assert "sweeps" not in yaml.safe_load((copy / "models" / "calib.yaml").read_text())
    runs = sorted(copy.parent.glob("run-*"))
    docs = [doc for run in runs for _, doc in evidence.iter_evidence(run)]
    assert len(runs) == 2 and sorted(d["cell"] for d in docs) == sorted(2 * cells)
    assert {c["family"] for d in docs for c in d["checks"]} == {"floor"}  # no sweep point measured
    written = {
        p.name.split(".")[0]: yaml.safe_load(p.read_text()) for p in (matrix / "floors").rglob("*.yaml")
    }
    assert sorted(written) == sorted(evidence.slug(c) for c in cells)
    assert all(len(doc["provenance"]["runs"]) == 2 for doc in written.values())  # each cell from both runs


def load(matrix):
    from dayzero.spec.matrix import load_matrix

    return load_matrix(matrix)
