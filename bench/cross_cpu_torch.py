"""Do the SGLang cells' pinned torch kernels compute the same bits on another CPU kind?

An SGLang server is far too slow to run under emulation (a bf16 matrix-vector product is ~230x
slower under qemu's TCG), so this checks the arithmetic its greedy answers rest on: bf16 linear
layers at SmolLM2-135M's shapes (hidden 576, MLP 1536, one to 61 rows: decode and prefill),
RMS norm, SiLU and softmax, in the engines venv's torch, with the SGLang recipe's environment
from the card (ATEN_CPU_CAPABILITY, ONEDNN_MAX_CPU_ISA, MKL_CBWR), on this CPU and under
`qemu-x86_64 -cpu MODEL` (that model's instruction set and CPUID: torch and oneDNN pick their
kernels from it as on the real CPU), and on this CPU without the pins. Each op's output is hashed.

    .venv/bin/python bench/cross_cpu_torch.py [--cpu EPYC-Rome] [--threads 2]

Exit 0 when the pinned run's hashes are the same native and emulated. Not a test: it needs
qemu-user and about a minute; its answer goes in the notes.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO)]

from bench.cross_cpu import local_lab  # noqa: E402
from dayzero.cache import engines_venv  # noqa: E402
from dayzero.spec.recipe import render  # noqa: E402

CELL = "smollm2-135m/cpu+sglang/low_latency/baseline"
PINS = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "MKL_CBWR")

PROBE = r"""
import hashlib, json, sys, torch
torch.manual_seed(0)
torch.set_num_threads(int(sys.argv[1]))
def h(t):
    return hashlib.sha256(t.float().contiguous().numpy().tobytes()).hexdigest()[:12]
out = {"capability": torch.backends.cpu.get_cpu_capability(),
       "onednn_bf16": bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())}
for rows in (1, 7, 61):
    for k, n in ((576, 576), (576, 1536), (1536, 576), (576, 4096)):
        x = torch.randn(rows, k).to(torch.bfloat16)
        w = (torch.randn(n, k) * 0.05).to(torch.bfloat16)
        out[f"linear {rows}x{k}->{n}"] = h(torch.nn.functional.linear(x, w))
    x, ones = torch.randn(rows, 576).to(torch.bfloat16), torch.ones(576, dtype=torch.bfloat16)
    out[f"rms_norm {rows}"] = h(torch.nn.functional.rms_norm(x, (576,), ones, 1e-5))
    out[f"silu {rows}"] = h(torch.nn.functional.silu(torch.randn(rows, 1536).to(torch.bfloat16)))
    out[f"softmax {rows}"] = h(torch.softmax(torch.randn(9, rows, rows + 8), dim=-1))
print(json.dumps(out))
"""


def run(python: str, env: dict[str, str], threads: int, prefix: list[str]) -> dict:
    done = subprocess.run(
        [*prefix, python, "-c", PROBE, str(threads)], env=env, capture_output=True, text=True, timeout=1800
    )
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(prefix) or 'native'}: exit {done.returncode}: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cpu", default="EPYC-Rome", help="qemu CPU model (qemu-x86_64 -cpu help)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (the cells run 2)")
    args = parser.parse_args()
    if (lab := local_lab()) is None:
        return 2
    matrix, _, host = lab
    cell = next(c for c in matrix.cells if c.id == CELL)
    pins = {k: v for k, v in render(matrix, cell, [host]).launches[0].env if k in PINS}
    python = str(engines_venv() / "bin" / "python")
    bare = {k: v for k, v in os.environ.items() if k not in PINS}
    runs = {
        "native, pinned": run(python, {**bare, **pins}, args.threads, []),
        f"{args.cpu}, pinned": run(python, {**bare, **pins}, args.threads, ["qemu-x86_64", "-cpu", args.cpu]),
        "native, unpinned": run(python, bare, args.threads, []),
    }
    names = list(next(iter(runs.values())))
    print(f"pins from the card ({CELL}): {pins}")
    print(f"{'':22}" + "".join(f"{r:>22}" for r in runs))
    for name in names:
        print(f"{name:22}" + "".join(f"{str(r.get(name)):>22}" for r in runs.values()))
    pinned = [runs["native, pinned"], runs[f"{args.cpu}, pinned"]]
    same = [n for n in names if n.split()[0] not in ("capability", "onednn_bf16")]
    differ = [n for n in same if pinned[0][n] != pinned[1][n]]
    unpinned = [n for n in same if runs["native, unpinned"][n] != pinned[0][n]]
    print(f"pinned, native vs {args.cpu}: {len(same) - len(differ)}/{len(same)} ops the same bits")
    print(f"native, pinned vs unpinned: {len(same) - len(unpinned)}/{len(same)} ops the same bits")
    return 0 if not differ else 1


if __name__ == "__main__":
    sys.exit(main())
