"""`dayzero matrix`: list cells with their published status.

A cell its recipe's authors published as verified shows Published (their claim), as in the
acceptance table: only evidence makes a cell Verified, and this view reads no evidence.
"""

from __future__ import annotations

import sys

from dayzero.cli.common import STATUSES, add_filters, select
from dayzero.spec.card import published_word
from dayzero.spec.matrix import load_matrix


def add(sub) -> None:
    p = sub.add_parser("matrix", help="list cells with their published status", description=__doc__)
    add_filters(p)
    p.add_argument(
        "--status",
        choices=sorted(STATUSES),
        help="published status (`verified` is read as published: the authors' claim)",
    )
    p.set_defaults(func=run)


def run(args) -> int:
    cells = select(load_matrix(args.matrix), args)
    width = max((len(c.id) for c in cells), default=10)
    for c in cells:
        reason = f"  ({c.reason})" if c.reason else ""
        print(f"{c.id:<{width}}  {published_word(c):<11}  nodes={c.nodes}{reason}")
    print(f"\n{len(cells)} cell(s)", file=sys.stderr)
    return 0
