"""`dayzero floors calibrate`: run cells N times on a quiet reference host (or read the reports of
earlier runs, a whole main job's included) and write each cell's floors at a stated fraction of
its slowest quiet run's lower bound (a ceiling: that run's upper bound over the fraction), with
provenance, and how far a 2x slowdown of its fastest run sits past each (`checks.calibration`).
Each file, matrix/floors/<model>/<cell>.<cpu kind>.yaml, is picked up by the matrix loader on its
own: its bounds hold for that cell on that CPU kind (`spec.floorfiles`).

A developer on a CPU kind without floors calibrates every cpu cell with one command on a quiet
host (about 20 min for 3 runs on 2 cores), sees a 2x slowdown of each caught with another (about
12 min), then commits matrix/floors/:

  dayzero floors calibrate -m cpu --runs 3
  DAYZERO_SLOWDOWN=all .venv/bin/pytest tests/test_floors_slowdown_e2e.py -s

Each run is one pytest of the suites over every selected cell (so one cell's runs are spread over
the whole calibration), on a copy of the matrix with the floors phase alone (`spec.floorsonly`),
written under --work."""

from __future__ import annotations

import argparse
import datetime as dt
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import yaml

from dayzero import atomic, evidence
from dayzero.checks.calibration import DEFAULT_FRACTION, SLOWDOWN, Calibration, calibrate
from dayzero.cli.common import HOSTS
from dayzero.errors import ConfigError
from dayzero.run.preview import no_run
from dayzero.spec import floorfiles, floorsonly
from dayzero.spec.card import floors_for
from dayzero.spec.inventory import load_inventory
from dayzero.spec.matrix import Matrix, load_matrix
from dayzero.spec.suggest import did_you_mean

SUITE = "suites/test_cells.py"


def add(sub) -> None:
    p = sub.add_parser("floors", help="calibrate cells' floors from measured runs", description=__doc__)
    verbs = p.add_subparsers(dest="floors_verb", metavar="{calibrate}", required=True)
    cal = verbs.add_parser(
        "calibrate",
        help="run cells N times (or read runs' reports) and write floors at a fraction of the slowest "
        "run's interval bound, with provenance",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cal.add_argument(
        "cells",
        nargs="*",
        metavar="CELL",
        help="cell id(s), e.g. smollm2-135m/cpu+llama.cpp/low_latency/baseline",
    )
    cal.add_argument(
        "-m",
        dest="markers",
        default="",
        metavar="EXPR",
        help="the cells this marker expression selects, as the suites' `pytest -m` does (e.g. cpu), "
        "that are supported and that the inventory (--hosts) can run; with CELLs, those as well",
    )
    cal.add_argument(
        "--runs",
        type=int,
        default=3,
        metavar="N",
        help="runs of the selection, each a fresh launch of every cell (default 3)",
    )
    cal.add_argument(
        "--fraction",
        type=float,
        default=DEFAULT_FRACTION,
        metavar="F",
        help=f"the floor as this share of the slowest run's lower bound (default {DEFAULT_FRACTION})",
    )
    cal.add_argument(
        "--from",
        dest="sources",
        action="append",
        default=[],
        type=Path,
        metavar="DIR",
        help="read the cells' evidence in these reports folders instead of running (repeatable; "
        "a whole main job's folder, `pytest -m cpu --reports=DIR`, gives each selected cell's; a "
        "folder holding none of the selected cells is refused)",
    )
    cal.add_argument("--hosts", default=HOSTS, help=f"inventory for the runs and -m (default: {HOSTS})")
    cal.add_argument(
        "--work",
        type=Path,
        default=Path("reports/calibration"),
        help="where the runs go: <UTC stamp>/matrix (the copy with the floors phase alone) and "
        "<stamp>/run-N (each run's reports and pytest log) (default: reports/calibration)",
    )
    cal.add_argument(
        "--out",
        type=Path,
        help="the floors file, for one cell (default: MATRIX/floors/<model>/<cell>.<cpu kind>.yaml, "
        "which the matrix loader picks up by itself)",
    )
    cal.set_defaults(func=run)


def say(line: str) -> None:
    print(f"[floors] {line}", file=sys.stderr, flush=True)


def selection(matrix: Matrix, args) -> list[str]:
    """The cells to calibrate: those named, then those `-m` selects that are supported and that
    the inventory can run (the others are named on stderr, as the suites would skip them)."""
    if not args.cells and not args.markers:
        raise ConfigError(Path("floors calibrate"), "", "expected a CELL or -m EXPR (e.g. -m cpu)")
    known = {c.id for c in matrix.cells}
    for name in args.cells:
        if name not in known:
            raise ConfigError(
                matrix.root, "cell", f"no cell {name!r} in this matrix{did_you_mean(name, known)}"
            )
    chosen = list(dict.fromkeys(args.cells))
    if args.markers:
        from dayzero.plugin import markers  # pytest's own parser of -m: imported for -m alone

        if problems := markers.unknown_markers(args.markers, set(matrix.marker_names)):
            raise ConfigError(Path("-m"), "", "; ".join(problems))
        inventory = load_inventory(Path(args.hosts), matrix.hardware)
        for cell in markers.selected(args.markers, matrix.cells):
            why = "unsupported" if not cell.supported else no_run(matrix, inventory, cell)
            if why:
                say(f"left out: {cell.id}: {why}")
            elif cell.id not in chosen:
                chosen.append(cell.id)
        if not chosen:
            raise ConfigError(Path("-m"), "", f"{args.markers!r} selects no cell that {args.hosts} can run")
    return chosen


def run_suites(args, matrix: Path, folder: Path, cells: list[str]) -> None:
    """One run of the selection by the suites' own test (a fresh launch of each cell), its
    reports and log in `folder`; whatever it exits, its evidence is what counts (a missed floor
    is still a measurement)."""
    chosen = ["-m", args.markers, SUITE] if not args.cells else [f"{SUITE}::test_cell[{c}]" for c in cells]
    cmd = [sys.executable, "-m", "pytest", *chosen, f"--reports={folder}", f"--hosts={args.hosts}"]
    cmd += [f"--matrix={matrix}", "-p", "no:cacheprovider", "-q", "-rA"]
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "pytest.log"
    say(f"{' '.join(cmd)} > {log}")
    started = time.monotonic()
    with log.open("w") as out:
        code = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, check=False).returncode
    say(f"pytest exited {code} after {(time.monotonic() - started) / 60:.1f} min")


def evidence_by_cell(folder: Path) -> dict[str, list[dict]]:
    """Every cell's evidence in one reports folder (a main job's holds every cell's)."""
    found: dict[str, list[dict]] = {}
    if not (folder / evidence.EVIDENCE_DIR).is_dir():
        return found
    for _, doc in evidence.iter_evidence(folder):
        found.setdefault(doc["cell"], []).append(doc)
    return found


def only_floors_of(result: Calibration, matrix: Matrix) -> Calibration:
    """The calibration less the checks that are no floor of the cell in this matrix (a run of an
    older card): the loader would refuse a file naming them."""
    cell = matrix.cell(result.cell)
    known = {f.name for f in floors_for(matrix.card(cell), cell)}
    gone = [
        f"{f.check}: not a floor of {result.cell} in {matrix.root}"
        for f in result.floors
        if f.check not in known
    ]
    return replace(
        result,
        floors=tuple(f for f in result.floors if f.check in known),
        left_out=(*result.left_out, *gone),
    )


def gather(args, cells: list[str]) -> tuple[list[Path], dict[str, list[dict]]]:
    """Every run's folder and the selected cells' evidence in them: the `--from` folders (one
    holding none of the cells is refused), else N runs of the selection, made here."""
    by_cell: dict[str, list[dict]] = {c: [] for c in cells}
    sources = list(args.sources)
    if not sources:
        work = args.work / dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
        copy = floorsonly.write_copy(Path(args.matrix), work / "matrix")
        say(f"the runs' matrix, the floors phase alone: {copy}")
        sources = [work / f"run-{i}" for i in range(1, args.runs + 1)]
        for i, folder in enumerate(sources, 1):
            say(f"run {i}/{args.runs}: {len(cells)} cell(s)")
            run_suites(args, copy, folder, cells)
    what = cells[0] if len(cells) == 1 else f"any of the {len(cells)} selected cells"
    for i, folder in enumerate(sources, 1):
        found = evidence_by_cell(folder)
        if args.sources and not any(c in found for c in cells):
            raise ConfigError(
                folder,
                "evidence",
                f"no evidence of {what} here (cells: {', '.join(sorted(found)) or 'none'})",
            )
        for cell in cells:
            by_cell[cell] += found.get(cell, [])
            if cell not in found:
                say(f"{cell}: measured nothing in run {i}/{len(sources)} ({folder})")
    return sources, by_cell


def write_floors(args, result: Calibration, docs: list[dict], kind: str) -> Path:
    out = args.out or floorfiles.path_of(Path(args.matrix), result.cell, kind)
    document = {
        **result.to_json(),
        "rule": floorfiles.RULE,
        "calibrated": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "engine_versions": sorted({d["engine"].get("version", "") for d in docs}),
    }
    atomic.write_text(
        out,
        "# written by `dayzero floors calibrate`; the matrix loader attaches its bounds to this cell's "
        f"floors on {kind} (dayzero/spec/floorfiles.py)\n" + yaml.safe_dump(document, sort_keys=False),
    )
    return out


def show(result: Calibration) -> list[str]:
    """Each floor's bound and margins; returns the floors a 2x slowdown of the fastest run passes."""
    short = []
    for f in result.floors:
        near = "lower" if f.direction == "min" else "upper"
        print(
            f"[floors] {f.check}: {f.direction} {f.bound:g}, {f.quiet_margin:.2f}x from the slowest "
            f"run's {near} bound {f.slowest:g}, {f.slowdown_margin:.2f}x from the fastest run slowed "
            f"{SLOWDOWN:g}x ({f.slowed:g}) over {len(f.sides)} run(s)"
        )
        if f.slowdown_margin < 1:
            short.append(f.check)
    for why in result.left_out:
        print(f"[floors] left out: {why}")
    return short


DAYS_APART_HOURS = 12.0  # runs closer than this sampled one stretch of the host's speed


def runs_span_hours(docs_of_cells) -> float | None:
    """Hours between the first and the last run that finished, over every cell's evidence."""
    when = sorted(dt.datetime.fromisoformat(d["run"]["finished"]) for docs in docs_of_cells for d in docs)
    return (when[-1] - when[0]).total_seconds() / 3600 if when else None


def run(args) -> int:
    if args.runs < 1:
        raise ConfigError(Path("--runs"), "", f"expected at least 1 run, got {args.runs}")
    if not 0 < args.fraction <= 1:
        raise ConfigError(
            Path("--fraction"), "", f"expected a share of the slowest run in (0, 1], got {args.fraction}"
        )
    matrix = load_matrix(Path(args.matrix))
    cells = selection(matrix, args)
    if args.out and len(cells) != 1:
        raise ConfigError(Path("--out"), "", f"names one file: expected one cell, got {len(cells)} selected")
    sources, by_cell = gather(args, cells)
    results = {
        cell: only_floors_of(
            calibrate(cell, sorted(docs, key=lambda d: d["run"]["finished"]), args.fraction), matrix
        )
        for cell, docs in by_cell.items()
        if docs
    }
    kinds = sorted({k for r in results.values() for k in r.provenance["cpu_kinds"]})
    if results and (len(kinds) != 1 or kinds[0] == "unknown"):  # nothing is written
        raise ConfigError(
            sources[0],
            "hosts",
            f"the runs' hosts are of CPU kinds {kinds or ['none']}; expected one known kind "
            "(a calibrated bound holds on the kind it was measured on)",
        )
    missed = {cell: "no evidence in any run" for cell in cells if cell not in results}
    for cell, result in results.items():
        if len(cells) > 1:
            print(f"[floors] == {cell}")
        short = show(result)
        catching = [f.check for f in result.floors if f.check not in short]
        if short and catching:
            print(f"[floors] a {SLOWDOWN:g}x slowdown of the fastest run is caught by {', '.join(catching)}")
        elif short:
            print(
                f"[floors] warning: {cell}'s quiet runs spread too far for a floor at {args.fraction:g} "
                f"of the slowest to catch the fastest slowed {SLOWDOWN:g}x: no floor of it would fail "
                "such a slowdown on a day as fast as its fastest run"
            )
        if not result.floors:  # an earlier calibration stays as it was
            print(f"[floors] no floor of {cell} could be calibrated: nothing written")
            missed[cell] = "no floor could be calibrated"
            continue
        print(f"[floors] written: {write_floors(args, result, by_cell[cell], kinds[0])}")
    span = runs_span_hours(by_cell.values())
    if span is not None and span < DAYS_APART_HOURS:
        print(
            f"[floors] note: every run finished within {span:.1f} h: one stretch of the host's speed. "
            "A host's quiet speed moves between hours and days (the main job's lower bounds 1.2-1.6x "
            "apart 4 hours apart on one machine, vLLM's 1.8x 2 hours apart on another, "
            "docs/measurement.md): add runs of other days (--from) "
            "before trusting a floor to catch a 2x slowdown on a faster day"
        )
    if len(cells) > 1:
        on = kinds[0] if kinds else "no CPU kind"
        print(f"[floors] calibrated {len(cells) - len(missed)} of {len(cells)} cells on {on}")
    for cell, why in missed.items():
        print(f"[floors] not calibrated: {cell}: {why}")
    return 1 if missed else 0
