"""Leases: an exclusive claim on hosts for one cell run, taken atomically on the host itself.

A lease is a directory `<workdir>/leases/slot-<i>` created with `mkdir` (atomic on POSIX), with
an `owner.json` naming owner, run id, cell and expiry. Because it lives on the host, it holds
across xdist workers and across separate pytest runs by different people. A multi-host cell
takes all its hosts or none: it never waits while holding a host, so two cells that each need
two hosts cannot deadlock. An expired lease is moved aside (atomic rename) and reclaimed.
"""

from __future__ import annotations

import getpass
import json
import os
import random
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from dayzero.errors import InfrastructureError
from dayzero.inventory import Host
from dayzero.shell import quote
from dayzero.transport import Transport

DEFAULT_TTL = 3 * 3600

_ACQUIRE = r"""
base={base}; now=$(date +%s)
mkdir -p "$base"
for i in $(seq 0 $(({slots} - 1))); do
  d="$base/slot-$i"
  if [ -d "$d" ]; then
    exp=$(sed -n 's/.*"expires": \([0-9]*\).*/\1/p' "$d/owner.json" 2>/dev/null)
    if [ -n "$exp" ] && [ "$exp" -lt "$now" ]; then
      mv "$d" "$d.stale.$$" 2>/dev/null && rm -rf "$d.stale.$$"
    elif [ -z "$exp" ] && [ $(( now - $(stat -c %Y "$d") )) -gt 60 ]; then
      mv "$d" "$d.stale.$$" 2>/dev/null && rm -rf "$d.stale.$$"
    fi
  fi
  if mkdir "$d" 2>/dev/null; then
    printf '%s' {owner} | sed "s/__EXPIRES__/$((now + {ttl}))/" > "$d/owner.json"
    echo "LEASED $i"; exit 0
  fi
done
echo BUSY; for i in $(seq 0 $(({slots} - 1))); do cat "$base/slot-$i/owner.json" 2>/dev/null; echo; done
"""


@dataclass(frozen=True)
class Lease:
    host: Host
    slot: int
    run_id: str
    path: str


def owner_record(run_id: str, cell_id: str, worker: str) -> dict:
    return {
        "owner": f"{getpass.getuser()}@{socket.gethostname()}",
        "pid": os.getpid(),
        "run_id": run_id,
        "worker": worker,
        "cell": cell_id,
    }


def lease_base(host: Host) -> str:
    return f"{host.workdir.rstrip('/')}/leases"


def try_acquire(transport: Transport, run_id: str, cell_id: str, worker: str, ttl: int = DEFAULT_TTL):
    """One attempt on one host: a Lease, or a string describing who holds every slot."""
    host = transport.host
    owner = json.dumps({**owner_record(run_id, cell_id, worker), "expires": "__EXPIRES__"})
    owner = owner.replace('"__EXPIRES__"', "__EXPIRES__")
    script = _ACQUIRE.format(base=quote(lease_base(host)), slots=host.slots, owner=quote(owner), ttl=int(ttl))
    out = transport.check(script, timeout=30).stdout.strip()
    if out.startswith("LEASED"):
        slot = int(out.split()[1])
        return Lease(host, slot, run_id, f"{lease_base(host)}/slot-{slot}")
    holders = [line for line in out.splitlines()[1:] if line.strip()]
    return "; ".join(holders) or "busy"


def release(transport: Transport, lease: Lease) -> None:
    """Remove the lease only if it is still ours (a reclaimed lease belongs to someone else)."""
    path = quote(lease.path)
    transport.run(
        f"grep -q {quote(json.dumps(lease.run_id))} {path}/owner.json 2>/dev/null && rm -rf {path}; exit 0",
        timeout=30,
    )


def acquire_all(
    candidates: Sequence[Host],
    needed: int,
    connect: Callable[[Host], Transport],
    *,
    run_id: str,
    cell_id: str,
    worker: str,
    wait: float,
    on_wait: Callable[[str], None] = lambda message: None,
    skip: Callable[[Host], bool] = lambda host: False,
) -> list[Lease]:
    """Lease `needed` hosts among `candidates`, all or none, waiting up to `wait` seconds."""
    deadline = time.monotonic() + wait
    announced = 0.0
    while True:
        held: list[Lease] = []
        busy: list[str] = []
        for host in candidates:
            if len(held) == needed:
                break
            if skip(host):
                continue
            try:
                got = try_acquire(connect(host), run_id, cell_id, worker)
            except InfrastructureError as exc:
                busy.append(f"{host.name}: unreachable ({exc})")
                continue
            if isinstance(got, Lease):
                held.append(got)
            else:
                busy.append(f"{host.name}: {got}")
        if len(held) == needed:
            return held
        for lease in held:  # all or none: never wait while holding a host
            release(connect(lease.host), lease)
        if time.monotonic() >= deadline:
            raise InfrastructureError(
                f"no {needed} free host(s) for {cell_id} within {wait:.0f}s; " + " | ".join(busy)
            )
        if time.monotonic() - announced > 30:
            announced = time.monotonic()
            on_wait(f"{cell_id} waits for {needed} free host(s): " + " | ".join(busy))
        time.sleep(random.uniform(0.5, 2.0))
