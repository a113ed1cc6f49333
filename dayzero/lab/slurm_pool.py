"""Cells on a Slurm cluster: one job holds a cell's nodes, and each node is a transport into it.

`SlurmPool` offers `HostPool`'s interface to `run/cell.py` (candidates, acquire, facts_of,
release, transport, close) and hands every hardware kind its cluster does not serve to the host
pool beside it. `acquire` takes one of the cluster's `max_jobs` job slots (a lease on the login
host, shared by every xdist worker and run: its owner file is the controller's heartbeat),
submits the cell's job (`dayzero.lab.slurm`), reports its queue state in the progress log, gives
up after `--lease-wait`, then preflights every node inside the allocation. A node that fails
preflight is quarantined for the rest of the run and excluded (`--exclude`) from the next job.
A watchdog on the login host cancels the job when the heartbeat stops (the controller died),
and each role's step kills its engine on the node once the heartbeat stops or the slot is let go
(slurmctld died: nothing else reaches the node); the job's time limit ends it if everything else
failed. `release` cancels the job.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from dayzero.clock import now_iso
from dayzero.errors import InfrastructureError
from dayzero.lab.lease import Lease, LeaseKeeper, acquire_all, release
from dayzero.lab.pool import Held, HostPool, NoHost, let_go_all
from dayzero.lab.preflight import HostFacts, gather
from dayzero.lab.presence import RoleCheck
from dayzero.lab.slurm import (
    TRANSPORT,
    Allocation,
    Slurm,
    job_name,
    jobs_dir,
    node_host,
    nodes_of_kind,
    usable_nodes,
)
from dayzero.lab.transport import RemoteProcess, Transport, open_transport
from dayzero.lab.transport.base import CommandResult
from dayzero.spec.card import ModelFile
from dayzero.spec.inventory import Host, Inventory, SlurmCluster, SlurmHardware
from dayzero.spec.matrix import Hardware


class SlurmNodeTransport(Transport):
    """A node of a running job: every command is an `srun --jobid J --nodelist NODE --overlap`
    step started on the login host; background roles are srun process groups there (killing
    one ends its step); logs are srun's output on the login host. A role found dead while its
    job has left RUNNING is the lab's fault (job cancelled, node down), never the product's."""

    def __init__(
        self, slurm: Slurm, allocation: Allocation, host: Host, heartbeat: tuple[str, float] | None = None
    ):
        self.slurm, self.allocation, self.host = slurm, allocation, host
        self.heartbeat = heartbeat  # (the job slot's owner file, timeout): a role's switch on its node

    @property
    def login(self) -> Transport:
        return self.slurm.transport

    @property
    def own_marks(self) -> tuple[str, ...]:
        """Every step of the cell's job runs under a `slurmstepd: [JOB.STEP]` on its node, in no
        process group the controller started (those are srun's, on the login host)."""
        return (f"slurmstepd: [{self.allocation.job_id}.",)

    def run(self, command: str, *, timeout: float, stdin: bytes | None = None) -> CommandResult:
        srun = self.slurm.step(self.allocation.job_id, self.host.name, command)
        setup = self.slurm.cluster.setup
        result = self.login.run(f"{setup}\n{srun}" if setup else srun, timeout=timeout, stdin=stdin)
        if not result.ok or "srun: error" in result.stderr:  # srun's own complaint: did the job end?
            self.running()  # a command cut short by the end of its job is no fact about the node
        return result

    def put(self, local: Path, remote: str) -> None:
        self.login.put(local, remote)  # the cluster's workdir is on a filesystem the nodes share

    def get(self, remote: str, local: Path) -> None:
        self.login.get(remote, local)

    def start(
        self,
        command: str,
        *,
        env: dict[str, str],
        log_path: str,
        setup: str = "",
        cwd: str | None = None,
        step: tuple[str, ...] = (),
    ) -> RemoteProcess:
        return self.slurm.launch(
            self.allocation,
            self.host.name,
            command,
            log_path=log_path,
            env=env,
            setup=setup,
            cwd=cwd,
            step=step,
            heartbeat=self.heartbeat,
        )

    def running(self) -> None:
        """Raise InfrastructureError unless the job still runs (cancelled, node down, time out)."""
        state, reason = self.slurm.queue_state(self.allocation.job_id)
        if state != "RUNNING":
            why = f"{state or 'gone from the queue'} {reason}".strip()
            raise InfrastructureError(
                f"slurm job {self.allocation.job_id} stopped running ({why}); its steps on "
                f"{','.join(self.allocation.nodes)} ended with it"
            )

    def alive(self, proc: RemoteProcess) -> bool:
        if self.login.alive(proc):
            return True
        self.running()
        return False

    def kill(self, proc: RemoteProcess, grace: float = 10.0) -> None:
        self.login.kill(proc, grace)

    def watch(self, proc: RemoteProcess, heartbeat: str, timeout: float) -> RemoteProcess:
        return self.login.watch(proc, heartbeat, timeout)

    def kill_unrecorded(self, log_path: str) -> None:
        self.login.kill_unrecorded(log_path)

    def tail(self, path: str, lines: int = 60) -> str:
        return self.login.tail(path, lines)


@dataclass
class SlurmHeld(Held):
    """A cell's hold on a cluster: its job slot (heartbeat), its job and the job's watchdog."""

    slot: Lease | None = None
    job_id: str = ""
    allocation: Allocation | None = None
    watchdog: RemoteProcess | None = None
    cancelled: bool = False

    @property
    def times(self) -> dict:
        """What evidence keeps of the hold: when, and the job's id, nodes and gres."""
        alloc = self.allocation
        job = {
            "job_id": self.job_id,
            "nodes": list(alloc.nodes) if alloc else [],
            "gres": alloc.gres if alloc else "",
        }
        return {**super().times, "slurm": job}


def port_slots(addresses: dict[str, str]) -> dict[str, int]:
    """node -> its index among the nodes that share its address: nodes on one machine (a test
    cluster, or nodes sharing a host) shift their ports by it, as lease slots do on a host."""
    seen: dict[str, int] = {}
    out = {}
    for node in sorted(addresses, key=_natural):
        out[node] = seen.get(addresses[node], 0)
        seen[addresses[node]] = out[node] + 1
    return out


def _natural(name: str) -> list:
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name)]


def unused_hosts(inventory: Inventory) -> list[str]:
    """A line for each kind the cluster serves that the inventory also has hosts of: its cells
    go to the cluster and those hosts stand idle, which a lab should hear once, not guess."""
    cluster = inventory.slurm
    if cluster is None:
        return []
    lines = []
    for kind in cluster.hardware:
        if hosts := [h.name for h in inventory.for_hardware(kind.hardware)]:
            partition = kind.partition or cluster.partition
            lines.append(
                f"{kind.hardware}: served by Slurm partition {partition}; its SSH host(s) "
                f"{', '.join(hosts)} are not used (remove slurm.hardware.{kind.hardware} to use them)"
            )
    return lines


@dataclass
class SlurmPool:
    """Cells of the kinds the inventory's cluster serves run in its jobs; others go to `hosts`."""

    hosts: HostPool
    transports: dict[str, Transport] = field(default_factory=dict)  # node -> its transport now
    _login: Transport | None = None
    _holder: Transport | None = None
    _slots: dict[str, int] | None = None
    _addresses: dict[str, str] | None = None

    @property
    def cluster(self) -> SlurmCluster:
        return self.hosts.inventory.slurm

    @property
    def slurm(self) -> Slurm:
        if self._login is None:
            self._login = open_transport(self.cluster.login, self.hosts.inventory, self.hosts.connect_timeout)
        return Slurm(self.cluster, self._login)

    def serves(self, hardware: str) -> bool:
        return self.cluster.for_hardware(hardware) is not None

    def close(self) -> None:
        for transport in (self._login, self._holder):
            if transport is not None:
                transport.close()
        self._login = self._holder = None
        self.transports.clear()
        self.hosts.close()

    # -- HostPool's interface -----------------------------------------------------------------

    def candidates(self, hardware: str) -> tuple[Host, ...]:
        """The cluster's nodes of the hardware (its partition and gres), as hosts: a cell needing
        more nodes than the cluster has is skipped, not queued forever. Their state is not asked:
        a node down, drained or unknown for now (just after slurmctld restarted) is a lab fault
        the cell meets in the queue (broken after --lease-wait), never a reason to skip it."""
        if self.serves(hardware):
            kind = self.cluster.for_hardware(hardware)
            return tuple(
                self._node_host(n.name, kind) for n in nodes_of_kind(self.cluster, kind, self.slurm.nodes())
            )
        try:
            return self.hosts.candidates(hardware)
        except NoHost:
            raise NoHost(
                f"no host and no slurm hardware {hardware!r} in inventory {self.hosts.inventory.path}"
            ) from None

    def transport(self, host: Host) -> Transport:
        if host.transport == TRANSPORT:
            return self.transports[host.name]
        return self.hosts.transport(host)

    def facts_of(self, host: Host, engine: str) -> HostFacts | None:
        return self.hosts.facts_of(host, engine)

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
        """Hosts of a Slurm job for the cell (a pyxis node checks its engine on the node, as
        its step's script runs it), or the SSH pool's for hardware the cluster does not serve
        (`used`: its accelerators claimed by index there; a job's nodes are the cluster's)."""
        if not self.serves(hardware.name):
            return self.hosts.acquire(
                cell_id, hardware, needed, engine, version_command, roles, image, model_files, used
            )
        kind = self.cluster.for_hardware(hardware.name)
        deadline = time.monotonic() + self.hosts.lease_wait
        held = self._slot(cell_id)
        try:
            while True:
                self._run_job(held, cell_id, kind, needed, deadline)
                unfit = [
                    (host, facts)
                    for host in held.hosts
                    if not (
                        facts := self._preflight(host, hardware, engine, version_command, roles, model_files)
                    ).healthy
                ]
                if not unfit:
                    held.acquired = now_iso("milliseconds")
                    return held
                self._end_job(held)
                for host, facts in unfit:
                    self.quarantine(host.name, "; ".join(facts.problems))
                self._enough_left(cell_id, kind, needed)
        except BaseException:
            self.release(held)
            raise

    def release(self, held: Held | None) -> None:
        """Cancel the job and give its slot back; never raises: a job that cannot be cancelled
        now (controller down) is cancelled by its watchdog once the heartbeat is gone."""
        if not isinstance(held, SlurmHeld):
            self.hosts.release(held)
            return
        held.released = now_iso("milliseconds")
        let_go_all(
            [
                (f"cancel slurm job {held.job_id}", lambda: self._end_job(held)),
                ("stop touching the slurm job slot", held.keeper.stop),
                (f"release job slot {held.slot.slot}", lambda: release(self.slurm.transport, held.slot)),
            ],
            self.hosts.say,
        )

    # -- quarantine (nodes, beside the host pool's hosts) ----------------------------------------

    @property
    def quarantine_dir(self) -> Path:
        return self.hosts.quarantine_dir / "slurm"

    def quarantine(self, node: str, reason: str) -> None:
        self.quarantine_dir.mkdir(parents=True, exist_ok=True)
        (self.quarantine_dir / f"{node}.txt").write_text(reason + "\n")
        self.hosts.say(f"excluded slurm node {node} for the rest of run {self.hosts.run_id}: {reason}")

    def quarantined(self) -> dict[str, str]:
        if not self.quarantine_dir.is_dir():
            return {}
        return {p.stem: p.read_text().strip() for p in sorted(self.quarantine_dir.glob("*.txt"))}

    # -- steps ------------------------------------------------------------------------------------

    def _slot(self, cell_id: str) -> SlurmHeld:
        """One of the cluster's `max_jobs` job slots, waited for up to `--lease-wait`; its owner
        file is touched while the cell runs (the heartbeat the job's watchdog watches)."""
        holder = replace(self.cluster.login, slots=self.cluster.max_jobs, workdir=self._jobs_dir())
        if self._holder is None:  # the lease script reads the slot count off its transport's host
            self._holder = open_transport(holder, self.hosts.inventory, self.hosts.connect_timeout)
        login = self._holder
        pool = self.hosts
        (slot,) = acquire_all(
            [holder],
            1,
            lambda host: login,
            run_id=pool.run_id,
            cell_id=cell_id,
            worker=pool.worker,
            wait=pool.lease_wait,
            on_wait=pool.say,
            ttl=int(pool.ttl),
        )
        keeper = LeaseKeeper([slot], lambda host: login).__enter__()
        return SlurmHeld([], keeper, acquired="", slot=slot)

    def _jobs_dir(self) -> str:
        return jobs_dir(self.cluster)

    def _run_job(
        self, held: SlurmHeld, cell_id: str, kind: SlurmHardware, needed: int, deadline: float
    ) -> None:
        """Submit the cell's job (quarantined nodes excluded), start its watchdog, wait until it
        runs, and make its nodes the held hosts."""
        slurm, say = self.slurm, self.hosts.say
        exclude = tuple(sorted(self.quarantined()))
        name = job_name(self.hosts.run_id, cell_id)
        held.job_id, held.cancelled, held.allocation = slurm.submit(kind, needed, name, exclude), False, None
        but = f", excluding {','.join(exclude)}" if exclude else ""
        say(f"{cell_id}: slurm job {held.job_id} submitted: {needed} node(s), {kind.gres or 'no gres'}{but}")
        log = f"{self._jobs_dir()}/{held.job_id}.watchdog.log"
        held.watchdog = slurm.watchdog(held.job_id, name, held.slot.heartbeat, self.hosts.ttl, log)

        def on_state(state: str, reason: str) -> None:
            say(f"{cell_id}: slurm job {held.job_id} {state or 'gone'} ({reason or '-'})")

        nodes = slurm.wait_running(held.job_id, max(0.0, deadline - time.monotonic()), on_state)
        held.allocation = Allocation(held.job_id, name, nodes, kind.gres)
        slots = self._port_slots()
        held.leases = []
        for node in nodes:
            host = self._node_host(node, kind)
            heartbeat = (held.slot.heartbeat, self.hosts.ttl)
            self.transports[node] = SlurmNodeTransport(slurm, held.allocation, host, heartbeat)
            held.leases.append(
                Lease(host, slots.get(node, 0), self.hosts.run_id, held.slot.path, held.slot.ttl)
            )
        say(f"{cell_id}: slurm job {held.job_id} runs on {','.join(nodes)}")

    def _node_host(self, node: str, kind: SlurmHardware) -> Host:
        return node_host(self.cluster, kind, node, self._node_addresses().get(node, node))

    def _node_addresses(self) -> dict[str, str]:
        if self._addresses is None:
            self._addresses = self.slurm.addresses()
        return self._addresses

    def _port_slots(self) -> dict[str, int]:
        if self._slots is None:
            self._slots = port_slots(self._node_addresses())
        return self._slots

    def _preflight(
        self,
        host: Host,
        hardware: Hardware,
        engine: str,
        version_command: str,
        roles: Sequence[RoleCheck],
        model_files: Sequence[ModelFile] = (),
    ) -> HostFacts:
        engines = {engine: version_command} if version_command else {}
        transport, secrets = self.transports[host.name], self.hosts.inventory.secrets
        facts = gather(transport, hardware, engines, secrets, roles, model_files=model_files)
        self.hosts.facts[f"{host.name}:{engine}"] = facts
        return facts

    def _enough_left(self, cell_id: str, kind: SlurmHardware, needed: int) -> None:
        left = [
            n
            for n in usable_nodes(self.cluster, kind, self.slurm.nodes())
            if n.name not in self.quarantined()
        ]
        if len(left) < needed:
            details = " | ".join(f"{name}: {why}" for name, why in self.quarantined().items())
            raise InfrastructureError(
                f"{cell_id}: needs {needed} healthy {kind.hardware} slurm node(s), {len(left)} left after "
                f"preflight; excluded: {details}"
            )

    def _end_job(self, held: SlurmHeld) -> None:
        """scancel the job and wait until it has left the queue, then stop its watchdog; a job
        that cannot be cancelled now keeps its watchdog, which retries once the heartbeat stops."""
        if not held.job_id or held.cancelled:
            return
        for node in held.allocation.nodes if held.allocation else ():
            self.transports.pop(node, None)
        try:
            self.slurm.cancel(held.job_id)
        except InfrastructureError as exc:
            self.hosts.say(f"could not cancel slurm job {held.job_id} now ({exc}); its watchdog cancels it")
            return
        held.cancelled = True
        if held.watchdog is not None:
            try:
                self.slurm.transport.kill(held.watchdog, grace=0)
            except InfrastructureError as exc:
                self.hosts.say(f"could not stop the watchdog of slurm job {held.job_id}: {exc}")
