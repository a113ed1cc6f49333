"""What several verbs share: the cell filters and the default paths."""

from __future__ import annotations

import argparse

from dayzero.spec.matrix import Cell, Matrix

HOSTS = "hosts/local.yaml"
REPORTS = "reports"
GOLDENS = "suites/goldens"
STALE_AFTER_DAYS = 30.0
# `--status` words -> a cell's published status; `verified` kept for older scripts
STATUSES = {
    "published": "verified",
    "verified": "verified",
    "pending": "pending",
    "unsupported": "unsupported",
}


def add_filters(p: argparse.ArgumentParser) -> None:
    p.add_argument("cell", nargs="*", help="cell id(s), e.g. smollm2-135m/cpu+llama.cpp/low_latency/baseline")
    p.add_argument("--model")
    p.add_argument("--hardware")
    p.add_argument("--mode")
    p.add_argument("--strategy")


def add_stale_after(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--stale-after",
        type=float,
        default=STALE_AFTER_DAYS,
        help=f"days before evidence is Stale ({STALE_AFTER_DAYS:g})",
    )


def unknown_cell(name: str) -> SystemExit:
    return SystemExit(f"dayzero: unknown cell {name!r} (see `dayzero matrix`)")


def select(matrix: Matrix, args) -> list[Cell]:
    """The cells named on the command line, or those every given filter matches."""
    cells = list(matrix.cells)
    if getattr(args, "cell", None):
        try:
            return [matrix.cell(c) for c in args.cell]
        except KeyError as exc:
            raise unknown_cell(exc.args[0]) from None
    for attr in ("model", "hardware", "mode", "strategy", "status"):
        wanted = getattr(args, attr, None)
        if wanted:
            key = "published" if attr == "status" else attr
            wanted = STATUSES.get(wanted, wanted) if attr == "status" else wanted
            cells = [c for c in cells if getattr(c, key) == wanted]
    return cells
