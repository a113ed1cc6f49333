"""`dayzero card`: the benchmark cards (one per model x hardware kind) from the evidence of a run."""

from __future__ import annotations

from pathlib import Path

from dayzero.cli.common import REPORTS
from dayzero.spec.matrix import load_matrix


def add(sub) -> None:
    p = sub.add_parser(
        "card",
        help="write reports/cards/<model>/<kind>.{md,html,json}: sweep table, Pareto, context plot",
        description=__doc__,
    )
    p.add_argument("--reports", default=REPORTS, help=f"a run's reports dir (default: {REPORTS})")
    p.add_argument("--model", action="append", default=[], help="only this model's cards (repeatable)")
    add_prices(p)
    p.add_argument(
        "--history",
        metavar="STORE",
        help="draw each cell's series across nights, change points marked, from this results store "
        "(dayzero history): a SQLite file or postgresql:// DSN",
    )
    p.set_defaults(func=run)


def add_prices(p) -> None:
    p.add_argument(
        "--prices",
        help="the lab's prices per accelerator-hour (YAML, `prices: {<kind>: {per_accelerator_hour, "
        "currency, source, date}}`; e.g. hosts/prices.example.yaml): cost per 1M tokens on every card; "
        "a kind it names replaces the catalogue's price",
    )


def run(args) -> int:
    store = None
    if args.history:
        from dayzero.history.store import open_store

        store = open_store(args.history)
    try:
        for path in write(args.matrix, Path(args.reports), args.model, args.prices, store):
            print(f"card: {path}")
    finally:
        if store is not None:
            store.close()
    return 0


def write(
    matrix_dir: str, reports: Path, models=(), prices_file: str | None = None, history=None
) -> list[Path]:
    from dayzero.report.benchcard import write_cards
    from dayzero.report.cost import load_prices, prices

    matrix = load_matrix(matrix_dir)
    price_of = {**prices(matrix), **load_prices(Path(prices_file), matrix)} if prices_file else None
    return write_cards(matrix, reports, models, price_of, history)
