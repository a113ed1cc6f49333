"""`dayzero history`: every night's evidence in one store, a cell's series, its change points.

The store is SQLite under the nightly root by default (nothing to start); labs whose
controllers share a PostgreSQL give its DSN (--store postgresql://user@host/db, or the
DAYZERO_HISTORY environment variable). A run belongs to a lab (the inventory's `lab:`) and a
series is one lab's unless --across-labs. The evidence JSON stays the source of truth:
`ingest --rebuild` makes a scope of the store (a lab, a time range) again from folders of nights,
and refuses to delete a run whose evidence it is not given.

  dayzero history ingest reports/nightly                 every night's evidence (idempotent)
  dayzero history series CELL                            the cell's series, newest value of each
  dayzero history series CELL output_throughput@chat/c4  one series, night by night
  dayzero history changes --since 2026-11-01             change points, attributed
  dayzero history prune --older-than 400                 retention: forget runs older than 400 days
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
        "Store every evidence document under the folders (any depth: a night, or the nightly root), in "
        "one transaction. A run already stored (same cell, controller and run id) is replaced, never "
        "doubled; accepted vendor evidence is stored marked with its vendor. A folder that does not "
        "exist or holds no evidence is refused (exit 2), the store untouched.",
    )
    i.add_argument("folders", nargs="+", help="folders holding evidence/*.json, at any depth")
    i.add_argument(
        "--rebuild",
        action="store_true",
        help="first delete the stored runs in the scope (--lab, --since, --until; default every run), in "
        "the same transaction; refused (exit 1, nothing changed) if one of them has no evidence under "
        "the folders",
    )
    scope(i)
    i.add_argument(
        "--drop-missing",
        action="store_true",
        help="with --rebuild: forget the runs in the scope that have no evidence under the folders",
    )
    i.add_argument("--jobs", type=int, default=None, help="processes reading evidence (default: the cores)")

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
    labs(s)

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
    labs(c)
    c.add_argument("--jobs", type=int, default=None, help="processes searching (default: the cores)")

    r = verb(
        "prune",
        prune,
        "retention: forget runs older than an age",
        "Delete from the store the runs that finished more than DAYS days ago (of one lab with --lab). "
        "Their evidence stays where it is: ingesting it again brings them back.",
    )
    r.add_argument("--older-than", type=int, required=True, metavar="DAYS", help="age in days")
    r.add_argument("--lab", default=None, help="only this lab's runs (default: every lab's)")


def scope(p) -> None:
    p.add_argument("--lab", default=None, help="with --rebuild: only this lab's runs")
    p.add_argument("--since", default="", help="with --rebuild: only runs finished on or after (ISO, UTC)")
    p.add_argument("--until", default="", help="with --rebuild: only runs finished before (ISO, UTC)")


def labs(p) -> None:
    which = p.add_mutually_exclusive_group()
    which.add_argument("--lab", default=None, help="only this lab's series (default: each lab's apart)")
    which.add_argument(
        "--across-labs", action="store_true", help="every lab's runs in one series (labs are not told apart)"
    )


def _lab(args) -> str | None:
    from dayzero.history.store import ACROSS_LABS

    return ACROSS_LABS if args.across_labs else args.lab


def _open(args):
    from dayzero.history.store import open_store

    return open_store(args.store or default_store())


def _print(args, data, lines) -> None:
    print(json.dumps(data, indent=2)) if args.json else print("\n".join(lines) if lines else "(nothing)")


def ingest(args) -> int:
    from dayzero.history import sources
    from dayzero.history.store import Scope

    scoped = args.lab or args.since or args.until or args.drop_missing
    if scoped and not args.rebuild:
        print("dayzero: --lab, --since, --until and --drop-missing scope a --rebuild", file=sys.stderr)
        return 2
    runs = sources.read_files(sources.evidence_files(args.folders), args.jobs)  # before the store opens
    with _open(args) as store:
        if args.rebuild:
            count = store.put(runs, Scope(args.lab, args.since, args.until), args.drop_missing)
        else:
            count = store.put(runs)
        where, cells, total = store.where, len(store.cells()), store.count()
    _print(
        args,
        {"store": where, "ingested": count, "cells": cells, "runs": total},
        [f"{where}: {count} run(s) ingested; {total} run(s) of {cells} cell(s) stored"],
    )
    return 0


def series(args) -> int:
    with _open(args) as store:
        found = store.cell_series(args.cell, vendor=args.vendor, lab=_lab(args))
        names = sorted({name for _, name in found})
        if not names:
            print(f"dayzero: no runs of cell {args.cell!r} in {store.where}", file=sys.stderr)
            return 1
    if args.series is None:
        data = {f"{name} [{lab}]": [p.value for p in pts] for (lab, name), (_, pts) in sorted(found.items())}
        lines = [f"{n}: {len(v)} night(s), latest {v[-1]:g}" for n, v in data.items()]
        _print(args, {"cell": args.cell, "series": data}, lines)
        return 0
    if args.series not in names:
        print(
            f"dayzero: cell {args.cell!r} has no series {args.series!r}; it has: {', '.join(names)}",
            file=sys.stderr,
        )
        return 1
    points = [p for (_, name), (_, pts) in sorted(found.items()) if name == args.series for p in pts]
    data = [
        {"run_id": p.run_id, "lab": p.lab, "finished": p.finished, "value": p.value, "vendor": p.vendor}
        for p in points
    ]
    lines = [
        f"{p.finished}  {p.value:>12g}  {p.lab}  {p.run_id}" + (f"  (vendor {p.vendor})" if p.vendor else "")
        for p in points
    ]
    _print(args, {"cell": args.cell, "series": args.series, "points": data}, lines)
    return 0


def changes(args) -> int:
    from dayzero.history.trends import every_change

    with _open(args) as store:
        cells = args.cell or store.cells()
    found = every_change(args.store or default_store(), cells, args.since, _lab(args), args.jobs)
    found = [c for c in found if c.regression or not args.regressions]
    _print(args, [c.to_json() for c in found], [f"{c.cell} [{c.lab}]: {c.describe()}" for c in found])
    return 0


def prune(args) -> int:
    import datetime as dt

    from dayzero.history.store import Scope

    before = (dt.datetime.now(dt.UTC) - dt.timedelta(days=args.older_than)).isoformat(timespec="seconds")
    with _open(args) as store:
        gone, where = store.forget(Scope(args.lab, until=before)), store.where
    _print(
        args,
        {"store": where, "forgotten": gone, "before": before},
        [f"{where}: {gone} run(s) finished before {before} forgotten"],
    )
    return 0
