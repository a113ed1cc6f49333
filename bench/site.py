"""`dayzero site` at a lab network's size: 240 cells x 365 nights x 3 labs in one store, the site
built by the real command, its build time and its largest page's weight.

    .venv/bin/python bench/site.py [--cells 240] [--nights 365] [--labs 3] [--out D]

The store is filled in memory (tests/history_nights.py's documents, 3 series a cell, the
throughput's interval on every night; each lab its own level and noise, one cell in ten slowed
at a night whose recipe changed; bench/history_ingest.py times ingest on files). Each cell's
newest night in each lab is on disk, and one cell in forty has a vendor's run there (the site
reads them: links, cards, reproduction). Then `dayzero site OUT --store S` runs as a subprocess.
Figures go to reports/bench/site.json with the machine, the command's CPU seconds and the load
average.
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
from dayzero import evidence  # noqa: E402
from dayzero.history.points import read  # noqa: E402
from dayzero.history.rows import rows_of  # noqa: E402
from dayzero.history.store import open_store  # noqa: E402
from tests.history_nights import CELL, night_doc, noisy_year  # noqa: E402


def fill(store, cells: int, nights: int, labs: int, files: Path) -> int:
    rng = np.random.default_rng(43)
    model, hardware, mode, _ = CELL.split("/")
    rows = []
    for lab in range(labs):
        for c in range(cells):
            cell = f"{model}/{hardware}/{mode}/s{c:03d}"
            level, ttft, at = noisy_year(rng, nights, c % 10 == lab)
            for n in range(nights):
                recipe = "slower" if at is not None and n >= at else "370a065910226f54"
                value = round(float(level[n]) * (1 + lab / 10), 3)
                doc = night_doc(
                    n,
                    value,
                    cell=cell,
                    ttft_ms=round(float(ttft[n]), 3),
                    recipe=recipe,
                    lab=f"lab-{lab}",
                    controller=f"controller-{lab}",
                )
                interval = {"lo": value * 0.98, "hi": value * 1.02, "n": 8, "runs": 1, "method": "bootstrap"}
                doc["checks"][0]["details"]["intervals"] = {"output_throughput": interval}
                path = f"lab-{lab}/{cell}/{n}.json"
                if n == nights - 1:  # the newest night is on disk: the site links and reads it
                    path = str(evidence.write(files / f"lab-{lab}", doc))
                    if lab == 0 and c % 40 == 0:
                        vendor = night_doc(n, value, cell=cell, vendor="acme", controller="acme-ci")
                        rows.append(rows_of(evidence.write(files / "acme", vendor), read(vendor)))
                rows.append(rows_of(path, read(doc)))
    return store.put(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--cells", type=int, default=240)
    parser.add_argument("--nights", type=int, default=365)
    parser.add_argument("--labs", type=int, default=3)
    parser.add_argument(
        "--out", type=Path, default=None, help="keep the site there (default: a temporary folder)"
    )
    parser.add_argument("--result", type=Path, default=ROOT / "reports" / "bench" / "site.json")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        target, out = str(Path(tmp) / "history.sqlite"), args.out or Path(tmp) / "site"
        t = time.perf_counter()
        with open_store(target) as store:
            runs = fill(store, args.cells, args.nights, args.labs, Path(tmp) / "evidence")
        filled = time.perf_counter() - t
        load = load_average()
        took, cpu, _ = timed("site", str(out), "--store", target)
        pages = {p.relative_to(out): p.stat().st_size for p in out.rglob("*.html")}
    largest = max(pages, key=pages.__getitem__)
    by_kind = {
        kind: max((size for p, size in pages.items() if p.parts[0] == folder), default=0)
        for kind, folder in (("cell", "cells"), ("night", "nights"), ("card", "cards"))
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
        "card_pages": sum(p.parts[0] == "cards" for p in pages),
        "bytes": sum(pages.values()),
        "largest_page": str(largest),
        "largest_page_bytes": pages[largest],
        "largest_by_kind_bytes": {"grid": pages[Path("index.html")], **by_kind},
        "load_average_before": load,
        "load_average_after": load_average(),
    }
    write_result(args.result, result)
    print(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
