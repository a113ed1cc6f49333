"""`dayzero site` at a lab network's size: 240 cells x 365 nights x 3 labs in one store, the site
built by the real command, its build time and its largest page's weight.

    .venv/bin/python bench/site.py [--cells 240] [--nights 365] [--labs 3] [--out D]

The store is filled in memory (tests/history_nights.py's documents, 3 series a cell; each lab its
own level and noise, one cell in ten slowed at a night whose recipe changed; bench/history_ingest.py
times ingest on files), then `dayzero site OUT --store S` runs as a subprocess. Figures go to
reports/bench/site.json with the machine, the command's CPU seconds and the load average.
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
from bench.history_ingest import timed  # noqa: E402
from dayzero.history.points import read  # noqa: E402
from dayzero.history.rows import rows_of  # noqa: E402
from dayzero.history.store import open_store  # noqa: E402
from tests.history_nights import CELL, night_doc, noisy_year  # noqa: E402


def fill(store, cells: int, nights: int, labs: int) -> int:
    rng = np.random.default_rng(43)
    model, hardware, mode, _ = CELL.split("/")
    rows = []
    for lab in range(labs):
        for c in range(cells):
            cell = f"{model}/{hardware}/{mode}/s{c:03d}"
            level, ttft, at = noisy_year(rng, nights, c % 10 == lab)
            for n in range(nights):
                recipe = "slower" if at is not None and n >= at else "370a065910226f54"
                doc = night_doc(
                    n,
                    round(float(level[n]) * (1 + lab / 10), 3),
                    cell=cell,
                    ttft_ms=round(float(ttft[n]), 3),
                    recipe=recipe,
                    lab=f"lab-{lab}",
                    controller=f"controller-{lab}",
                )
                rows.append(rows_of(f"lab-{lab}/{cell}/{n}.json", read(doc)))
    return store.put(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--cells", type=int, default=240)
    parser.add_argument("--nights", type=int, default=365)
    parser.add_argument("--labs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "dayzero-bench-site")
    parser.add_argument("--result", type=Path, default=ROOT / "reports" / "bench" / "site.json")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        target = str(Path(tmp) / "history.sqlite")
        t = time.perf_counter()
        with open_store(target) as store:
            runs = fill(store, args.cells, args.nights, args.labs)
        filled = time.perf_counter() - t
        load = load_average()
        took, cpu, _ = timed("site", str(args.out), "--store", target)
    pages = [p for p in args.out.rglob("*.html")]
    largest = max(pages, key=lambda p: p.stat().st_size)
    by_kind = {
        kind: max((p.stat().st_size for p in pages if p.parent.name == folder), default=0)
        for kind, folder in (("grid", args.out.name), ("cell", "cells"), ("night", "nights"))
    }
    result = {
        **machine(),
        "cells": args.cells,
        "nights": args.nights,
        "labs": args.labs,
        "runs": runs,
        "store_filled_s": round(filled, 1),
        "build_s": round(took, 1),
        "build_cpu_s": round(cpu, 1),
        "pages": len(pages),
        "bytes": sum(p.stat().st_size for p in pages),
        "largest_page": str(largest.relative_to(args.out)),
        "largest_page_bytes": largest.stat().st_size,
        "largest_by_kind_bytes": by_kind,
        "load_average_before": load,
        "load_average_after": load_average(),
    }
    write_result(args.result, result)
    print(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
