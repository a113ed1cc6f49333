"""Lab faults a host brings to a cell, over a real sshd (tools/testbed): an engine its
`engine_setup` does not put on the PATH, and a host another job keeps busy while a cell measures.
Both are the lab's, never the product's: the cell is *broken*, the message names the host, and
nothing is left on the host afterwards (process, lease).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dayzero import exitcodes
from dayzero.errors import InfrastructureError
from dayzero.run.cell import run_cell
from devlab import testbed

from .conftest import REPO, needs_engine, processes_matching
from .stub_cells import stub_card, stub_matrix
from .test_multihost_e2e import context, evidence, inventory, left_on, quick_matrix  # noqa: F401 - a fixture
from .test_secrets import files_containing

pytestmark = [pytest.mark.e2e, needs_engine]
CELL = "smollm2-135m/cpu+llama.cpp/low_latency/baseline"
SETUP_SECRET = "stp-hidden-engine-Wq40Lr"


def start_bed(directory: Path, engine_setup: str) -> testbed.Testbed:
    _, variables = testbed.engine_defaults()
    port = testbed.free_port(1)
    return testbed.start(1, directory, port=port, engine_setup=engine_setup, variables=variables)


def run_cells(matrix: Path, inv: Path, reports: Path, *args: str, timeout: float = 600):
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:randomly", "-q", "-rA", f"--matrix={matrix}",
         f"--hosts={inv}", f"--reports={reports}", *args],
        cwd=REPO, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


def test_an_engine_that_engine_setup_leaves_off_the_path_is_broken_naming_host_role_and_command(
    quick_matrix,  # noqa: F811 - the fixture imported above
    tmp_path,
):
    """`engine_setup` exports a secret but does not put llama-server on the PATH: preflight finds
    the engine absent (broken, naming host, role and command) before anything is launched, within
    60 s, the secret in neither the terminal nor the reports, nothing left on the host."""
    bed = start_bed(tmp_path / "bed", f"export LAB_TOKEN={SETUP_SECRET}")
    try:
        reports = tmp_path / "reports"
        t0 = time.monotonic()
        only = ("-m", "cpu and llama.cpp", "-k", "low_latency and baseline")
        result = run_cells(quick_matrix, inventory(bed), reports, *only)
        took = time.monotonic() - t0
        out = result.stdout + result.stderr
        docs = evidence(reports)
        assert list(docs) == [CELL], out[-3000:]
        doc = docs[CELL]
        assert doc["verdict"] == "broken", (doc["verdict"], doc.get("error"), out[-3000:])
        assert "lab1" in doc["error"] and "role server" in doc["error"], doc["error"]
        assert "llama-server" in doc["error"] and "not found" in doc["error"], doc["error"]
        assert not [e for e in doc.get("checks", []) if e.get("verdict") == "failed"]
        assert result.returncode == exitcodes.LAB_FAULT, out[-2000:]
        assert "broken: lab fault: " in out and "Traceback" not in out, out[-2000:]
        assert SETUP_SECRET not in out
        assert not files_containing(reports, [SETUP_SECRET])
        assert took < 60, f"took {took:.0f}s"
        assert not left_on(bed)
    finally:
        bed.stop()


def test_a_floor_missed_while_a_burner_loads_the_host_is_broken_naming_the_contention(tmp_path):
    """A CPU burner per core starts on the test host once the stub engine is ready: the phase's
    samples see it as foreign load, and the floor it misses (set out of reach, so it is missed
    whatever the host does) is a lab fault, "host contended: ...", not a product failure. Ends
    within 120 s; burners, stub and lease gone afterwards."""
    port = random.randint(20000, 29000)
    card = stub_card(model="busy")
    card["engine"]["bind"] = "{host}"  # the testbed host's own address, where its client calls
    serve = card["recipe"]["command"]
    card["recipe"]["command"] = [*serve[:3], "--host", "{bind}", *serve[3:]]
    card["recipe"]["port"] = port
    card["floors"][0]["min"] = 10**6
    mdir = stub_matrix(tmp_path, card)
    bed = testbed.start(1, tmp_path / "bed", port=testbed.free_port(1), variables={"ttft": "0.5"})
    burners: list[subprocess.Popen] = []

    def say(message: str) -> None:
        if message.startswith("ready after"):
            burn = [sys.executable, "-c", "while True: pass"]
            burners.extend(subprocess.Popen(burn, start_new_session=True) for _ in range(os.cpu_count() or 2))

    ctx = context(mdir, inventory(bed), tmp_path / "reports", say, ready_deadline=30)
    t0 = time.monotonic()
    try:
        with pytest.raises(
            InfrastructureError, match=r"lab1: host contended: load [\d.]+ on \d+ cores"
        ) as err:
            run_cell(ctx, ctx.matrix.cell("busy/cpu/low_latency/baseline"))
        took = time.monotonic() - t0
        assert burners, "the burners never started"
        assert "python" in str(err.value), err.value  # the burners, named
        doc = evidence(tmp_path / "reports")["busy/cpu/low_latency/baseline"]
        assert doc["verdict"] == "broken" and "host contended" in doc["error"], doc["error"]
        assert took < 120, f"took {took:.0f}s"
        for b in burners:
            os.killpg(b.pid, signal.SIGKILL)
            b.wait()
        assert not left_on(bed) and not processes_matching(f"--port {port} ")
    finally:
        for b in burners:
            if b.poll() is None:
                os.killpg(b.pid, signal.SIGKILL)
        ctx.close()
        bed.stop()
