"""`dayzero golden record`: run cells' probes and keep their outputs as goldens, with provenance."""

from __future__ import annotations

import sys
from pathlib import Path

from dayzero.cli.common import GOLDENS, HOSTS, REPORTS, add_filters, select
from dayzero.spec.inventory import load_inventory
from dayzero.spec.matrix import load_matrix


def add(sub) -> None:
    p = sub.add_parser("golden", help="golden outputs", description=__doc__)
    gsub = p.add_subparsers(dest="golden_command", required=True)
    g = gsub.add_parser(
        "record", help="run cells' probes and record their outputs as goldens, with provenance"
    )
    add_filters(g)
    g.add_argument("--hosts", default=HOSTS, help=f"inventory (default: {HOSTS})")
    g.add_argument("--goldens", default=GOLDENS, help=f"golden outputs directory (default: {GOLDENS})")
    g.add_argument("--reports", default=REPORTS, help=f"where the run's evidence goes (default: {REPORTS})")
    g.add_argument(
        "--alternate",
        metavar="WHY",
        default="",
        help="keep this machine's outputs beside the existing golden instead of replacing it, saying why "
        "(e.g. 'AMD EPYC, AVX2 only: CPU rounding turns a near-tie'); same recipe and engine only",
    )
    g.set_defaults(func=run)


def run(args) -> int:
    from dayzero.run.cell import RunContext, new_run_id, run_cell
    from dayzero.spec.card import golden_source
    from dayzero.spec.goldens import golden_path

    matrix = load_matrix(args.matrix)
    inventory = load_inventory(args.hosts, set(matrix.hardware))
    ctx = RunContext(
        matrix,
        inventory,
        Path(args.reports),
        Path(args.goldens),
        new_run_id(),
        say=lambda m: print(f"[dayzero] {m}", file=sys.stderr),
        golden_alternate=args.alternate,
    )
    try:
        for cell in select(matrix, args):
            if not cell.supported:
                continue
            source, _ = golden_source(matrix.card(cell), cell)
            if source != cell.id and args.cell:
                print(f"{cell.id}: not recorded: its probes meet {source}'s golden; record that cell")
                continue
            if source != cell.id:
                continue
            outcome = run_cell(ctx, cell, record_goldens=True)
            if outcome.error:
                print(f"{cell.id}: not recorded: {outcome.error}", file=sys.stderr)
                return 1
            print(f"{cell.id}: golden written to {golden_path(ctx.goldens_dir, cell.id)}")
    finally:
        ctx.close()
    return 0
