"""`dayzero lint`: parse every cell's rendered commands with its engine's own parser."""

from __future__ import annotations

import sys

from dayzero.cli.common import add_filters, select
from dayzero.spec.matrix import load_matrix


def add(sub) -> None:
    p = sub.add_parser(
        "lint",
        help="parse every cell's commands with the engine's own parser (0 clean, 1 findings, 2 unreadable)",
        description=__doc__,
    )
    add_filters(p)
    p.set_defaults(func=run)


def run(args) -> int:
    """0 clean, 1 findings, 2 unreadable."""
    from dayzero.spec import lint

    matrix = load_matrix(args.matrix)
    try:
        return lint.main(matrix, select(matrix, args))
    except lint.LintError as exc:
        print(f"dayzero lint: {exc}", file=sys.stderr)
        return 2
