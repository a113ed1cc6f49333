"""`dayzero report`: the acceptance table, benchmark cards and single-file Allure 3 report of a run."""

from __future__ import annotations

import time
from pathlib import Path

from dayzero.cli import card
from dayzero.cli.common import REPORTS, add_stale_after
from dayzero.spec.matrix import load_matrix


def add(sub) -> None:
    p = sub.add_parser(
        "report",
        help="build the acceptance table and the single-file Allure 3 HTML report (with history)",
        description=__doc__,
    )
    p.add_argument("--reports", default=REPORTS, help=f"a run's reports dir (default: {REPORTS})")
    p.add_argument("--output", help="report directory (default: <reports>/allure-report)")
    p.add_argument("--history", help="Allure history file (default: <reports>/allure-history.jsonl)")
    p.add_argument("--name", default="dayzero", help="report title")
    add_stale_after(p)
    card.add_prices(p)
    p.add_argument("--allure", help="where Allure 3 is installed (default: $DAYZERO_ALLURE, tools/allure)")
    p.set_defaults(func=run)


def run(args) -> int:
    """From what a run left in --reports."""
    from dayzero.report import allure_build
    from dayzero.report.acceptance import write_acceptance

    reports = Path(args.reports)
    cards = card.write(
        args.matrix, reports, prices_file=args.prices
    )  # first: the acceptance table links them
    print(f"cards: {len(cards)} in {reports / 'cards'}")
    table = write_acceptance(load_matrix(args.matrix), reports, max_age_days=args.stale_after)
    print(f"acceptance: {table} and {table.with_suffix('.html')}")
    started = time.monotonic()
    index = allure_build.build(
        reports,
        Path(args.output) if args.output else None,
        history=Path(args.history) if args.history else None,
        name=args.name,
        allure=args.allure,
        near=Path(args.matrix).resolve().parent,
        say=lambda message: print(f"report: {message}"),
    )
    size = index.stat().st_size / 2**20
    print(f"report: {index} ({size:.1f} MiB, built in {time.monotonic() - started:.1f}s)")
    return 0
