"""`dayzero matrix`: list cells with their published status."""

from __future__ import annotations

import sys

from dayzero.cli.common import add_filters, select
from dayzero.spec.matrix import load_matrix


def add(sub) -> None:
    p = sub.add_parser("matrix", help="list cells with their published status", description=__doc__)
    add_filters(p)
    p.add_argument("--status", choices=["verified", "pending", "unsupported"])
    p.set_defaults(func=run)


def run(args) -> int:
    cells = select(load_matrix(args.matrix), args)
    width = max((len(c.id) for c in cells), default=10)
    for c in cells:
        reason = f"  ({c.reason})" if c.reason else ""
        print(f"{c.id:<{width}}  {c.published:<11}  nodes={c.nodes}{reason}")
    print(f"\n{len(cells)} cell(s)", file=sys.stderr)
    return 0
