"""A lab's year of nights in the results store: 240 cells x 365 nights, ingested, every series
searched for change points, against the previous-night comparison over the same nights.

    .venv/bin/python bench/history.py [--cells 240] [--nights 365] [--store postgresql://...]

Each night of each cell is one schema-valid evidence document (tests/history_nights.py: one
performance check with throughput and TTFT, one accuracy check: three series per cell), with
2% noise and, in one cell in ten, a 10% slowdown planted at a night whose recipe digest changed
with it. Documents are made in memory (no files: writing 87,600 JSON files would time the disk),
then timed:

- **ingest**: every document into a fresh store (SQLite by default, in a temporary folder);
- **change points**: every series of every cell read back and searched (`history.trends`);
- **baseline**: the previous-night comparison (`report.nightly.compare_docs`) of each night with
  the one before, for every cell, which is what the nightly did for its whole history until now.

The planted slowdowns found at their night are counted (a check the bench measures what it says).
Raw figures go to reports/bench/history.json; speeds are machine-dependent: read ratios.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tools")]

from bench.common import load_average, machine, write_result  # noqa: E402
from dayzero.history import changes, trends  # noqa: E402
from dayzero.history.store import open_store  # noqa: E402
from dayzero.report.nightly import compare_docs  # noqa: E402
from tests.history_nights import CELL, night_doc, noisy_year  # noqa: E402


def year(cells: int, nights: int) -> tuple[list[list[dict]], dict[str, int]]:
    """Every cell's nights, and the night of each planted slowdown."""
    rng = np.random.default_rng(31)
    model, hardware, mode, _ = CELL.split("/")
    out, planted = [], {}
    for c in range(cells):
        cell = f"{model}/{hardware}/{mode}/s{c:03d}"
        level, ttft, at = noisy_year(rng, nights, c % 10 == 0)
        if at is not None:
            planted[cell] = at
        docs = []
        for n in range(nights):
            recipe = "slower" if at is not None and n >= at else "370a065910226f54"
            docs.append(
                night_doc(
                    n, round(float(level[n]), 3), cell=cell, ttft_ms=round(float(ttft[n]), 3), recipe=recipe
                )
            )
        out.append(docs)
    return out, planted


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--cells", type=int, default=240)
    parser.add_argument("--nights", type=int, default=365)
    parser.add_argument("--store", help="a postgresql:// DSN (default: SQLite in a temporary folder)")
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "bench" / "history.json")
    args = parser.parse_args()

    t = time.perf_counter()
    cells, planted = year(args.cells, args.nights)
    made = time.perf_counter() - t
    tmp = tempfile.TemporaryDirectory()
    with tmp, open_store(args.store or Path(tmp.name) / "history.sqlite") as store:
        t = time.perf_counter()
        for docs in cells:
            store.ingest((f"{d['cell']}/{d['run']['id']}", d) for d in docs)
        ingest = time.perf_counter() - t

        changes.detect([1.0] * 20)  # numpy, scipy and ruptures imported outside the timing
        t = time.perf_counter()
        found = [c for cell in store.cells() for c in trends.cell_changes(store, cell)]
        detect = time.perf_counter() - t
        series = sum(len(store.series_names(cell)) for cell in store.cells())

    t = time.perf_counter()
    compared = sum(len(compare_docs(a, b)) for docs in cells for a, b in zip(docs, docs[1:], strict=False))
    baseline = time.perf_counter() - t

    hits = {
        c.cell
        for c in found
        if c.regression
        and c.series.startswith("output_throughput")
        and c.run_id.endswith(f"-{planted.get(c.cell, -1):05d}")
    }
    attributed = sum(1 for c in found if c.cell in hits and "recipe" in c.changed)
    spurious = [c for c in found if c.cell not in planted or not c.series.startswith("output_throughput")]
    total = ingest + detect
    result = {
        **machine(),
        "load_average": load_average(),
        "cells": args.cells,
        "nights": args.nights,
        "documents": args.cells * args.nights,
        "series": series,
        "store": "postgresql" if args.store else "sqlite",
        "generate_s": round(made, 2),
        "ingest_s": round(ingest, 2),
        "change_points_s": round(detect, 2),
        "total_s": round(total, 2),
        "baseline_previous_night_s": round(baseline, 2),
        "ratio_to_baseline": round(total / baseline, 2),
        "metrics_compared_by_baseline": compared,
        "planted": len(planted),
        "planted_found_at_their_night": len(hits),
        "planted_attributed_to_recipe": attributed,
        "change_points_elsewhere": len(spurious),
    }
    write_result(args.out, result)
    print(
        f"{args.cells} cells x {args.nights} nights ({result['documents']} documents, {series} series, "
        f"{result['store']}): ingest {ingest:.1f} s + change points {detect:.1f} s = {total:.1f} s; "
        f"previous-night comparison of the same nights {baseline:.1f} s (x{result['ratio_to_baseline']}); "
        f"planted slowdowns found at their night {len(hits)}/{len(planted)}, attributed to the recipe "
        f"{attributed}; change points elsewhere {len(spurious)} (load {result['load_average']})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
