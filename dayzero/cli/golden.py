"""`dayzero golden record`: run cells' probes and keep their outputs as goldens, with provenance;
`dayzero golden check`: run cells' probes against their goldens (nothing measured, no evidence),
the quick answer to "does this machine, engine build or launch still answer as the golden did"."""

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
    c = gsub.add_parser(
        "check",
        help="run cells' probes against their goldens, near-ties tolerated (no evidence written)",
        description="Launch each selected cell, send its probes, compare the answers with the goldens "
        "(token by token with log-probabilities where both have them: a near-tie at the first divergence "
        "passes and is named) and print one line per golden check. "
        "Exit 0 when every one passed, 1 otherwise.",
    )
    add_filters(c)
    c.add_argument("--hosts", default=HOSTS, help=f"inventory (default: {HOSTS})")
    c.add_argument("--goldens", default=GOLDENS, help=f"golden outputs directory (default: {GOLDENS})")
    c.add_argument("--reports", default=REPORTS, help=f"where the raw records go (default: {REPORTS})")
    c.set_defaults(func=check)


def _context(args, **kw):
    from dayzero.run.cell import RunContext, new_run_id

    matrix = load_matrix(args.matrix)
    inventory = load_inventory(args.hosts, matrix.hardware)
    ctx = RunContext(
        matrix,
        inventory,
        Path(args.reports),
        Path(args.goldens),
        new_run_id(),
        say=lambda m: print(f"[dayzero] {m}", file=sys.stderr),
        **kw,
    )
    return matrix, ctx


def check(args) -> int:
    from dayzero.run.cell import run_cell

    matrix, ctx = _context(args)
    failed = ran = 0
    try:
        for cell in select(matrix, args):
            if not cell.supported:
                continue
            outcome = run_cell(ctx, cell, correctness_only=True)
            ran += 1
            if outcome.error:
                print(f"{cell.id}: FAILED: {outcome.error}")
                failed += 1
                continue
            for c in outcome.checks:
                if c.family == "golden":
                    print(f"{cell.id} {c.name}: {c.verdict.upper()}: {c.message.splitlines()[0]}")
                    failed += c.verdict == "failed"
    finally:
        ctx.close()
    if not ran:
        print("no supported cell selected", file=sys.stderr)
        return 5
    return 1 if failed else 0


def run(args) -> int:
    from dayzero.run.cell import run_cell
    from dayzero.spec.card import golden_source
    from dayzero.spec.goldens import golden_path

    matrix, ctx = _context(args, golden_alternate=args.alternate)
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
