"""Leases: an exclusive claim on hosts for one cell run, taken atomically on the host itself.

A lease is a directory `<workdir>/leases/slot-<i>` created with `mkdir` (atomic on POSIX), with
an `owner.json` naming owner, run id, cell and ttl. Because it lives on the host, it holds
across xdist workers and across separate pytest runs by different people. A multi-host cell
takes all its hosts or none: it never waits while holding a host, so two cells that each need
two hosts cannot deadlock.

The holder's `LeaseKeeper` touches `owner.json` every ttl/4; a lease untouched for longer than
its ttl is stale (its controller was killed or cut off) and is moved aside (atomic rename) and
reclaimed. The same file is the heartbeat the host-side watchdog of a deployment watches, so a
silent controller loses its lease and its servers together.

A cell may also claim accelerators of a host by index (`devices`: a mode of TP2 on an
8-accelerator host), so several cells share one host's accelerators: each index is a directory
`<workdir>/leases/acc-<j>` made with `mkdir` after the slot, naming the slot and the claim's
token; it lives as long as that slot's owner file holds the token (a slot reclaimed as stale
frees its accelerators with it). The indices are taken all or none, like hosts.
"""

from __future__ import annotations

import contextlib
import getpass
import json
import os
import random
import socket
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from dayzero.errors import HostKeyError, HostUnreachable, InfrastructureError
from dayzero.lab.transport import Transport
from dayzero.spec.inventory import Host
from dayzero.spec.shell import quote

DEFAULT_TTL = 120

_ACQUIRE = r"""
base={base}; now=$(date +%s); want={devices}; short=""
mkdir -p "$base"
for i in $(seq 0 $(({slots} - 1))); do
  d="$base/slot-$i"
  if [ -d "$d" ]; then
    ttl=$(sed -n 's/.*"ttl": \(-\?[0-9]*\).*/\1/p' "$d/owner.json" 2>/dev/null)
    seen=$(stat -c %Y "$d/owner.json" 2>/dev/null || stat -c %Y "$d")
    if [ $(( now - seen )) -gt "${{ttl:-60}}" ]; then
      mv "$d" "$d.stale.$$" 2>/dev/null && rm -rf "$d.stale.$$"
    fi
  fi
  if mkdir "$d" 2>/dev/null; then
    printf '%s' {owner} > "$d/owner.json"
    got=""; n=0; j=0
    while [ "$n" -lt "$want" ] && [ "$j" -lt {count} ]; do
      a="$base/acc-$j"
      if [ -d "$a" ]; then
        by=$(cat "$a/owner" 2>/dev/null)
        if [ -n "$by" ]; then
          grep -qF "${{by#* }}" "$base/${{by%% *}}/owner.json" 2>/dev/null || stale=1
        else
          [ $(( now - $(stat -c %Y "$a" 2>/dev/null || echo "$now") )) -gt 60 ] && stale=1
        fi
        if [ -n "$stale" ]; then mv "$a" "$a.stale.$$" 2>/dev/null && rm -rf "$a.stale.$$"; fi
        stale=""
      fi
      if mkdir "$a" 2>/dev/null; then
        printf 'slot-%s %s' "$i" {token} > "$a/owner"
        got="$got${{got:+,}}$j"; n=$((n + 1))
      fi
      j=$((j + 1))
    done
    if [ "$n" -ge "$want" ]; then echo "LEASED $i $got"; exit 0; fi
    for k in $(echo "$got" | tr , ' '); do rm -rf "$base/acc-$k"; done
    rm -rf "$d"; short="$n"; break
  fi
done
echo "BUSY $short"
for i in $(seq 0 $(({slots} - 1))); do cat "$base/slot-$i/owner.json" 2>/dev/null; echo; done
"""


@dataclass(frozen=True)
class Lease:
    host: Host
    slot: int
    run_id: str
    path: str
    ttl: int = DEFAULT_TTL
    devices: tuple[int, ...] = ()  # the accelerators claimed by index; (): none claimed (a cpu host)
    token: str = ""  # the claim's own mark in its owner file and its accelerators' owner files

    @property
    def heartbeat(self) -> str:
        return f"{self.path}/owner.json"


class LeaseKeeper:
    """Touches the leases' owner files while a cell runs: the lease's (and servers') lifeline."""

    def __init__(self, leases: Sequence[Lease], connect: Callable[[Host], Transport]):
        self.leases, self.connect = list(leases), connect
        self.interval = max(0.5, min(lease.ttl for lease in self.leases) / 4) if self.leases else 1.0
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="dayzero-lease-keeper", daemon=True)

    def __enter__(self) -> LeaseKeeper:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def touch(self) -> None:
        for lease in self.leases:
            try:
                transport = self.connect(lease.host)
                transport.run(f"touch -c {quote(lease.heartbeat)}", timeout=max(self.interval, 10))
            except InfrastructureError as exc:  # the host may come back before the ttl runs out
                self.failures.append(f"{lease.host.name}: {exc}")

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.touch()

    def stop(self) -> None:
        """Stop touching (the leases go stale after their ttl unless released first)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=30)


def owner_record(run_id: str, cell_id: str, worker: str) -> dict:
    return {
        "owner": f"{getpass.getuser()}@{socket.gethostname()}",
        "pid": os.getpid(),
        "run_id": run_id,
        "worker": worker,
        "cell": cell_id,
        "token": uuid.uuid4().hex,  # one claim, even for two workers of one run on one cell
    }


def lease_base(host: Host) -> str:
    return f"{host.workdir.rstrip('/')}/leases"


def try_acquire(
    transport: Transport,
    run_id: str,
    cell_id: str,
    worker: str,
    ttl: int = DEFAULT_TTL,
    devices: int | None = None,
):
    """One attempt on one host: a Lease, or a string describing who holds every slot.
    `devices`: how many of the host's accelerators to claim by index (0: every one; None: none,
    the host is shared by its slots alone)."""
    host = transport.host
    record = owner_record(run_id, cell_id, worker)
    owner = json.dumps({**record, "ttl": int(ttl)})
    count = host.accelerators or 0
    want = 0 if devices is None or not count else min(devices or count, count)
    script = _ACQUIRE.format(
        base=quote(lease_base(host)),
        slots=host.slots,
        owner=quote(owner),
        devices=want,
        count=count,
        token=quote(record["token"]),
    )
    try:
        out = transport.check(script, timeout=30).stdout.strip()
    except InfrastructureError:
        raise  # not reached, or no answer from it: a slot it made ours goes stale after the ttl
    except BaseException:  # Ctrl-C mid-command: the host may have made a slot ours already
        with contextlib.suppress(InfrastructureError):  # the interrupt is what the caller sees
            _drop_claim(transport, record["token"])
        raise
    first, *rest = out.splitlines() or [""]
    if first.startswith("LEASED"):
        _, slot, *indices = first.split()
        got = tuple(int(j) for j in indices[0].split(",")) if indices else ()
        path = f"{lease_base(host)}/slot-{slot}"
        return Lease(host, int(slot), run_id, path, int(ttl), got, record["token"])
    holders = [holder(line) for line in rest if line.strip()]
    free = first.split()[1:]
    short = [f"{free[0]} of the {want} accelerators wanted free"] if free else []
    return "; ".join(short + holders) or "busy"


def holder(owner_json: str) -> str:
    """Who holds a slot, from its owner file: whom to ask, and which run and cell it is for."""
    try:
        record = json.loads(owner_json)
    except ValueError:
        return f"held ({owner_json.strip()[:200]})"
    if not isinstance(record, dict):
        return f"held ({owner_json.strip()[:200]})"
    who = record.get("owner", "someone")
    pid = f" pid {record['pid']}" if "pid" in record else ""
    return (
        f"held by {who}{pid} (run {record.get('run_id', '?')}, worker {record.get('worker', '?')}, "
        f"cell {record.get('cell', '?')})"
    )


class TooFewHosts(InfrastructureError):
    """Fewer hosts than a cell needs are left to lease (the others quarantined): waiting cannot
    bring them back, so the cell is broken at once."""


def _drop_claim(transport: Transport, token: str) -> None:
    """Remove the slot and accelerators (if any) whose owner files hold the token of one claim."""
    base = quote(lease_base(transport.host))
    transport.run(
        f'for d in {base}/acc-* {base}/slot-*; do grep -qF {quote(token)} "$d/owner" "$d/owner.json" '
        '2>/dev/null && rm -rf "$d"; done; exit 0',
        timeout=30,
    )


def release(transport: Transport, lease: Lease) -> None:
    """Remove the lease only if it is still ours (a reclaimed lease belongs to someone else),
    its accelerators first (an accelerator whose slot is gone is free anyway)."""
    path = quote(lease.path)
    base = lease_base(lease.host)
    accs = " ".join(quote(f"{base}/acc-{j}") for j in lease.devices)
    mine = f'for a in {accs}; do grep -qF {quote(lease.token)} "$a/owner" 2>/dev/null && rm -rf "$a"; done; '
    transport.run(
        f"{mine if accs else ''}grep -q {quote(json.dumps(lease.run_id))} {path}/owner.json 2>/dev/null "
        f"&& rm -rf {path}; exit 0",
        timeout=30,
    )


def held_by(transport: Transport, run_id: str, worker: str, cell_id: str) -> list[Lease]:
    """The leases one worker of a run holds on a host for a cell, read from their owner files
    (with the accelerators each claimed): how a controller finds what a crashed worker left (a
    slot being reclaimed is skipped)."""
    host = transport.host
    base = lease_base(host)
    out = transport.run(
        f'for d in {quote(base)}/slot-*; do [ -f "$d/owner.json" ] || continue; '
        f'printf "%s\t" "${{d##*/slot-}}"; tr -d "\n" < "$d/owner.json"; echo; done; '
        f'for a in {quote(base)}/acc-*; do [ -f "$a/owner" ] || continue; '
        f'printf "acc %s\t" "${{a##*/acc-}}"; cat "$a/owner"; echo; done',
        timeout=30,
    ).stdout
    claimed: dict[str, list[int]] = {}  # "slot-<i> <token>" -> its accelerators
    for line in out.splitlines():
        if line.startswith("acc ") and line[4:].partition("\t")[0].isdigit():
            index, _, by = line[4:].partition("\t")
            claimed.setdefault(by.strip(), []).append(int(index))
    leases = []
    for line in out.splitlines():
        slot, _, owner = line.partition("\t")
        try:
            record = json.loads(owner)
            number = int(slot)
        except ValueError:
            continue
        if (record.get("run_id"), record.get("worker"), record.get("cell")) == (run_id, worker, cell_id):
            ttl = int(record.get("ttl", DEFAULT_TTL))
            token = str(record.get("token", ""))
            devices = tuple(sorted(claimed.get(f"slot-{number} {token}", ())))
            leases.append(Lease(host, number, run_id, f"{base}/slot-{number}", ttl, devices, token))
    return leases


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
    ttl: int = DEFAULT_TTL,
    on_unreachable: Callable[[Host, HostUnreachable], None] | None = None,
    devices: int | None = None,
) -> list[Lease]:
    """Lease `needed` hosts among `candidates`, all or none, waiting up to `wait` seconds for hosts
    someone else holds. A host that cannot be reached goes to `on_unreachable` (which should make
    `skip` true of it) and is never waited for; without one, the cell breaks at once. Fewer hosts
    left than `needed` (the others skipped) is `TooFewHosts`, at once. `devices`: the accelerators
    to claim on each host (`try_acquire`); a host without enough free ones is waited for."""
    deadline = time.monotonic() + wait
    announced = 0.0
    while True:
        _enough_left(candidates, needed, skip, cell_id)
        held: list[Lease] = []
        busy: list[str] = []
        try:
            for host in candidates:
                if len(held) == needed:
                    break
                if skip(host):
                    continue
                try:
                    got = try_acquire(connect(host), run_id, cell_id, worker, ttl, devices)
                except HostKeyError:  # a person must look at it: waiting would only retry it for hours
                    raise
                except HostUnreachable as exc:  # dead for this run: never waited for
                    if on_unreachable is None:
                        raise
                    on_unreachable(host, exc)
                    continue
                except InfrastructureError as exc:  # e.g. a host not dialled again for a while yet
                    busy.append(f"{host.name}: {exc}")
                    continue
                if isinstance(got, Lease):
                    held.append(got)
                else:
                    busy.append(f"{host.name}: {got}")
        except BaseException:  # a host key to verify, Ctrl-C: all or none still, nothing is kept
            for lease in held:
                with contextlib.suppress(InfrastructureError):
                    release(connect(lease.host), lease)
            raise
        if len(held) == needed:
            return held
        for lease in held:  # all or none: never wait while holding a host
            release(connect(lease.host), lease)
        _enough_left(candidates, needed, skip, cell_id)
        if time.monotonic() >= deadline:
            raise InfrastructureError(
                f"no {needed} free host(s) for {cell_id} within {wait:.0f}s; " + " | ".join(busy)
            )
        if time.monotonic() - announced > 30:
            announced = time.monotonic()
            on_wait(f"{cell_id} waits for {needed} free host(s): " + " | ".join(busy))
        time.sleep(random.uniform(0.5, 2.0))


def _enough_left(candidates: Sequence[Host], needed: int, skip: Callable[[Host], bool], cell_id: str) -> None:
    left = [h for h in candidates if not skip(h)]
    if len(left) < needed:
        raise TooFewHosts(f"{cell_id}: needs {needed} host(s), {len(left)} left to lease")
