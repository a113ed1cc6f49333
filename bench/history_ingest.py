"""`dayzero history ingest` on the real path: 240 cells x 365 nights of evidence files on disk,
the command itself timed, then `dayzero history changes` (every series searched) on the store.

    .venv/bin/python bench/history_ingest.py [--cells 240] [--nights 365] [--postgresql] [--dir D]

Each night of each cell is one evidence file shaped like a real cell's (tests/history_nights.py's
document grown to a real one's parts: four probes, four goldens with their provenance, three
tool-call checks, two floors of three repetitions with every summary metric, an accuracy gate,
its records listed: 9 followed series a cell, ~16 KB a file), 2% noise, one cell in ten with a
10% slowdown at a night whose recipe changed. The files are written once into `--dir` (kept
between runs: the first run writes them, untimed) in `dayzero nightly`'s layout,
`nights/<stamp>/evidence/*.json`. Then, each in a fresh store (SQLite in a temporary folder;
with --postgresql, also a throwaway server from tools/devlab/postgres.py):

- **ingest**: `dayzero history ingest DIR --store S` as a subprocess (Python's start included);
- **changes**: `dayzero history changes --store S --json` (every lab's series of every cell).

The issue's line: ingest of 240 x 365 files in <= 60 s on 2 cores. Raw figures go to
reports/bench/history_ingest.json with the machine, each command's CPU seconds (its workers'
included) and the load average before and after it: a shared machine's other work inflates the
wall-clock figures, not the CPU ones.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tools")]

from bench.common import load_average, machine, write_result  # noqa: E402
from dayzero import evidence  # noqa: E402
from tests.history_nights import CELL, night_doc, noisy_year  # noqa: E402

METRICS = ("mean", "median", "p90", "p99")
LATENCIES = ("ttft_ms", "tpot_ms", "itl_ms", "e2e_latency_ms", "interactivity")


def summary(rng, throughput: float, ttft: float) -> dict:
    out = {
        f"{s}_{m}": round(float(ttft * (1 + 0.1 * i) * rng.uniform(0.9, 1.1)), 3)
        for m in LATENCIES
        for i, s in enumerate(METRICS)
    }
    out |= {f"std_{m}": 1.0 for m in LATENCIES}
    out |= {
        "output_throughput": throughput,
        "total_token_throughput": round(throughput * 3, 3),
        "request_throughput": round(throughput / 32, 4),
        "completed": 16,
        "failed": 0,
        "duration_s": 2.6,
        "input_tokens": 1024,
        "output_tokens": 512,
    }
    return out


def check(name: str, message: str, **parts) -> dict:
    return {"name": name, "kind": "correctness", "verdict": "passed", "message": message, **parts}


def cell_doc(night: int, cell: str, throughput: float, ttft: float, recipe: str, rng) -> dict:
    """A night of a cell, the parts of a real cell's evidence around night_doc's two checks."""
    doc = night_doc(night, throughput, cell=cell, ttft_ms=ttft, recipe=recipe)
    reps = [summary(rng, round(throughput * rng.uniform(0.99, 1.01), 3), ttft) for _ in range(3)]
    floor = doc["checks"][0]
    floor["details"] = {
        "summaries": reps,
        "aggregate": {"values": [r["output_throughput"] for r in reps]},
        "records": [f"runs/{doc['run']['id']}/records/perf-r{i}.json" for i in range(3)],
        "definitions": {m: "what it means, as the client measured it " * 3 for m in LATENCIES},
    }
    second = {
        **floor,
        "name": floor["name"].replace("output_throughput", "median_tpot_ms"),
        "measured": reps[0]["median_tpot_ms"],
    }
    provenance = {
        "by": "dayzero golden record",
        "engine_version": "llama.cpp b4500 " * 4,
        "host": "local",
        "recipe_digest": recipe,
        "recorded_at": doc["run"]["started"],
        "machine": {"arch": "x86_64", "cpu": "AMD EPYC", "isa": ["avx2", "fma", "avx512f"]},
    }
    probes = [
        check(f"probe:p{i}", "answered", measured="The capital of France is Paris. " * 3) for i in range(4)
    ]
    goldens = [
        check(
            f"golden:p{i}",
            "tokens equal",
            details={
                "golden": "The capital of France is Paris.",
                "golden_provenance": provenance,
                "compared_tokens": 7,
                "steps": [[t, -0.01 * t] for t in range(24)],
            },
        )
        for i in range(4)
    ]
    cases = {"cases": [{"id": f"c{j}", "ok": True} for j in range(8)]}
    tools = [
        check(f"tools:{k}@tool-use", "8/8", measured=1.0, details=cases)
        for k in ("finish_reason", "arguments", "trigger")
    ]
    doc["checks"] = [*probes, *goldens, *tools, floor, second, *doc["checks"][1:]]
    doc["records"] = [f"runs/{doc['run']['id']}/{cell}/records/phase-{i}.json" for i in range(20)]
    return doc


def write_cell(job: tuple[Path, int, int, int]) -> int:
    """One cell's nights as files: its own seed, so any number of processes write the same bytes."""
    root, index, nights, seed = job
    rng = np.random.default_rng(seed + index)
    model, hardware, mode, _ = CELL.split("/")
    cell = f"{model}/{hardware}/{mode}/s{index:03d}"
    level, ttft, at = noisy_year(rng, nights, index % 10 == 0)
    for n in range(nights):
        recipe = "slower" if at is not None and n >= at else "370a065910226f54"
        doc = cell_doc(n, cell, round(float(level[n]), 3), round(float(ttft[n]), 3), recipe, rng)
        folder = root / "nights" / doc["run"]["id"].split("-")[0] / evidence.EVIDENCE_DIR
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{evidence.slug(cell)}__{doc['run']['id']}.json").write_text(json.dumps(doc))
    return nights


def files(root: Path, cells: int, nights: int) -> float:
    """The nights on disk (written once: `root/done` says for which size); seconds spent writing."""
    done, want = root / "done", f"{cells}x{nights}"
    if done.exists() and done.read_text() == want:
        return 0.0
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    evidence.validate(cell_doc(0, CELL, 100.0, 50.0, "x", np.random.default_rng(0)))  # the shape is valid
    t = time.perf_counter()
    with multiprocessing.Pool() as pool:
        pool.map(write_cell, [(root, i, nights, 31) for i in range(cells)])
    done.write_text(want)
    return time.perf_counter() - t


def cpu_seconds() -> float:
    """User + system time of this process's finished children (a command and its workers)."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def timed(*argv: str) -> tuple[float, float, str]:
    """Wall-clock and CPU seconds of one `dayzero` command, and what it printed."""
    t, cpu = time.perf_counter(), cpu_seconds()
    done = subprocess.run(
        [sys.executable, "-m", "dayzero.cli", *argv], cwd=ROOT, capture_output=True, text=True, check=False
    )
    took = time.perf_counter() - t
    if done.returncode:
        raise SystemExit(f"dayzero {' '.join(argv)}: exit {done.returncode}\n{done.stderr}")
    return took, cpu_seconds() - cpu, done.stdout


def measure(root: Path, store: str) -> dict:
    load = load_average()
    ingest, ingest_cpu, out = timed("history", "ingest", str(root), "--store", store, "--json")
    changes, changes_cpu, found = timed("history", "changes", "--store", store, "--json")
    found = json.loads(found)
    return {
        "ingest_s": round(ingest, 1),
        "ingest_cpu_s": round(ingest_cpu, 1),
        "changes_s": round(changes, 1),
        "changes_cpu_s": round(changes_cpu, 1),
        "total_s": round(ingest + changes, 1),
        "load_average_before": load,
        "load_average_after": load_average(),
        "runs": json.loads(out)["runs"],
        "change_points": len(found),
        "regressions_attributed_to_recipe": sum(
            1 for c in found if c["regression"] and "recipe" in c["changed"]
        ),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--cells", type=int, default=240)
    parser.add_argument("--nights", type=int, default=365)
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "dayzero-bench-nights")
    parser.add_argument("--postgresql", action="store_true", help="also a throwaway PostgreSQL server")
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "bench" / "history_ingest.json")
    args = parser.parse_args()
    written = files(args.dir, args.cells, args.nights)
    size = sum(p.stat().st_size for p in (args.dir / "nights").glob("*/evidence/*.json"))
    result = {
        **machine(),
        "cells": args.cells,
        "nights": args.nights,
        "files": args.cells * args.nights,
        "bytes": size,
        "written_s": round(written, 1),
    }
    with tempfile.TemporaryDirectory() as tmp:
        result["sqlite"] = measure(args.dir, str(Path(tmp) / "history.sqlite"))
        print(f"sqlite: {result['sqlite']}", flush=True)
    if args.postgresql:
        from devlab import postgres

        directory = Path(tempfile.mkdtemp(prefix="dayzero-postgres-"))
        try:
            dsn = postgres.start(directory)
            result["postgresql"] = measure(args.dir, dsn)
            print(f"postgresql: {result['postgresql']}", flush=True)
        finally:
            postgres.stop(directory)
            shutil.rmtree(directory, ignore_errors=True)
    result["load_average"] = load_average()
    write_result(args.out, result)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
