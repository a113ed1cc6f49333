"""`dayzero floors calibrate CELL`: run a cell N times on a quiet reference host and write its
floors at a stated fraction of the measured lower bound, with provenance (`checks.calibration`)."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from pathlib import Path

import yaml

from dayzero import atomic, evidence
from dayzero.checks.calibration import DEFAULT_FRACTION, calibrate
from dayzero.cli.common import HOSTS
from dayzero.errors import ConfigError

SUITE = "suites/test_cells.py::test_cell"
FLOORS_DIR = "floors"  # under the matrix: matrix/floors/<model>/<cell slug>.<cpu kind>.yaml


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
        help="read the evidence of these reports folders instead of running (repeatable)",
    )
    cal.add_argument("--hosts", default=HOSTS, help=f"inventory for the runs (default: {HOSTS})")
    cal.add_argument(
        "--work", type=Path, default=Path("reports/calibration"), help="where the runs' reports go"
    )
    cal.add_argument(
        "--out", type=Path, help="the floors file (default: MATRIX/floors/<model>/<cell>.<cpu>.yaml)"
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
        (doc for folder in sources for _, doc in evidence.iter_evidence(folder) if doc["cell"] == args.cell),
        key=lambda d: d["run"]["finished"],
    )
    if not docs:
        raise ConfigError(
            sources[0], "evidence", f"no evidence of {args.cell} in {', '.join(map(str, sources))}"
        )
    result = calibrate(args.cell, docs, args.fraction)
    kinds = result.provenance["cpu_kinds"]
    out = args.out or (
        Path(args.matrix)
        / FLOORS_DIR
        / args.cell.split("/")[0]
        / f"{evidence.slug(args.cell)}.{'+'.join(kinds)}.yaml"
    )
    document = {
        **result.to_json(),
        "calibrated": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "engine_versions": sorted({d["engine"].get("version", "") for d in docs}),
    }
    atomic.write_text(
        out,
        "# written by `dayzero floors calibrate`; the card's floors cite it\n"
        + yaml.safe_dump(document, sort_keys=False),
    )
    for f in result.floors:
        print(
            f"[floors] {f.check}: {f.direction} {f.bound:g} ({args.fraction:g} of the worst run's "
            f"{'lower' if f.direction == 'min' else 'upper'} bound over {len(f.sides)} run(s): "
            f"{json.dumps(list(f.sides))})"
        )
    for why in result.left_out:
        print(f"[floors] left out: {why}")
    print(f"[floors] written: {out}")
    return 0 if result.floors else 1
