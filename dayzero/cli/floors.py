"""`dayzero floors calibrate CELL`: run a cell N times on a quiet reference host (or read the
reports of earlier runs, a whole main job's included) and write its floors at a stated fraction
of the measured lower bound (a ceiling: the worst upper bound over the fraction), with provenance
(`checks.calibration`). The file, matrix/floors/<model>/<cell>.<cpu kind>.yaml, is picked up by
the matrix loader on its own: its bounds hold for that cell on that CPU kind (`spec.floorfiles`)."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import yaml

from dayzero import atomic, evidence
from dayzero.checks.calibration import DEFAULT_FRACTION, Calibration, calibrate
from dayzero.cli.common import HOSTS
from dayzero.errors import ConfigError
from dayzero.spec import floorfiles
from dayzero.spec.card import floors_for
from dayzero.spec.matrix import load_matrix

SUITE = "suites/test_cells.py::test_cell"


def add(sub) -> None:
    p = sub.add_parser("floors", help="calibrate a cell's floors from measured runs", description=__doc__)
    verbs = p.add_subparsers(dest="floors_verb", metavar="{calibrate}", required=True)
    cal = verbs.add_parser(
        "calibrate",
        help="run a cell N times (or read runs' reports) and write floors at a fraction of the worst "
        "run's interval bound, with provenance",
        description=__doc__,
    )
    cal.add_argument("cell", help="cell id, e.g. smollm2-135m/cpu+llama.cpp/low_latency/baseline")
    cal.add_argument("--runs", type=int, default=3, help="runs of the cell, each a fresh launch (default 3)")
    cal.add_argument(
        "--fraction",
        type=float,
        default=DEFAULT_FRACTION,
        help=f"the floor as this share of the worst lower bound (default {DEFAULT_FRACTION})",
    )
    cal.add_argument(
        "--from",
        dest="sources",
        action="append",
        default=[],
        type=Path,
        help="read the cell's evidence in these reports folders instead of running (repeatable; "
        "a whole main job's folder, `pytest -m cpu --reports=DIR`, gives the named cell's alone)",
    )
    cal.add_argument("--hosts", default=HOSTS, help=f"inventory for the runs (default: {HOSTS})")
    cal.add_argument(
        "--work", type=Path, default=Path("reports/calibration"), help="where the runs' reports go"
    )
    cal.add_argument(
        "--out",
        type=Path,
        help="the floors file (default: MATRIX/floors/<model>/<cell>.<cpu kind>.yaml, which the "
        "matrix loader picks up by itself)",
    )
    cal.set_defaults(func=run)


def run_cell(args, folder: Path) -> None:
    """One run of the cell by the suites' own test (a fresh launch), its reports in `folder`;
    whatever it exits, its evidence is what counts (a missed floor is still a measurement)."""
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        f"{SUITE}[{args.cell}]",
        f"--reports={folder}",
        f"--hosts={args.hosts}",
        f"--matrix={args.matrix}",
        "-p",
        "no:cacheprovider",
        "-q",
    ]
    print(f"[floors] {' '.join(cmd)}", file=sys.stderr)
    code = subprocess.run(cmd, check=False).returncode
    print(f"[floors] pytest exited {code}", file=sys.stderr)


def cell_docs(folder: Path, cell: str) -> list[dict]:
    """The cell's evidence in one reports folder (a main job's holds every cell's); a folder
    without any is refused: a run that never measured the cell calibrates nothing."""
    found = [doc for _, doc in evidence.iter_evidence(folder)]
    mine = [doc for doc in found if doc["cell"] == cell]
    if not mine:
        held = sorted({doc["cell"] for doc in found})
        raise ConfigError(
            folder, "evidence", f"no evidence of {cell} here (cells: {', '.join(held) or 'none'})"
        )
    return mine


def only_floors_of(result: Calibration, matrix_root: Path) -> Calibration:
    """The calibration less the checks that are no floor of the cell in this matrix (a run of an
    older card): the loader would refuse a file naming them."""
    matrix = load_matrix(matrix_root)
    try:
        cell = matrix.cell(result.cell)
    except KeyError:
        raise ConfigError(matrix_root, "cell", f"no cell {result.cell!r} in this matrix") from None
    known = {f.name for f in floors_for(matrix.card(cell), cell)}
    gone = [
        f"{f.check}: not a floor of {result.cell} in {matrix_root}"
        for f in result.floors
        if f.check not in known
    ]
    return replace(
        result,
        floors=tuple(f for f in result.floors if f.check in known),
        left_out=(*result.left_out, *gone),
    )


def run(args) -> int:
    if args.runs < 1:
        raise ConfigError(Path("--runs"), "", f"expected at least 1 run, got {args.runs}")
    sources = list(args.sources)
    if not sources:
        stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
        for i in range(args.runs):
            folder = args.work / f"{stamp}-{i + 1}"
            run_cell(args, folder)
            sources.append(folder)
    docs = sorted(
        (doc for folder in sources for doc in cell_docs(folder, args.cell)),
        key=lambda d: d["run"]["finished"],
    )
    result = only_floors_of(calibrate(args.cell, docs, args.fraction), Path(args.matrix))
    kinds = result.provenance["cpu_kinds"]
    if len(kinds) != 1 or kinds[0] == "unknown":
        raise ConfigError(
            sources[0],
            "hosts",
            f"the runs' hosts are of CPU kinds {kinds or ['none']}; expected one known kind "
            "(a calibrated bound holds on the kind it was measured on)",
        )
    for f in result.floors:
        print(
            f"[floors] {f.check}: {f.direction} {f.bound:g} ({args.fraction:g} of the worst run's "
            f"{'lower' if f.direction == 'min' else 'upper'} bound over {len(f.sides)} run(s): "
            f"{json.dumps(list(f.sides))})"
        )
    for why in result.left_out:
        print(f"[floors] left out: {why}")
    if not result.floors:  # an earlier calibration stays as it was
        print(f"[floors] no floor of {args.cell} could be calibrated: nothing written")
        return 1
    out = args.out or floorfiles.path_of(Path(args.matrix), args.cell, kinds[0])
    document = {
        **result.to_json(),
        "rule": floorfiles.RULE,
        "calibrated": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "engine_versions": sorted({d["engine"].get("version", "") for d in docs}),
    }
    atomic.write_text(
        out,
        "# written by `dayzero floors calibrate`; the matrix loader attaches its bounds to this cell's "
        f"floors on {kinds[0]} (dayzero/spec/floorfiles.py)\n" + yaml.safe_dump(document, sort_keys=False),
    )
    print(f"[floors] written: {out}")
    return 0
