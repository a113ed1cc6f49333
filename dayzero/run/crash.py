"""A cell whose xdist worker died mid-run: the controller ends what the worker left and records it.

A worker killed mid-cell (SIGKILL, the out-of-memory killer, `os._exit`) runs no `finally`: its
servers run on until their watchdogs find the heartbeat stale (the ttl: minutes), its leases
stay held as long, and the cell has no evidence (the table shows it Pending). xdist tells the
controller at once, which finds the worker's leases by their owner files (run id, worker, cell),
kills the process groups started in the cell's folder on those hosts (their `.pgid` files),
copies their logs, releases the leases (each watchdog, its group gone, exits) and writes the
evidence: verdict broken, an infrastructure fault naming the worker. The checks the worker had
made died with it; the raw records it kept are listed.
"""

from __future__ import annotations

import getpass
import json
import socket
from dataclasses import dataclass
from pathlib import Path

from dayzero import __version__, evidence
from dayzero.clock import now_iso
from dayzero.errors import CommandTimeout, InfrastructureError
from dayzero.lab.lease import Lease, held_by, release
from dayzero.redact import redact, redact_file
from dayzero.run import records
from dayzero.run.cell import RunContext, recipe_for, records_dir
from dayzero.spec.matrix import Cell


@dataclass(frozen=True)
class Reclaimed:
    """What the controller did for a crashed worker's cell: its evidence, and where it is."""

    doc: dict
    path: Path


def cell_of(nodeid: str, ctx: RunContext) -> Cell | None:
    """The cell a test item id runs (`suites/test_cells.py::test_cell[<cell id>]`), if any."""
    head, _, param = nodeid.partition("[")
    if not head or not param.endswith("]"):
        return None
    return next((c for c in ctx.matrix.cells if c.id == param[:-1]), None)


def _end_on_host(ctx: RunContext, cell: Cell, leases: list[Lease], logs: list[Path]) -> str:
    """Kill the cell's groups on one host, copy its logs, release its leases; what was done."""
    transport = ctx.transport(leases[0].host)
    folder = f"{leases[0].host.workdir.rstrip('/')}/{records.cell_folder(ctx.run_id, cell.id)}"
    killed = transport.kill_recorded(folder)
    listing = transport.run(f"ls -1 {folder}/*.log 2>/dev/null; exit 0", timeout=30).stdout.split()
    dest = ctx.reports_dir / records.logs_folder(ctx.run_id, cell.id)
    for remote in listing:
        local = dest / f"{leases[0].host.name}-{Path(remote).name}"
        transport.get(remote, local)
        redact_file(local, ctx.inventory.secrets)
        logs.append(local)
    for lease in leases:
        release(transport, lease)
    return f"{leases[0].host.name}: {len(killed)} process group(s) killed, lease released"


def reclaim(ctx: RunContext, cell: Cell, worker: str, started: str = "") -> Reclaimed:
    """End what `worker` left of `cell` on every host of its hardware and write its evidence
    (kept as it is if the worker wrote it before it died). Never raises for a host it cannot
    reach: that host's watchdog ends the cell's processes once the lease's ttl runs out."""
    leases: list[Lease] = []
    logs: list[Path] = []
    done: list[str] = []
    for host in ctx.inventory.for_hardware(cell.hardware):
        try:
            mine = held_by(ctx.transport(host), ctx.run_id, worker, cell.id)
            if mine:
                done.append(_end_on_host(ctx, cell, mine, logs))
                leases += mine
        except (InfrastructureError, CommandTimeout, OSError) as exc:
            done.append(f"{host.name}: not reached ({exc}); its watchdog ends the cell after the lease's ttl")
    path = evidence.path_of(ctx.reports_dir, cell.id, ctx.run_id)
    if path.exists():
        return Reclaimed(json.loads(path.read_text()), path)
    error = f"xdist worker {worker} crashed while running {cell.id} (no teardown ran); " + (
        "; ".join(done) or f"no lease of it on the inventory's {cell.hardware} hosts"
    )
    ctx.say(error)
    doc = evidence.build(
        cell,
        [],
        leases,
        {},
        held={},
        run={
            "id": ctx.run_id,
            "started": started or now_iso(),
            "finished": now_iso(),
            "by": getpass.getuser(),
            "controller": socket.gethostname(),
            "worker": worker,
            "harness_version": __version__,
            **({"lab": ctx.inventory.lab} if ctx.inventory.lab else {}),
        },
        recipe=recipe_for(ctx, cell, leases) if leases else None,  # as the worker rendered it
        engine={"name": ctx.matrix.card(cell).engine.name, "version": "unknown"},
        records=[str(p.relative_to(ctx.reports_dir)) for p in records_dir(ctx, cell).glob("*.json")],
        logs=[str(p.relative_to(ctx.reports_dir)) for p in logs],
        verdict="broken",
        error=redact(error, ctx.inventory.secrets),
        secrets=ctx.inventory.secrets,
    )
    return Reclaimed(doc, evidence.write(ctx.reports_dir, doc))
