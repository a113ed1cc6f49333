"""`dayzero history`: every night's evidence in one store, a cell's series, its change points.

The store is SQLite under the nightly root by default (nothing to start); a lab whose
controllers share a PostgreSQL gives its DSN (--store postgresql://user@host/db, or the
DAYZERO_HISTORY environment variable). The evidence JSON stays the source of truth:
`ingest --rebuild` makes the store again from a folder of nights.

  dayzero history ingest reports/nightly                 every night's evidence (idempotent)
  dayzero history series CELL                            the cell's series, newest value of each
  dayzero history series CELL output_throughput@chat/c4  one series, night by night
  dayzero history changes --since 2026-11-01             change points, attributed
"""

from __future__ import annotations

import argparse
import json
import os
import sys

DEFAULT_STORE = "reports/nightly/history.sqlite"
ENV = "DAYZERO_HISTORY"


def default_store() -> str:
    return os.environ.get(ENV) or DEFAULT_STORE


def add(sub) -> None:
    p = sub.add_parser(
        "history",
        help="results across nights: ingest evidence, a cell's series, change points",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    verbs = p.add_subparsers(dest="history_verb", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--store",
        default=None,
        help=f"SQLite file or postgresql:// DSN (default: ${ENV}, else {DEFAULT_STORE})",
    )
    common.add_argument("--json", action="store_true", help="print JSON instead of text")

    def verb(name: str, func, short: str, long: str):
        p = verbs.add_parser(name, parents=[common], help=short, description=long)
        p.set_defaults(func=func)
        return p

    i = verb(
        "ingest",
        ingest,
        "store the evidence under folders (a night or a folder of nights)",
        "Store every evidence document under the folders (any depth: a night, or the nightly root). A run "
        "already stored (same cell and run id) is replaced, never doubled; accepted vendor evidence is "
        "stored marked with its vendor.",
    )
    i.add_argument("folders", nargs="+", help="folders holding evidence/*.json, at any depth")
    i.add_argument(
        "--rebuild", action="store_true", help="empty the store first: rebuild it from the evidence"
    )

    s = verb(
        "series",
        series,
        "a cell's series (or one of them, night by night)",
        "Without SERIES: each series of the cell (metric@workload, accuracy:..., speculative:...) with its "
        "number of nights and latest value. With SERIES: its values in time order.",
    )
    s.add_argument("cell", help="cell id, e.g. smollm2-135m/cpu+llama.cpp/low_latency/baseline")
    s.add_argument("series", nargs="?", help="one series, e.g. output_throughput@random-64-32/c1")
    s.add_argument("--vendor", action="store_true", help="include accepted vendor evidence (marked)")

    c = verb(
        "changes",
        changes,
        "change points since a date, with what changed",
        "Persistent shifts of each series (ruptures, tuned to each series' noise; a shift is found once "
        "five nights show it), each with its night, size and what changed with it (engine, recipe digest, "
        "harness, hosts, driver, weights).",
    )
    c.add_argument("--cell", action="append", default=[], help="only this cell (repeatable; default: all)")
    c.add_argument("--since", default="", help="ISO date, e.g. 2026-11-01 (default: the whole history)")
    c.add_argument(
        "--regressions", action="store_true", help="only the change points that made a series worse"
    )


def _open(args):
    from dayzero.history.store import open_store

    return open_store(args.store or default_store())


def _print(args, data, lines) -> None:
    print(json.dumps(data, indent=2)) if args.json else print("\n".join(lines) if lines else "(nothing)")


def ingest(args) -> int:
    with _open(args) as store:
        if args.rebuild:
            count = sum(
                store.rebuild(f) if i == 0 else store.ingest_folder(f) for i, f in enumerate(args.folders)
            )
        else:
            count = sum(store.ingest_folder(f) for f in args.folders)
        where, cells = store.where, len(store.cells())
    _print(
        args,
        {"store": where, "ingested": count, "cells": cells},
        [f"{where}: {count} run(s) ingested, {cells} cell(s)"],
    )
    return 0


def series(args) -> int:
    with _open(args) as store:
        names = dict(store.series_names(args.cell))
        if not names:
            print(f"dayzero: no runs of cell {args.cell!r} in {store.where}", file=sys.stderr)
            return 1
        if args.series is None:
            data = {n: [p.value for p in store.series(args.cell, n, args.vendor)] for n in names}
            lines = [
                f"{n}: {len(v)} night(s), latest {v[-1]:g}" if v else f"{n}: none" for n, v in data.items()
            ]
            _print(args, {"cell": args.cell, "series": data}, lines)
            return 0
        if args.series not in names:
            print(
                f"dayzero: cell {args.cell!r} has no series {args.series!r}; it has: {', '.join(names)}",
                file=sys.stderr,
            )
            return 1
        points = store.series(args.cell, args.series, args.vendor)
    data = [
        {"run_id": p.run_id, "finished": p.finished, "value": p.value, "vendor": p.vendor} for p in points
    ]
    lines = [
        f"{p.finished}  {p.value:>12g}  {p.run_id}" + (f"  (vendor {p.vendor})" if p.vendor else "")
        for p in points
    ]
    _print(args, {"cell": args.cell, "series": args.series, "points": data}, lines)
    return 0


def changes(args) -> int:
    from dayzero.history.trends import cell_changes

    with _open(args) as store:
        cells = args.cell or store.cells()
        found = [c for cell in cells for c in cell_changes(store, cell, args.since)]
    found = [c for c in found if c.regression or not args.regressions]
    _print(args, [c.to_json() for c in found], [f"{c.cell}: {c.describe()}" for c in found])
    return 0
