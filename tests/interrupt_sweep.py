"""A terminal's Ctrl-C sent to a real pytest run of stub cells at a chosen instant, and what the
run must have done about it whatever the instant: end interrupted, never report the cell failed.

Shared by the single-host sweep (tests/test_interrupts.py, local transport) and the sweep over a
cell across two SSH hosts (tests/test_multihost_e2e.py); each checks its own hosts are clean.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

from .conftest import REPO


def run_interrupted(
    args: list[str], offset: float | None, *, after: str = "leased"
) -> tuple[int, str, float]:
    """One pytest run (`args`: its cells, matrix, hosts, reports); SIGINT to its process group
    `offset` s after it prints a line with `after` (`""`: after it starts), or never (None).
    Returns its exit code, its output and when SIGINT was sent (epoch seconds)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", *args],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        start_new_session=True,
    )
    sent = float("inf")
    seen = []

    def interrupt() -> float:
        time.sleep(offset or 0)
        os.killpg(proc.pid, signal.SIGINT)  # a terminal's Ctrl-C: the whole group
        return time.time()

    try:
        assert proc.stdout is not None
        if offset is not None and not after:
            sent = interrupt()
        for line in proc.stdout:
            seen.append(line)
            if offset is not None and after and after in line:
                sent = interrupt()
                break
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return proc.returncode, "".join(seen) + out, sent


def assert_ended_interrupted(reports: Path, code: int, out: str, sent: float, when: str) -> None:
    """The run ended interrupted (or had passed before the interrupt landed) and no cell failed."""
    docs = [json.loads(p.read_text()) for p in (reports / "evidence").glob("*.json")]
    finished = [d for d in docs if d["verdict"] == "passed"]
    ended_before = all(datetime.fromisoformat(d["run"]["finished"]).timestamp() <= sent for d in finished)
    # 2: pytest's own "interrupted"; -SIGINT / 130: the interrupt landed in pytest's own start-up or
    # shutdown code, outside the session, and the process died of it: interrupted too.
    assert code in (2, -signal.SIGINT, 130) or (code == 0 and finished and ended_before), (
        f"SIGINT {when}: exit {code}\n{out[-3000:]}"
    )
    assert not [d for d in docs if d["verdict"] == "failed"], f"SIGINT {when}: cell failed\n{out[-3000:]}"
