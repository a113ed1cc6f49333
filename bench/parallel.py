"""Parallel efficiency across SSH test hosts, the harness's own time per cell, and how long a cell
takes to find the one free host among 50.

    .venv/bin/python bench/parallel.py [--hosts 1 2 4 8] [--cells-per-host 4] [--service 0.25]

Hosts: real OpenSSH servers on loopback (`devlab.testbed`, as `tools/testbed start --hosts N`),
one slot each, reached through the paramiko transport (with 3 or more, the last only through
the first as a jump host, as in the testbed). Cells: one model card whose cells are all served
by the stub engine (`devlab.stub`, one process per cell, bound to its host's own address) with
a fixed service time: every request takes `--service` seconds, so the engine's share of a cell
is known exactly (`requests x service`) and the rest is the harness: lease, preflight, deploy
(start, health), teardown, evidence, Allure. Each size runs `pytest -n auto` (one xdist worker
per host slot) over `cells-per-host x N` cells.

  single-cell time = median cell duration in the N = 1 run (from the Allure results)
  efficiency       = cells x single-cell time / (N x wall time of the pytest command)

The wall time includes pytest's and every xdist worker's start-up: what a user waits for.

Host search: 50 testbed hosts, 49 of them leased by another run; a cell's lease (`acquire_all`,
the pool's search, free host last) is timed in a fresh process, cold (a new xdist worker: one SSH
handshake per host it tries) and warm (connections open), next to the floor: an inventory of
that one free host.

Raw figures go to reports/bench/parallel.json; speeds are machine-dependent: read ratios.
"""

# ruff: noqa: E501 - markdown table rows read best on one line
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tools")]

from bench.common import load_average, machine, write_result  # noqa: E402
from dayzero.lab.lease import acquire_all, release, try_acquire  # noqa: E402
from dayzero.lab.pool import HostPool  # noqa: E402
from dayzero.spec.inventory import load_inventory  # noqa: E402
from devlab import testbed  # noqa: E402

STUB_PORT = 18790
MAX_TOKENS = 8
PROMPTS = 8  # one repetition of 8 requests at concurrency 1, after one warm-up request


def card(cells: int, service: float) -> dict:
    """A stub-served card with `cells` cells (one mode, one strategy per cell)."""
    strategies = {f"s{i:03d}": {"description": f"strategy {i}"} for i in range(cells)}
    return {
        "model": "stubscale",
        "source": "https://example.invalid/recipes/stubscale",
        "engine": {
            "name": "stub",
            "health_path": "/health",
            "bind": "{host}",
            "version_command": "echo stub 1.0",
        },
        "recipe": {
            "port": STUB_PORT,
            "command": [
                sys.executable,
                "-m",
                "devlab.stub",
                "--host",
                "{bind}",
                "--port",
                "{port}",
                "--ttft",
                str(service),
                "--itl",
                "0",
                "--metrics",  # as llama-server's: the run reads /metrics around every phase
            ],  # fmt: skip
            "env": {"PYTHONPATH": str(ROOT / "tools")},
        },
        "hardware": {"cpu": {"nodes": 1}},
        "modes": {"low_latency": {"concurrency": 1, "args": []}},
        "strategies": strategies,
        "cells": [{"hardware": ["cpu"], "modes": ["low_latency"], "strategies": list(strategies)}],
        "protocol": {"repetitions": 1, "warmup": 1},
        "floors": [
            {
                "metric": "output_throughput",
                "concurrency": "mode",
                "min": 0.001,
                "max_tokens": MAX_TOKENS,
                "num_prompts": PROMPTS,
            }
        ],
    }


def write_matrix(root: Path, cells: int, service: float) -> Path:
    mdir = root / "matrix"
    (mdir / "models").mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "matrix" / "hardware.yaml", mdir / "hardware.yaml")
    (mdir / "models" / "stubscale.yaml").write_text(yaml.safe_dump(card(cells, service), sort_keys=False))
    return mdir


def cell_times(results: Path) -> list[dict]:
    """Per cell, from the Allure results: duration and its top-level steps (s)."""
    out = []
    for path in results.glob("*-result.json"):
        r = json.loads(path.read_text())
        steps = {s["name"]: (s["stop"] - s["start"]) / 1000 for s in r.get("steps", [])}
        out.append({"status": r["status"], "duration": (r["stop"] - r["start"]) / 1000, "steps": steps})
    return out


def breakdown(cells: list[dict], service: float) -> dict:
    """Median seconds per cell: the engine's fixed share and the harness's steps around it."""
    engine = (PROMPTS + 1) * service

    def med(fn) -> float:
        return round(statistics.median(fn(c) for c in cells), 3)

    def step(prefix: str):
        return lambda c: sum(v for k, v in c["steps"].items() if k.startswith(prefix))

    lease = med(step("lease and preflight"))
    launch = med(step("launch"))
    measure = med(lambda c: sum(v for k, v in c["steps"].items() if not k.startswith(("lease", "launch"))))
    total = med(lambda c: c["duration"])
    return {
        "cell_s": total,
        "engine_s": round(engine, 3),
        "lease_preflight_s": lease,
        "deploy_s": launch,
        "measure_s": measure,
        "measure_harness_s": round(measure - engine, 3),
        "teardown_evidence_s": round(total - lease - launch - measure, 3),
        "harness_s": round(total - engine, 3),
    }


def run_size(n: int, cells: int, service: float, work: Path) -> dict:
    work.mkdir(parents=True, exist_ok=True)
    bed = testbed.start(n, work / "bed", port=testbed.free_port(n))
    try:
        mdir = write_matrix(work, cells, service)
        reports = work / "reports"
        argv = [
            sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-n", "auto",
            f"--matrix={mdir}", f"--hosts={bed.inventory}", f"--reports={reports}", "suites/test_cells.py",
        ]  # fmt: skip
        t0 = time.perf_counter()
        p = subprocess.run(
            argv,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=1800,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        wall = time.perf_counter() - t0
    finally:
        bed.stop()
    times = cell_times(reports / "allure-results")
    passed = sum(1 for c in times if c["status"] == "passed")
    if p.returncode != 0 or passed != cells:
        raise RuntimeError(f"N={n}: exit {p.returncode}, {passed}/{cells} passed\n{p.stdout[-2000:]}")
    return {
        "hosts": n,
        "cells": cells,
        "wall_s": round(wall, 3),
        "load": load_average(),
        **breakdown(times, service),
    }


# --- host search ---------------------------------------------------------------------------------


def search_once(inventory_path: Path, quarantine: Path, repeat: int) -> dict:
    """In a fresh process (SSH connections are pooled per process): the first search of a new
    worker opens one connection per host it tries (cold); later ones reuse them (warm)."""
    inventory = load_inventory(inventory_path, {"cpu"})
    candidates = inventory.for_hardware("cpu")
    pool = HostPool(inventory, quarantine, "bench", say=lambda m: None)

    def search(among) -> float:
        t0 = time.perf_counter()
        got = acquire_all(among, 1, pool.transport, run_id="bench", cell_id="c", worker="gw0", wait=0)
        seconds = time.perf_counter() - t0
        assert got[0].host.name == among[-1].name, got
        for lease in got:
            release(pool.transport(lease.host), lease)
        return seconds

    cold = search(candidates)
    warm = [search(candidates) for _ in range(repeat)]
    pool.close()
    return {"cold_s": round(cold, 3), "warm_s": round(statistics.median(warm), 3)}


def search_child(inventory_path: Path, quarantine: Path, among: str, repeat: int = 3) -> dict:
    argv = [
        sys.executable,
        __file__,
        "--search-child",
        str(inventory_path),
        str(quarantine),
        among,
        str(repeat),
    ]
    p = subprocess.run(
        argv, capture_output=True, text=True, timeout=600, env={**os.environ, "PYTHONPATH": str(ROOT)}
    )
    if p.returncode:
        raise RuntimeError(p.stderr[-1500:])
    return json.loads(p.stdout.strip().splitlines()[-1])


def host_search(work: Path, hosts: int = 50, repeat: int = 3) -> dict:
    """Time a cell's lease when only one of `hosts` is free (the last in inventory order)."""
    work.mkdir(parents=True, exist_ok=True)
    bed = testbed.start(hosts, work / "bed", port=testbed.free_port(hosts))
    try:
        data = yaml.safe_load(bed.inventory.read_text())
        names = list(data["hosts"])
        free = next(name for name in reversed(names) if not data["hosts"][name].get("jump"))
        order = [x for x in names if x != free] + [free]  # the free host last in inventory order
        data["hosts"] = {x: data["hosts"][x] for x in order}
        full = bed.inventory.with_name("search.yaml")
        full.write_text(yaml.safe_dump(data, sort_keys=False))
        data["hosts"] = {free: data["hosts"][free]}
        alone = bed.inventory.with_name("alone.yaml")  # the floor: the only candidate, and free
        alone.write_text(yaml.safe_dump(data, sort_keys=False))
        inventory = load_inventory(full, {"cpu"})
        holder = HostPool(inventory, work / "quarantine", "other-run", say=lambda m: None)
        candidates = inventory.for_hardware("cpu")
        held = [try_acquire(holder.transport(h), "other-run", "other/cell", "gw9") for h in candidates[:-1]]
        assert all(not isinstance(x, str) for x in held), held
        searched = search_child(full, work / "quarantine", "all", repeat)
        floor = search_child(alone, work / "quarantine", "one", repeat)
        for lease in held:
            release(holder.transport(lease.host), lease)
        holder.close()
    finally:
        bed.stop()
    return {
        "hosts": hosts,
        "leased": hosts - 1,
        "cold_s": searched["cold_s"],
        "warm_s": searched["warm_s"],
        "floor_cold_s": floor["cold_s"],
        "floor_warm_s": floor["warm_s"],
        "load": load_average(),
    }


def markdown(result: dict) -> str:
    base = result["single_cell_s"]
    lines = [
        f"parallel, {result['date']} ({result['machine']}), stub service {result['service_s']} s per request, "
        f"{PROMPTS + 1} requests per cell; load average {result['load_average_at_start']} -> {result['load_average_at_end']}",
        "",
        "| hosts | cells | wall s | efficiency | cell s (median) | engine s | harness s | lease+preflight | deploy | measure (harness part) | teardown+evidence | load |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        lines.append(
            f"| {r['hosts']} | {r['cells']} | {r['wall_s']} | **{r['efficiency']}** | {r['cell_s']} | {r['engine_s']} | {r['harness_s']} | {r['lease_preflight_s']} | {r['deploy_s']} | {r['measure_harness_s']} | {r['teardown_evidence_s']} | {r['load']} |"
        )
    lines.append(f"\nsingle-cell time (N=1 median): {base} s")
    s = result.get("search")
    if s:
        lines += [
            "",
            "| hosts | leased | find the free one: new worker (cold) s | later cells (warm) s | floor: one free host, cold s / warm s |",
            "|---|---|---|---|---|",
            f"| {s['hosts']} | {s['leased']} | {s['cold_s']} | {s['warm_s']} | {s['floor_cold_s']} / {s['floor_warm_s']} |",
        ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--search-child"]:  # inventory quarantine label repeat
        print(json.dumps(search_once(Path(argv[1]), Path(argv[2]), int(argv[4]))))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--cells-per-host", type=int, default=4)
    parser.add_argument("--service", type=float, default=0.25, help="seconds per request (stub TTFT)")
    parser.add_argument("--search-hosts", type=int, default=50, help="0 skips the host search")
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "bench" / "parallel.json")
    args = parser.parse_args(argv)
    result = {**machine(), "load_average_at_start": load_average(), "service_s": args.service, "rows": []}
    with tempfile.TemporaryDirectory(prefix="dz-parallel-") as tmp:
        for n in sorted(set([1, *args.hosts])):
            row = run_size(n, args.cells_per_host * n, args.service, Path(tmp) / f"n{n}")
            result["rows"].append(row)
            print(json.dumps(row), flush=True)
        base = next(r for r in result["rows"] if r["hosts"] == 1)["cell_s"]
        result["single_cell_s"] = base
        for r in result["rows"]:
            r["efficiency"] = round(r["cells"] * base / (r["hosts"] * r["wall_s"]), 3)
        if args.search_hosts:
            result["search"] = host_search(Path(tmp) / "search", args.search_hosts)
    result["load_average_at_end"] = load_average()
    write_result(args.out, result)
    print(markdown(result))
    print(f"(raw: {args.out})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
