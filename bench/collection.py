"""Collection at lab size: dayzero's generated cells against pytest's own parametrized items.

    .venv/bin/python bench/collection.py [--sizes 1000 10000 100000] [--repeat 3]

For each size N it writes a matrix of N cells (model cards shaped like the embedded SmolLM2 card:
10 hardware kinds x 2 modes x 5 strategies = 100 cells per card, so N/100 cards) and a plain
test file whose one test is parametrized over N items carrying the same four marks per item
(model, hardware, mode, strategy) out of the same number of registered marker names. Both are
collected by `pytest --collect-only -q` in a fresh interpreter, alternately, `--repeat` times;
the best wall time of each is compared (best, because the machine is shared: noise only adds).
The baseline pays the same interpreter start and plugin imports (dayzero's plugin stays out of
the way where there is no matrix), so the ratio is what dayzero adds to collection itself. One
unmeasured run of each comes first so both start with byte code cached, as a lab's nightly does
(PYTHONDONTWRITEBYTECODE is dropped for the children: with it every run recompiles every module).

Raw figures go to reports/bench/collection.json; speeds are machine-dependent: read ratios.
"""

# ruff: noqa: E501 - markdown table rows read best on one line
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

from bench.common import load_average, machine, write_result  # noqa: E402

HARDWARE = ("b300", "gb300", "b200", "gb200", "h200", "h100", "mi355x", "mi350x", "tpu7x", "cpu")
MODES = ("low_latency", "high_throughput")
STRATEGIES = ("baseline", "ngram_spec", "eagle3", "mtp", "dflash")
PER_CARD = len(HARDWARE) * len(MODES) * len(STRATEGIES)


def card(k: int, hardware=HARDWARE, strategies=STRATEGIES) -> dict:
    """Model card k: the embedded SmolLM2 card on `hardware` with `strategies` (every mode)."""
    data = yaml.safe_load((ROOT / "matrix" / "models" / "smollm2-135m.yaml").read_text())
    data.pop("engines", None)  # one engine: four marks per cell, as the plain suite has
    known = data["strategies"]
    data["model"] = f"model-{k:04d}"
    data["display_name"] = f"Generated model {k}"
    data["hardware"] = {hw: {"nodes": 1} for hw in hardware}
    data["strategies"] = {
        s: known.get(s) or {"description": f"strategy {s}", "args": ["--spec-type", s]} for s in strategies
    }
    data["cells"] = [{"hardware": list(hardware), "modes": list(MODES), "strategies": list(strategies)}]
    return data


def write_matrix(root: Path, n: int, hardware=HARDWARE, strategies=STRATEGIES) -> Path:
    """A matrix of n cells (a multiple of the cells per card) and a one-host inventory."""
    mdir = root / "matrix"
    (mdir / "models").mkdir(parents=True)
    (mdir / "hardware.yaml").write_text((ROOT / "matrix" / "hardware.yaml").read_text())
    per_card = len(hardware) * len(MODES) * len(strategies)
    for k in range(n // per_card):
        data = card(k, hardware, strategies)
        (mdir / "models" / f"model-{k:04d}.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    (root / "hosts.yaml").write_text((ROOT / "hosts" / "local.yaml").read_text())
    return mdir


def write_plain(root: Path, n: int) -> Path:
    """The baseline: one test parametrized over n items, four marks each, markers registered."""
    models = n // PER_CARD
    names = [f"model_{k:04d}" for k in range(models)] + [*HARDWARE, *MODES, *STRATEGIES]
    root.mkdir(parents=True)
    (root / "pytest.ini").write_text(
        "[pytest]\naddopts = -p no:cacheprovider --strict-markers\nmarkers =\n"
        + "".join(f"    {name}: marker {name}\n" for name in names)
    )
    (root / "test_plain.py").write_text(
        "import pytest\n\n"
        "HW = " + repr(HARDWARE) + "\nMODES = " + repr(MODES) + "\nSTRATEGIES = " + repr(STRATEGIES) + "\n\n"
        "def params():\n"
        f"    for k in range({models}):\n"
        "        model = f'model_{k:04d}'\n"
        "        for hw in HW:\n"
        "            for mode in MODES:\n"
        "                for s in STRATEGIES:\n"
        "                    marks = [getattr(pytest.mark, x) for x in (model, hw, mode, s)]\n"
        "                    yield pytest.param((model, hw, mode, s), id=f'{model}/{hw}/{mode}/{s}', marks=marks)\n\n"
        "@pytest.mark.parametrize('cell', list(params()))\n"
        "def test_cell(cell):\n"
        "    pass\n"
    )
    return root / "test_plain.py"


def collect(argv: list[str], cwd: Path, expect: int) -> float:
    """Wall seconds of one `pytest --collect-only -q` in a fresh interpreter; checks the count."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(ROOT)
    t0 = time.perf_counter()
    p = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, env=env, timeout=1800)
    wall = time.perf_counter() - t0
    tail = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else ""
    if p.returncode != 0 or f"{expect} test" not in tail:
        raise RuntimeError(f"collection of {expect} failed ({p.returncode}): {tail} {p.stderr[-800:]}")
    return wall


def measure(n: int, repeat: int, tmp: Path) -> dict:
    root = tmp / f"n{n}"
    mdir = write_matrix(root / "dz", n)
    plain = write_plain(root / "plain", n)
    py = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:randomly"]
    ours_argv = [*py, f"--matrix={mdir}", f"--hosts={root / 'dz' / 'hosts.yaml'}", "suites/test_cells.py"]
    base_argv = [*py, plain.name]
    ours, base = [], []
    collect(base_argv, plain.parent, n)  # warm: byte code (and pytest's rewritten modules) cached
    collect(ours_argv, ROOT, n)
    for _ in range(repeat):
        base.append(collect(base_argv, plain.parent, n))
        ours.append(collect(ours_argv, ROOT, n))
    return {
        "cells": n,
        "cards": n // PER_CARD,
        "dayzero_s": [round(x, 3) for x in ours],
        "pytest_s": [round(x, 3) for x in base],
        "dayzero_best_s": round(min(ours), 3),
        "pytest_best_s": round(min(base), 3),
        "ratio": round(min(ours) / min(base), 3),
        "ratio_of_medians": round(statistics.median(ours) / statistics.median(base), 3),
    }


def markdown(result: dict) -> str:
    lines = [
        f"collection, {result['date']} ({result['machine']}), load average {result['load_average_at_start']} -> {result['load_average_at_end']}",
        "",
        "| cells | cards | dayzero best s | pytest plain best s | ratio of bests | ratio of medians | dayzero s per 1k cells |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        lines.append(
            f"| {r['cells']} | {r['cards']} | {r['dayzero_best_s']} | {r['pytest_best_s']} | **{r['ratio']}** | {r.get('ratio_of_medians')} | {r['dayzero_best_s'] / r['cells'] * 1000:.3f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "bench" / "collection.json")
    args = parser.parse_args(argv)
    result = {
        "date": machine()["date"],
        "machine": machine()["machine"],
        "load_average_at_start": load_average(),
    }
    with tempfile.TemporaryDirectory(prefix="dz-collect-") as tmp:
        result["rows"] = [measure(n, args.repeat, Path(tmp)) for n in args.sizes]
    result["load_average_at_end"] = load_average()
    write_result(args.out, result)
    print(markdown(result))
    print(f"(raw: {args.out})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
