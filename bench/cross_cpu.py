"""Do the pinned llama.cpp build's greedy answers hold on another CPU kind?

The shipped goldens of the llama.cpp cells were recorded on one machine; a lab runs them on
another. This runs the one-slot llama.cpp cells' probes (the requests `dayzero golden record` and
every run send, through the same client) twice on this machine: on llama-server as built, and on
the same binary under `qemu-x86_64 -cpu MODEL` (Debian's qemu-user), which executes it as a CPU of
that model would: its instruction set, its rounding. Then it compares both with the shipped
goldens. It also shows that the binary runs at all on a CPU without AVX-512 or AMX.

    .venv/bin/python bench/cross_cpu.py --cpu EPYC-Rome      # AMD Zen 2: AVX2, no AVX-512
    .venv/bin/python bench/cross_cpu.py --cpu Haswell-v4     # Intel: AVX2, no AVX-512

Under emulation the server is 10-30 times slower; the probes are short (4 of 16-64 tokens).
Not a test: it needs qemu-user and minutes; its answer goes in the notes.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO)]

from dayzero.lab.deploy import run_client  # noqa: E402
from dayzero.lab.transport import open_transport  # noqa: E402
from dayzero.run import plan  # noqa: E402
from dayzero.spec.goldens import load_golden  # noqa: E402
from dayzero.spec.inventory import load_inventory  # noqa: E402
from dayzero.spec.matrix import load_matrix  # noqa: E402
from dayzero.spec.recipe import render  # noqa: E402

CELLS = (
    "smollm2-135m/cpu+llama.cpp/low_latency/baseline",
    "smollm2-135m/cpu+llama.cpp/low_latency/ngram_spec",
)
PORT = 18979


def _wait_health(url: str, deadline: float) -> None:
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/health", timeout=5) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(1)
    raise TimeoutError(f"{url} not healthy in time")


def answers(argv: list[str], prefix: list[str], requests: list[dict], transport, engine_path: str) -> dict:
    """Start the server (under `prefix`), send the probes one at a time, return id -> text."""
    port_at = argv.index("--port") + 1
    argv = [*argv[:port_at], str(PORT), *argv[port_at + 1 :]]
    env = {**os.environ, "PATH": f"{engine_path}:{os.environ['PATH']}"}
    argv[0] = shutil.which(argv[0], path=env["PATH"]) or argv[0]
    log = open(f"/tmp/cross-cpu-{PORT}.log", "w")  # noqa: SIM115
    proc = subprocess.Popen([*prefix, *argv], stdout=log, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{PORT}"
    try:
        _wait_health(url, time.monotonic() + 600)
        spec = {"action": "requests", "url": url, "concurrency": 1, "requests": requests}
        got = run_client(transport, spec, timeout=3600)["records"]
        return {r["id"]: r["text"] for r in got}
    finally:
        proc.terminate()
        proc.wait(30)


def local_lab():
    """The repository's matrix and the local inventory's host, or None without qemu-user (said
    on stderr): what the cross-CPU benches render their cells for."""
    if shutil.which("qemu-x86_64") is None:
        print("needs qemu-user: apt-get install qemu-user", file=sys.stderr)
        return None
    matrix = load_matrix(REPO / "matrix")
    inventory = load_inventory(REPO / "hosts" / "local.yaml", set(matrix.hardware))
    return matrix, inventory, inventory.hosts[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cpu", default="EPYC-Rome", help="qemu CPU model (qemu-x86_64 -cpu help)")
    parser.add_argument("--goldens", default=str(REPO / "suites" / "goldens"))
    parser.add_argument(
        "--cell", action="append", choices=CELLS, help="cell(s) to compare (default: both; ~10 min each)"
    )
    args = parser.parse_args()
    if (lab := local_lab()) is None:
        return 2
    matrix, inventory, host = lab
    engine_path = host.engine_setup.split('PATH="', 1)[1].split(":", 1)[0]
    transport = open_transport(host, inventory)
    report = {"cpu": args.cpu, "cells": {}}
    for cell_id in args.cell or CELLS:
        cell = next(c for c in matrix.cells if c.id == cell_id)
        argv = render(matrix, cell, [host]).launches[0].argv
        requests = plan.probes(matrix.card(cell), cell).requests()
        native = answers(list(argv), [], requests, transport, engine_path)
        t0 = time.monotonic()
        emulated = answers(list(argv), ["qemu-x86_64", "-cpu", args.cpu], requests, transport, engine_path)
        golden = load_golden(Path(args.goldens), cell.id)
        rows = {
            pid: {
                "native_eq_emulated": native[pid] == emulated.get(pid),
                "native_eq_golden": golden is not None and native[pid] == golden.outputs.get(pid),
                "emulated_eq_golden": golden is not None and emulated.get(pid) == golden.outputs.get(pid),
            }
            for pid in native
        }
        report["cells"][cell_id] = {"emulated_s": round(time.monotonic() - t0, 1), "probes": rows}
        print(f"{cell_id} (native argv: {shlex.join(argv)})", file=sys.stderr)
        for pid, row in rows.items():
            print(f"  {pid:16} " + "  ".join(f"{k}={v}" for k, v in row.items()), file=sys.stderr)
    print(json.dumps(report, indent=1))
    same = all(r["native_eq_emulated"] for c in report["cells"].values() for r in c["probes"].values())
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
