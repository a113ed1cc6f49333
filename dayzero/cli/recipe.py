"""`dayzero recipe`: a cell's launch commands, as `--dry-run` shows them (secrets masked).

The `--mamba-*` options are the inputs of the SGLang cookbook's Mamba ratio calculator; given,
they replace the card's `mamba_ratio` values and the computed `--mamba-full-memory-ratio` is
written into each server command whose mode pins none.
"""

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
    mamba = p.add_argument_group("Mamba ratio calculator (hybrid models; over the card's mamba_ratio)")
    for flag, key, kind, what in MAMBA_OPTIONS:
        mamba.add_argument(flag, dest=key, type=kind, help=what)
    p.set_defaults(func=run)


MAMBA_OPTIONS = (
    (
        "--mamba-state-bytes",
        "state_bytes_per_slot",
        float,
        "state bytes per slot (all linear-attention layers)",
    ),
    ("--mamba-kv-bytes", "kv_bytes_per_token", float, "KV bytes per token (all full-attention layers)"),
    ("--mamba-context", "context_tokens", float, "L: average context per request, input + output tokens"),
    (
        "--mamba-draft-tokens",
        "draft_tokens",
        int,
        "D: speculative draft tokens, where the command names none",
    ),
)


def geometry(card_geometry, args) -> dict | None:
    """The card's calculator inputs with those given on the command line over them (None: none given)."""
    given = {key: getattr(args, key) for _, key, _, _ in MAMBA_OPTIONS if getattr(args, key) is not None}
    return {**card_geometry, **given} if given else None


def run(args) -> int:
    matrix = load_matrix(args.matrix)
    cells = select(matrix, args)
    if not cells:
        raise SystemExit("dayzero: no cell matches; try `dayzero matrix`")
    inventory = load_inventory(args.hosts, matrix.hardware) if args.hosts else None
    for cell in cells:
        print(recipe_text(matrix, cell, inventory, geometry(matrix.card(cell).mamba_ratio, args)))
    return 0
