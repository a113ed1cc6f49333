"""`dayzero acceptance`: write the acceptance table (Markdown and HTML) from evidence and the matrix."""

from __future__ import annotations

import sys
from pathlib import Path

from dayzero.cli.common import REPORTS, add_stale_after
from dayzero.spec.matrix import load_matrix


def add(sub) -> None:
    p = sub.add_parser(
        "acceptance",
        help="write reports/acceptance.md and .html from evidence and the matrix",
        description=__doc__,
    )
    p.add_argument("--reports", default=REPORTS, help=f"a run's reports dir (default: {REPORTS})")
    add_stale_after(p)
    p.add_argument(
        "--history",
        metavar="STORE",
        help="draw each cell's trend across nights from this results store (dayzero history): "
        "a SQLite file or postgresql:// DSN",
    )
    p.set_defaults(func=run)


def run(args) -> int:
    from dayzero.report.acceptance import orphaned, write_acceptance

    matrix = load_matrix(args.matrix)
    trends = None
    if args.history:
        from dayzero.history.store import open_store
        from dayzero.report.pictures import sparklines

        with open_store(args.history) as store:
            trends = sparklines(store, [c.id for c in matrix.cells])
    print(write_acceptance(matrix, Path(args.reports), max_age_days=args.stale_after, trends=trends))
    for cell_id, path in orphaned(matrix, Path(args.reports)):
        print(f"dayzero: {path}: orphaned evidence: no cell of the matrix is {cell_id!r}", file=sys.stderr)
    return 0
