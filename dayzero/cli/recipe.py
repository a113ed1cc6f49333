"""`dayzero recipe`: a cell's launch commands, as `--dry-run` shows them (secrets masked)."""

from __future__ import annotations

from dayzero.cli.common import add_filters, select
from dayzero.run.preview import recipe_text
from dayzero.spec.inventory import load_inventory
from dayzero.spec.matrix import load_matrix


def add(sub) -> None:
    p = sub.add_parser(
        "recipe",
        help="print a cell's launch commands (by id or --hardware/--mode/--strategy)",
        description=__doc__,
    )
    add_filters(p)
    p.add_argument("--hosts", help="render with the hosts of this inventory instead of <node0>...")
    p.set_defaults(func=run)


def run(args) -> int:
    matrix = load_matrix(args.matrix)
    cells = select(matrix, args)
    if not cells:
        raise SystemExit("dayzero: no cell matches; try `dayzero matrix`")
    inventory = load_inventory(args.hosts, set(matrix.hardware)) if args.hosts else None
    for cell in cells:
        print(recipe_text(matrix, cell, inventory))
    return 0
