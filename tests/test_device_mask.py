"""Two TP2 cells side by side on one 8-accelerator host (issue 44 item 2, Done when): each renders
one `--tp 2`, leases two accelerators by index and starts its engine under their device mask.

The engine is the stub (`devlab.stub`) standing in for one on accelerators that cannot be shared:
it locks each accelerator its mask shows and refuses to start on one another holds, so two cells
pass only if their masks are disjoint. The host's device tool is a stand-in `nvidia-smi` on PATH
(no GPU here): eight H200-sized accelerators; one whose lock the stub holds shows the stub as a
compute process and most of its memory used, as a real engine's GPUs do. The second cell starts
once the first one's engine is up, so its preflight sees that engine: preflight must judge only
the accelerators its own lease claimed. Everything else is the real run path: leases, preflight,
the local transport, the client, evidence.
"""

from __future__ import annotations

import fcntl
import json
import os
import random
import shlex
import sys
import threading
import time
from types import SimpleNamespace

from dayzero.checks import claims
from dayzero.run.cell import RunContext, new_run_id, run_cell
from dayzero.spec.inventory import load_inventory
from dayzero.spec.matrix import load_matrix
from dayzero.spec.recipe import render
from dayzero.submission.cellview import Recorded

from .conftest import REPO, write_yaml
from .stub_cells import stub_card, stub_matrix

# nvidia-smi's CSV for the fields asked, in their order (`--format=csv,noheader[,nounits]`)
NVIDIA_SMI = """#!{python}
import fcntl, os, sys
locks = {locks!r}
def held(j):  # the stub's lock on accelerator j, taken now: (pid,) or ()
    try:
        with open(os.path.join(locks, f"acc-{{j}}.lock")) as f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return ((f.read().split() or ["0"])[-1],)
    except OSError:
        pass
    return ()
gpu = {{"index": str, "uuid": lambda j: f"GPU-0000000{{j}}-1111-2222-3333-444444444444",
        "memory.total": lambda j: "143771", "memory.free": lambda j: "61000" if held(j) else "143000",
        "driver_version": lambda j: "550.54.15"}}
asked = {{a.split("=")[0]: a.split("=")[1].split(",") for a in sys.argv[1:] if "=" in a}}
for j in range(8):
    if "--query-gpu" in asked:
        print(", ".join(gpu[f](j) for f in asked["--query-gpu"]))
    for pid in held(j) if "--query-compute-apps" in asked else ():
        app = {{"gpu_uuid": gpu["uuid"](j), "pid": pid, "process_name": "stub", "used_memory": "82000"}}
        with open(os.path.join(locks, "seen"), "a") as seen:
            seen.write(f"{{j}}\\n")
        print(", ".join(app[f] for f in asked["--query-compute-apps"]))
"""


def tp2_card() -> dict:
    card = stub_card(model="shared")
    card["recipe"]["port"] = random.randint(20000, 29000)  # ours alone: other runs use the stub too
    card["recipe"]["command"] += ["--tp", "{tp}", "--devices-dir", "{devices_dir}"]
    card["hardware"] = {"h200": {"nodes": 1}}
    tp2 = {"concurrency": 1, "args": [], "parallel": {"tp": 2}}
    card["modes"] = {"tp2": tp2, "tp2_again": {**tp2, "description": "the same, a second cell"}}
    card["cells"] = [{"hardware": ["h200"], "modes": ["tp2", "tp2_again"], "strategies": ["baseline"]}]
    return card


def test_two_tp2_cells_share_one_host_under_disjoint_masks(tmp_path, monkeypatch):
    tools = tmp_path / "bin"
    tools.mkdir()
    locks = tmp_path / "accelerators"
    locks.mkdir()
    (tools / "nvidia-smi").write_text(NVIDIA_SMI.format(python=sys.executable, locks=str(locks)))
    (tools / "nvidia-smi").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("DAYZERO_SUITES", str(REPO / "suites"))
    matrix = load_matrix(stub_matrix(tmp_path, tp2_card()))
    host = {
        "transport": "local",
        "address": "127.0.0.1",
        "hardware": "h200",
        "accelerators": 8,
        "slots": 2,
        "workdir": str(tmp_path / "work"),
        "vars": {"ttft": "0.3", "devices_dir": str(locks)},
        "max_foreign_load": 0,
    }
    inventory = load_inventory(
        write_yaml(tmp_path / "hosts.yaml", {"hosts": {"g0": host}}), set(matrix.hardware)
    )
    cells = [matrix.cell(f"shared/h200/{mode}/baseline") for mode in ("tp2", "tp2_again")]
    (launch,) = render(matrix, cells[0], inventory.hosts).launches
    argv = shlex.split(launch.command)
    assert argv.count("--tp") == 1 and argv[argv.index("--tp") + 1] == "2"

    outcomes = {}

    def worker(cell):  # a worker of its own run, as two pytest runs against one lab are
        ctx = RunContext(
            matrix, inventory, tmp_path / "reports", tmp_path / "goldens", new_run_id(), say=print
        )
        if cell is cells[1]:  # once the first cell's engine holds its accelerators
            _until(lambda: any(map(_held, locks.glob("acc-*.lock"))) or not threads[0].is_alive(), 120)
        try:
            outcomes[cell.mode] = run_cell(ctx, cell)
        finally:
            ctx.close()

    threads = [threading.Thread(target=worker, args=(cell,)) for cell in cells]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    docs = {}
    for mode, outcome in outcomes.items():
        assert outcome.verdict == "passed", [c.message for c in outcome.failed_checks] or outcome.error
        docs[mode] = json.loads(outcome.evidence_path.read_text())
    assert sorted(docs) == ["tp2", "tp2_again"]
    masks, leases = [], []
    for doc in docs.values():
        (entry,) = doc["hosts"]
        (launched,) = doc["recipe"]["launches"]
        masks.append(set(launched["env"]["CUDA_VISIBLE_DEVICES"].split(",")))
        assert [str(j) for j in entry["lease"]["devices"]] == sorted(masks[-1]) and len(masks[-1]) == 2
        leases.append(entry["lease"])
    assert not masks[0] & masks[1], masks
    summaries = [
        found
        for doc in docs.values()
        for found in _with(doc, "output_throughput_per_accelerator")
        if isinstance(found["output_throughput_per_accelerator"], float)
    ]
    assert summaries and all(
        s["output_throughput_per_accelerator"] == round(s["output_throughput"] / 2, 4) for s in summaries
    ), "per-accelerator figures divide by the two accelerators the cell used, not the host's eight"
    assert claims.accelerators(doc["hosts"]) == 2  # a claim per accelerator, the same
    # and the submission checker divides its recomputed figures as the run did
    view = SimpleNamespace(doc=doc, card=matrix.card(cells[0]), cell=cells[0])
    assert Recorded(view).accelerators == 2
    first, second = sorted(leases, key=lambda lease: lease["acquired"])
    assert second["acquired"] < first["released"], "side by side: both held the host at once"
    assert not list((tmp_path / "work" / "leases").glob("*-*")), "slots and accelerators released"
    seen = (locks / "seen").read_text().split()
    assert seen and set(seen) <= masks[0] | masks[1], "the second cell's preflight saw the first's engine"


def _held(path) -> bool:
    """Another process holds the stub's lock on that accelerator now."""
    with open(path) as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
    return False


def _until(done, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "the first cell's engine never held its accelerators"
        time.sleep(0.05)


def _with(node, key: str) -> list[dict]:
    """Every mapping inside a document that holds `key`."""
    if isinstance(node, dict):
        return ([node] if key in node else []) + [m for v in node.values() for m in _with(v, key)]
    if isinstance(node, list):
        return [m for v in node for m in _with(v, key)]
    return []
