"""Calibrated floors held out against quiet runs: would a floor fail a quiet run, and catch it slowed 2x?

Each quiet run of a cell (its reports folder, `--from`, a main job's or a calibration's) is held
out in turn; its floors are calibrated from the others by `checks.calibration.calibrate`, at each
fraction asked (`--fractions`, of the slowest run's lower bound), and the held-out run is judged:
a cell-run *fails* where one of its floors' intervals misses its bound (its lower bound under a
floor, its upper over a ceiling), and is *caught* slowed 2x where one floor's interval, every
figure moved 2x (throughput halved, latency doubled), no longer clears it (failed or
inconclusive). The *closest clearance* is how far the held-out quiet runs that pass cleared their
nearest floor, the least and the tenth percentile: the room left for a slower machine of the
kind (CI's), which holding out runs of one machine cannot show. Runs the cell measured on another
protocol are the caller's to leave out (`--cell-from CELL=DIR`, which replaces a cell's folders).

    .venv/bin/python bench/floors_holdout.py --from R1 --from R2 ... [--cell-from CELL=DIR ...]

Reads evidence only: nothing is served. 2026-12-07's figures are in bench/README.md.
"""

from __future__ import annotations

import argparse
import collections
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dayzero.checks import calibration  # noqa: E402
from dayzero.checks.calibration import calibrate  # noqa: E402
from dayzero.cli import floors as floors_cli  # noqa: E402


def evidence_by_cell(folders: list[Path]) -> dict[str, list[dict]]:
    """Each cell's evidence over the folders, as `dayzero floors calibrate --from` reads them."""
    out: dict[str, list[dict]] = collections.defaultdict(list)
    for folder in folders:
        for cell, docs in floors_cli.evidence_by_cell(folder).items():
            out[cell] += docs
    return out


def intervals(doc: dict) -> dict[str, tuple[str, float, float]]:
    """check -> (direction, lo, hi) of a run's clean floors."""
    out = {}
    for c in doc["checks"]:
        d = c.get("details") or {}
        iv = d.get("interval") or {}
        if c["name"].startswith("floor:") and iv.get("lo") is not None and not d.get("contended"):
            out[c["name"]] = (d.get("direction", "min"), float(iv["lo"]), float(iv["hi"]))
    return out


def bounds(others: list[dict], cell: str, fraction: float) -> dict[str, float]:
    """The floors calibrated from `others` at `fraction` of the slowest run."""
    return {f.check: f.bound for f in calibrate(cell, others, fraction).floors}


def judge(held: dict, bound: dict[str, float], slowdown: float) -> tuple[bool, bool, float]:
    """(fails quiet, caught slowed, clearance): over the floors both the run and the calibration
    have; the clearance is how many times its nearest floor's interval clears the bound."""
    fails = caught = False
    clearance = math.inf
    for name, (direction, lo, hi) in intervals(held).items():
        if name not in bound:
            continue
        b = bound[name]
        if direction == "min":
            fails |= lo < b
            caught |= lo / slowdown < b
            clearance = min(clearance, lo / b)
        else:
            fails |= hi > b
            caught |= hi * slowdown > b
            clearance = min(clearance, b / hi)
    return fails, caught, clearance


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--from", dest="folders", action="append", type=Path, default=[], metavar="DIR")
    p.add_argument("--cell-from", action="append", default=[], metavar="CELL=DIR")
    p.add_argument(
        "--fractions",
        default="0.6,0.65,0.7,0.75,0.8",
        help="fractions of the slowest run to try (comma-separated)",
    )
    p.add_argument("--slowdown", type=float, default=calibration.SLOWDOWN)
    args = p.parse_args(argv)
    runs = evidence_by_cell(args.folders)
    own: dict[str, list[Path]] = collections.defaultdict(list)
    for item in args.cell_from:
        cell, _, folder = item.partition("=")
        own[cell].append(Path(folder))
    for cell, folders in own.items():
        runs[cell] = evidence_by_cell(folders).get(cell, [])
    rules = [(f"fraction {f}", float(f)) for f in args.fractions.split(",")]
    count = sum(len(d) for d in runs.values())
    print(f"{count} cell-runs of {len(runs)} cells, each held out against the others")
    for label, fraction in rules:
        fails, caught, total, failed, missed, clear = 0, 0, 0, [], [], []
        for cell, docs in sorted(runs.items()):
            for i, held in enumerate(docs):
                others = docs[:i] + docs[i + 1 :]
                if not others:
                    continue
                f, c, room = judge(held, bounds(others, cell, fraction), args.slowdown)
                clear += [] if f else [room]
                total += 1
                fails += f
                caught += c
                where = f"{cell.split('/', 1)[1]} run {held['run']['id']}"
                failed += [where] if f else []
                missed += [] if c else [where]
        slowed = f"slowed {args.slowdown:g}x caught {caught}/{total}"
        clear.sort()
        room = (
            f"closest clearance {clear[0]:.2f}x, tenth percentile {clear[len(clear) // 10]:.2f}x"
            if clear
            else ""
        )
        print(f"{label:>14}: quiet runs failing {fails}/{total}, {slowed}, {room}")
        for where in failed:
            print(f"{'':>16}fails quiet: {where}")
        for where in missed:
            print(f"{'':>16}passes slowed: {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
