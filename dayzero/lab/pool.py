"""The host pool: lease healthy hosts for a cell, preflight them, swap out and quarantine the unfit.

A strategy step in labgrid's sense: a cell asks for N hosts of its hardware and gets leases on
N hosts that passed preflight just now, or an `InfrastructureError` naming every quarantined
host and why. A host that fails preflight, or does not answer within the connect timeout
(`HostUnreachable`), is quarantined for the rest of the run (a file under the run's folder, so
every xdist worker of the run skips it) and another host is tried; only hosts someone else
holds are waited for (`lease_wait`).

Candidates are probed all at once before a lease is tried (`probe`), each under a lock in the
run's quarantine folder that is held while it is dialled, the quarantine read under it: the
workers of a run dial a dead host once among them, and a dead lab costs one connect timeout.
"""

from __future__ import annotations

import fcntl
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from dayzero.clock import now_iso
from dayzero.errors import HostUnreachable, InfrastructureError
from dayzero.lab import devicemask
from dayzero.lab.fanout import each
from dayzero.lab.lease import DEFAULT_TTL, Lease, LeaseKeeper, TooFewHosts, acquire_all, release
from dayzero.lab.preflight import HostFacts, gather
from dayzero.lab.presence import RoleCheck
from dayzero.lab.transport import CONNECT_TIMEOUT_S, Transport, open_transport
from dayzero.spec.card import ModelFile
from dayzero.spec.inventory import Host, Inventory
from dayzero.spec.matrix import Hardware


def let_go_all(steps: Sequence[tuple[str, Callable[[], None]]], say: Callable[[str], None]) -> None:
    """Run every step of letting a cell's hosts go, whatever lands mid-way. A host that cannot
    be reached is reported (its lease goes stale after the ttl); an interrupt (Ctrl-C, SIGTERM)
    is held until every step has been tried, the interrupted one once more (its command may never
    have run), then re-raised: a lease left behind keeps the host from the next run for a ttl."""
    interrupted: BaseException | None = None
    for what, step in steps:
        for _ in range(2):
            try:
                step()
            except InfrastructureError as exc:
                say(f"could not {what}: {exc}")
            except BaseException as exc:  # noqa: BLE001 - re-raised once every step is tried
                interrupted = interrupted or exc
                continue
            break
    if interrupted is not None:
        raise interrupted


class NoHost(Exception):  # noqa: N818 - a reason to skip, not an error
    """No host of the inventory has the cell's hardware: the cell is skipped, not failed.

    `reason` says why without naming the cell: a run's summary counts the cells skipped for it."""

    def __init__(self, message: str, reason: str = ""):
        super().__init__(message)
        self.reason = reason or message


def no_host_reason(hardware: str, inventory: Path, needed: int, have: int) -> str:
    """Why a cell finds too few hosts, in the same words for a run, a dry run and every cell."""
    if not have:
        return f"no host with hardware {hardware!r} in inventory {inventory}"
    return f"needs {needed} {hardware} hosts; inventory {inventory} has {have}"


@dataclass
class Held:
    """Hosts one cell holds: the leases, the keeper touching them, and when they were held
    (evidence keeps the times: an audit of who had a host when, across workers and runs)."""

    leases: list[Lease]
    keeper: LeaseKeeper
    acquired: str
    released: str = ""

    @property
    def hosts(self) -> list[Host]:
        return [lease.host for lease in self.leases]

    @property
    def times(self) -> dict[str, str]:
        return {"acquired": self.acquired, **({"released": self.released} if self.released else {})}


@dataclass
class HostPool:
    inventory: Inventory
    quarantine_dir: Path
    run_id: str
    worker: str = "master"
    lease_wait: float = 1800.0
    ttl: int = DEFAULT_TTL
    connect_timeout: float = CONNECT_TIMEOUT_S
    say: Callable[[str], None] = print
    transports: dict[str, Transport] = field(default_factory=dict)
    facts: dict[str, HostFacts] = field(default_factory=dict)  # "<host>:<engine>" -> last preflight
    reached: set[str] = field(default_factory=set)  # hosts this process has dialled and reached

    def transport(self, host: Host) -> Transport:
        if host.name not in self.transports:
            self.transports[host.name] = open_transport(host, self.inventory, self.connect_timeout)
        return self.transports[host.name]

    def close(self) -> None:
        for t in self.transports.values():
            t.close()
        self.transports.clear()

    # -- quarantine ------------------------------------------------------------------------

    def quarantine(self, host: Host, reason: str) -> None:
        self.quarantine_dir.mkdir(parents=True, exist_ok=True)
        (self.quarantine_dir / f"{host.name}.txt").write_text(reason + "\n")
        self.say(f"quarantined {host.name} for the rest of run {self.run_id}: {reason}")

    def quarantined(self) -> dict[str, str]:
        if not self.quarantine_dir.is_dir():
            return {}
        return {p.stem: p.read_text().strip() for p in sorted(self.quarantine_dir.glob("*.txt"))}

    def probe(self, hosts: Sequence[Host]) -> None:
        """Dial each SSH host this process has not reached yet, all at once; quarantine the dead."""
        fresh = [h for h in hosts if h.transport != "local" and h.name not in self.reached]
        each(fresh, self._probe_one, "dayzero-probe")

    def _probe_one(self, host: Host) -> None:
        """Under the host's probe lock (xdist workers and threads alike wait on it): a host that
        another worker quarantined meanwhile is not dialled again."""
        self.quarantine_dir.mkdir(parents=True, exist_ok=True)
        with open(self.quarantine_dir / f".{host.name}.probe", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if host.name in self.quarantined():
                return
            try:
                self.transport(host).run("true", timeout=self.connect_timeout + 30)
            except HostUnreachable as exc:
                self.quarantine(host, str(exc))
                return
            except InfrastructureError:  # a host key to verify, ...: the lease step says it
                return
        self.reached.add(host.name)

    # -- preflight -------------------------------------------------------------------------

    def candidates(self, hardware: str) -> tuple[Host, ...]:
        hosts = self.inventory.for_hardware(hardware)
        if not hosts:
            raise NoHost(no_host_reason(hardware, self.inventory.path, 1, 0))
        return hosts

    def preflight(
        self,
        host: Host,
        hardware: Hardware,
        engine: str,
        version_command: str = "",
        roles: Sequence[RoleCheck] = (),
        image: str = "",
        model_files: Sequence[ModelFile] = (),
        devices: Sequence[int] = (),
    ) -> HostFacts:
        """Facts of a host for one engine, gathered before every use: the previous cell may not
        have released its accelerator memory, a disk may have filled up, an engine may be gone.
        `image`: the cell's, which a container host checks its roles and engine in;
        `model_files`: the card's, checked present; `devices`: the accelerators its lease
        claimed (a share is judged alone: `preflight.leased_share`)."""
        engines = {engine: version_command} if version_command else {}
        measured = [f.memory_bandwidth_gbs for k, f in self.facts.items() if k.split(":")[0] == host.name]
        facts = gather(
            self.transport(host),
            hardware,
            engines,
            self.inventory.secrets,
            roles,
            image or None,
            model_files,
            bandwidth=next((b for b in measured if b is not None), None),  # measured once per host
            leased=devices,
        )
        self.facts[f"{host.name}:{engine}"] = facts
        return facts

    def facts_of(self, host: Host, engine: str) -> HostFacts | None:
        return self.facts.get(f"{host.name}:{engine}")

    # -- lease -----------------------------------------------------------------------------

    def acquire(
        self,
        cell_id: str,
        hardware: Hardware,
        needed: int,
        engine: str,
        version_command: str = "",
        roles: Sequence[RoleCheck] = (),
        image: str = "",
        model_files: Sequence[ModelFile] = (),
        used: int | None = None,
    ) -> Held:
        """Lease `needed` hosts, preflight them, and swap out any that fail until none are left.
        `used`: the accelerators the cell's mode states (`parallel`), claimed by index on each
        host (`devicemask.claim`); None: every accelerator of each host.

        The keeper of the returned hosts is already touching the leases; `release` stops it.
        """
        candidates = self.candidates(hardware.name)
        self.probe([h for h in candidates if h.name not in self.quarantined()])
        while True:
            try:
                leases = acquire_all(
                    candidates,
                    needed,
                    self.transport,
                    run_id=self.run_id,
                    cell_id=cell_id,
                    worker=self.worker,
                    wait=self.lease_wait,
                    on_wait=self.say,
                    skip=lambda h: h.name in self.quarantined(),
                    ttl=int(self.ttl),
                    on_unreachable=lambda host, exc: self.quarantine(host, str(exc)),
                    devices=devicemask.claim(hardware.device_query, used),
                )
            except TooFewHosts:
                raise InfrastructureError(self.too_few(candidates, needed, hardware.name)) from None
            held = Held(leases, LeaseKeeper(leases, self.transport), acquired="")
            try:
                held.keeper.__enter__()
                facts = each(
                    leases,
                    lambda lease: self.preflight(
                        lease.host,
                        hardware,
                        engine,
                        version_command,
                        roles,
                        image,
                        model_files,
                        lease.devices,
                    ),
                    "dayzero-preflight",
                )
                if failed := next((f for f in facts if isinstance(f, Exception)), None):
                    raise failed
                checked = [(lease.host, f) for lease, f in zip(leases, facts, strict=True)]
                unfit = [(host, facts) for host, facts in checked if not facts.healthy]
            except BaseException:
                self._let_go(held)
                raise
            if not unfit:
                held.acquired = now_iso("milliseconds")
                return held
            self._let_go(held)
            for host, facts in unfit:
                self.quarantine(host, "; ".join(facts.problems))

    def too_few(self, candidates: Sequence[Host], needed: int, hardware: str) -> str:
        """Why a cell gets no hosts: each of its quarantined candidates and why (one line, the
        same for every cell of the hardware, so a run's summary groups them)."""
        quarantined = self.quarantined()
        left = [h for h in candidates if h.name not in quarantined]
        details = " | ".join(
            why if why.startswith(f"{h.name} ") else f"{h.name}: {why}"  # an unreachable host names itself
            for h in candidates
            if (why := quarantined.get(h.name))
        )
        if not details:  # none quarantined: the inventory itself is short of hosts
            return f"needs {needed} {hardware} host(s), the inventory has {len(candidates)}"
        return (
            f"needs {needed} healthy {hardware} host(s), {len(left)} left; "
            f"quarantined for run {self.run_id}: {details}"
        )

    def _let_go(self, held: Held) -> None:
        """Stop touching and remove every lease (`let_go_all`)."""
        steps = [("stop touching the leases", held.keeper.stop)] + [
            (f"release lease on {lease.host.name}", lambda one=lease: release(self.transport(one.host), one))
            for lease in held.leases
        ]
        let_go_all(steps, self.say)

    def release(self, held: Held | None) -> None:
        """Stop touching and remove the leases (`_let_go`), noting when they were let go."""
        if held is None:
            return
        held.released = now_iso("milliseconds")  # a moment before the leases are let go
        self._let_go(held)
