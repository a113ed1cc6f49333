"""The cpu floors catch a slowdown (issue 41, done-when): the llama.cpp low-latency cell served
with half its threads (the inventory's `threads` var: 1 of the card's 2) never passes its
throughput floor; it fails, or is inconclusive. A quiet run passing the same floors is the main
job's (`pytest -m cpu`, tests/test_e2e_cpu.py). One cell, one launch, its floors alone (the
card's sweeps, accuracy gate and tool calls left out of a copy of the matrix: they measure no
floor), the card's full floor protocol.

The measured throughput is compared with the floor's own calibration (the floors file the card
cites) so the test says how much slower the engine was, not only that it missed.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from dayzero.checks.calibration import cpu_kind
from dayzero.loadgen.client import machine
from dayzero.spec.card import floors_for
from dayzero.spec.matrix import load_matrix

from .conftest import REPO, run_pytest

pytestmark = pytest.mark.e2e

CELL = "smollm2-135m/cpu+llama.cpp/low_latency/baseline"
FLOOR = "floor:output_throughput@random-64-32/c1"


@pytest.mark.xfail(
    reason="not met yet (issue 41): on the 2-core AMD EPYC with AVX-512 the cell with one thread of "
    "two measured 38.6 tok/s (36.9-39.3 over 3 runs), 0.56-0.7 of the quiet figure, and passed the "
    "31.9 floor: half the threads is not a 2x slowdown, and 0.6 of the quiet lower bound sits below "
    "half the quiet median; a CPU quota and a fraction of the median are the next step",
    strict=False,
)
def test_half_the_threads_never_passes_the_calibrated_throughput_floor(tmp_path):
    if shutil.which("llama-server") is None and not (Path.home() / ".cache/dayzero/llama.cpp").exists():
        pytest.skip("llama-server not built: run tools/build-engine (CI builds it)")
    kind = cpu_kind(machine())  # what the run's preflight will read on this host
    matrix_now = load_matrix(REPO / "matrix")
    cell = next(c for c in matrix_now.cells if c.id == CELL)
    (shipped,) = [f for f in floors_for(matrix_now.card(cell), cell) if f.name == FLOOR]
    if shipped.on(kind) is shipped:  # a known gap, stated, not a pass: no calibration for this kind
        pytest.xfail(
            f"{FLOOR} is calibrated on {', '.join(k for k, _ in shipped.calibrated)} only; this "
            f"{kind} keeps the hand-set {shipped.bound:g}, too low to catch a 2x slowdown "
            "(`dayzero floors calibrate` on a quiet host of this kind closes it)"
        )
    inventory = yaml.safe_load((REPO / "hosts" / "local.yaml").read_text())
    inventory["hosts"]["local"]["vars"]["threads"] = "1"  # half the card's 2: the engine slowed down
    hosts = tmp_path / "half-threads.yaml"
    hosts.write_text(yaml.safe_dump(inventory))
    matrix = tmp_path / "matrix"
    shutil.copytree(REPO / "matrix", matrix)
    card = matrix / "models" / "smollm2-135m.yaml"
    data = yaml.safe_load(card.read_text())
    for part in ("sweeps", "accuracy", "tool_calls"):
        data.pop(part, None)
    card.write_text(yaml.safe_dump(data, sort_keys=False))
    reports = tmp_path / "reports"
    result = run_pytest(
        f"suites/test_cells.py::test_cell[{CELL}]",
        f"--matrix={matrix}",
        f"--hosts={hosts}",
        f"--reports={reports}",
        "-q",
        timeout=900,
    )
    docs = [json.loads(p.read_text()) for p in (reports / "evidence").glob("*.json")]
    assert docs, result.stdout[-3000:] + result.stderr[-2000:]
    checks = {c["name"]: c for c in docs[0]["checks"]}
    floor = checks[FLOOR]
    assert floor["verdict"] in ("failed", "inconclusive"), floor["message"]
    assert result.returncode in (1, 7), f"the run exits a failure or inconclusive: {result.returncode}"
    interval = floor["details"].get("interval") or {}
    print(f"{FLOOR}: {floor['verdict']}: {floor['message']} (interval {interval})")
