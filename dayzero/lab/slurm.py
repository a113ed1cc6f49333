"""Slurm as the lab's scheduler: the cluster's state for `hosts check`, and one job per cell.

Every Slurm command runs on the cluster's login host through a transport (local or ssh), after the
inventory's `slurm.setup` line. A cell's nodes come from one job (`sbatch --parsable` holding the
allocation with a sleep, so submitting never blocks and the queue state can be watched); each role
runs with `srun --jobid J --nodelist NODE --overlap` as a background process group on the login
host, killed like any other (which ends the step only while slurmctld answers, so a role's step
also starts a dead man's switch on its node); `scancel` runs on every exit of `allocation()`. The
job's `--time` ends it by itself if the controller dies.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from dayzero.errors import DayzeroError, InfrastructureError
from dayzero.lab.transport.base import RemoteProcess, Transport, watch_loop
from dayzero.redact import redact
from dayzero.spec.inventory import Host, Inventory, SlurmCluster, SlurmHardware
from dayzero.spec.shell import exports, quote

TRANSPORT = "slurm"  # Host.transport of a node reached through its allocation


@dataclass(frozen=True)
class NodeState:
    """One node as `sinfo` reports it, and the hardware kind its gres maps to (None: unmapped)."""

    name: str
    partitions: tuple[str, ...]
    state: str
    gres: str
    kind: str | None


@dataclass(frozen=True)
class Allocation:
    """A granted job: its id, name and nodes (in Slurm's order)."""

    job_id: str
    name: str
    nodes: tuple[str, ...]
    gres: str = ""


class Slurm:
    """Slurm commands on the login host of one cluster."""

    def __init__(self, cluster: SlurmCluster, transport: Transport):
        self.cluster, self.transport = cluster, transport

    def command(self, argv: list[str]) -> str:
        line = " ".join(quote(a) for a in argv)
        return f"{self.cluster.setup}\n{line}" if self.cluster.setup else line

    def run(self, argv: list[str], timeout: float = 60) -> str:
        return self.transport.check(self.command(argv), timeout=timeout).stdout

    # --- cluster state ---------------------------------------------------------------------

    def nodes(self) -> tuple[NodeState, ...]:
        """Every node of the cluster with its partitions, state and gres (`sinfo -N`)."""
        merged: dict[str, tuple[list[str], str, str]] = {}
        for line in self.run(["sinfo", "-h", "-N", "-o", "%N|%P|%t|%G"]).splitlines():
            parts = line.split("|")
            if len(parts) != 4:
                continue
            name, partition, state, gres = parts
            entry = merged.setdefault(name, ([], state, gres))
            entry[0].append(partition.rstrip("*"))
        return tuple(
            NodeState(name, tuple(parts), state, gres, _kind(self.cluster, gres))
            for name, (parts, state, gres) in sorted(merged.items())
        )

    # --- one job per cell ------------------------------------------------------------------

    def submit(self, hardware: SlurmHardware, nodes: int, name: str, exclude: tuple[str, ...] = ()) -> str:
        return self.run(submit_argv(self.cluster, hardware, nodes, name, exclude)).strip().split(";")[0]

    def queue_state(self, job_id: str) -> tuple[str, str]:
        """(state, reason) of a job; ("", "") once it has left the queue. A controller that does
        not answer raises InfrastructureError saying so: it is the lab's fault, and the reason."""
        result = self.transport.run(self.command(["squeue", "-h", "-j", job_id, "-o", "%T|%r"]), timeout=30)
        if not result.ok and "Invalid job id" in result.stderr:  # purged past MinJobAge: long gone
            return "", ""
        if not result.ok:
            why = redact(result.stderr.strip()[-300:], (self.cluster.setup,))
            raise InfrastructureError(
                f"slurm controller unreachable: squeue -j {job_id} exited {result.exit_status}: {why}"
            )
        out = result.stdout.strip()
        state, _, reason = out.partition("|")
        return state, reason

    def node_list(self, job_id: str) -> tuple[str, ...]:
        """The job's nodes from `scontrol show job`, expanded (`n[1-2]` -> n1, n2)."""
        out = self.run(["scontrol", "show", "job", job_id])
        match = re.search(r"(?<!\S)NodeList=(\S+)", out)
        if not match or match.group(1) == "(null)":
            return ()
        return tuple(self.run(["scontrol", "show", "hostnames", match.group(1)]).split())

    def wait_running(
        self, job_id: str, wait: float, on_state: Callable[[str, str], None] | None = None, poll: float = 1.0
    ) -> tuple[str, ...]:
        """Wait until the job runs and return its nodes; report each new queue state through
        `on_state(state, reason)`; give up after `wait` seconds (the caller cancels)."""
        deadline, seen = time.monotonic() + wait, None
        while True:
            state, reason = self.queue_state(job_id)
            if (state, reason) != seen and on_state is not None:
                on_state(state, reason)
            seen = (state, reason)
            if state == "RUNNING":
                return self.node_list(job_id)
            if state in ("", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "COMPLETED", "PREEMPTED"):
                why = f"{state or 'gone'} {reason}".strip()
                raise InfrastructureError(f"slurm job {job_id} ended before it ran ({why})")
            if time.monotonic() >= deadline:
                raise InfrastructureError(
                    f"slurm job {job_id} not granted within {wait:.0f}s: {state} ({reason})"
                )
            time.sleep(poll)

    def cancel(self, job_id: str, timeout: float = 30) -> None:
        """scancel, then wait until the job has left the queue (its steps are gone)."""
        self.transport.run(self.command(["scancel", job_id]), timeout=timeout)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.queue_state(job_id)[0] in ("", "CANCELLED", "COMPLETED"):
                return
            time.sleep(0.5)
        raise InfrastructureError(f"slurm job {job_id} still in the queue {timeout:.0f}s after scancel")

    def step(self, job_id: str, node: str, inner: str, flags: tuple[str, ...] = ()) -> str:
        return srun_line(job_id, node, inner, flags)

    def launch(
        self,
        alloc: Allocation,
        node: str,
        command: str,
        *,
        log_path: str,
        env: dict[str, str],
        setup: str = "",
        cwd: str | None = None,
        step: tuple[str, ...] = (),
        heartbeat: tuple[str, float] | None = None,
    ) -> RemoteProcess:
        """Start `command` on one node of the allocation as an srun step in the background; the
        returned process group (srun on the login host) is killed with `transport.kill`, which
        ends the step on the node while slurmctld answers. `setup` (the node's engine_setup) and
        `cd cwd` run on the node; `step` adds srun flags (pyxis: the step runs in a container
        image); `heartbeat` (file, timeout) starts a switch on the node (`role_script`)."""
        srun = self.step(alloc.job_id, node, role_script(command, env, setup, cwd, heartbeat), step)
        return self.transport.start(srun, env={}, log_path=log_path, setup=self.cluster.setup)

    def addresses(self) -> dict[str, str]:
        """node -> the address it is reached at (NodeAddr), for every node of the cluster."""
        out = self.run(["sinfo", "-h", "-N", "-o", "%N|%o"])
        return dict(line.split("|", 1) for line in out.splitlines() if "|" in line)

    def watchdog(
        self, job_id: str, name: str, heartbeat: str, timeout: float, log_path: str
    ) -> RemoteProcess:
        """A dead man's switch on the login host: `scancel` the job, again until it has left the
        queue, once `heartbeat` goes untouched for `timeout` seconds, disappears or changes
        owner (the controller died or let go without cancelling: a dead controller never
        cancels). Ends by itself when the job has left the queue, when its id names a job of
        another `name` (a job purged by a slurmctld crash gives its id to the next one), or past
        the job's time limit."""
        hb, job = quote(heartbeat), quote(job_id)
        give_up = int(time_limit_seconds(self.cluster.time_limit) + 600)
        ended = ("CANCELLED", "COMPLETED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED")
        gone = "|".join(["0:", *(f"0:{state}*" for state in ended), "*'Invalid job id'*"])
        loop = (
            f"own=$(cksum < {hb} 2>/dev/null); end=$(( $(date +%s) + {give_up} )); "
            f"while [ $(date +%s) -lt $end ]; do "
            f"st=$(squeue -h -j {job} -o '%T|%j' 2>&1); rc=$?; "
            f'case "$rc:$st" in {gone}) exit 0;; esac; '
            f'[ $rc = 0 ] && [ "${{st#*|}}" != {quote(name)} ] && exit 0; '
            f"age=$(( $(date +%s) - $(stat -c %Y {hb} 2>/dev/null || echo 0) )); "
            f'if [ $age -gt {int(timeout)} ] || [ "$(cksum < {hb} 2>/dev/null)" != "$own" ]; then '
            f'echo "$(date -u +%FT%TZ) heartbeat stale or gone: scancel {job}"; scancel {job}; fi; '
            f"sleep 2; done"
        )
        return self.transport.start(
            f"bash -c {quote(loop)}", env={}, log_path=log_path, setup=self.cluster.setup
        )

    @contextlib.contextmanager
    def allocation(
        self,
        hardware: SlurmHardware,
        nodes: int,
        name: str,
        *,
        wait: float,
        on_state: Callable[[str, str], None] | None = None,
        exclude: tuple[str, ...] = (),
    ) -> Iterator[Allocation]:
        """One job for all of a cell's nodes, cancelled on every way out (pass, failure, give-up,
        Ctrl-C, SIGTERM as an exception)."""
        job_id = self.submit(hardware, nodes, name, exclude)
        try:
            yield Allocation(job_id, name, self.wait_running(job_id, wait, on_state), hardware.gres)
        finally:
            self.cancel(job_id)


def srun_line(job_id: str, node: str, inner: str, flags: tuple[str, ...] = ()) -> str:
    """The srun line (without the cluster's setup) that runs the shell text `inner` as one task of
    a new step of the job on `node`, beside the steps already running (`--overlap`); `flags` come
    before the task (pyxis's `--container-image=...`)."""
    srun = [
        "srun", "--jobid", job_id, "--nodelist", node, "--nodes", "1", "--ntasks", "1",
        "--overlap", "--kill-on-bad-exit=1", "--quiet", *flags, "bash", "-c", inner,
    ]  # fmt: skip
    return " ".join(quote(a) for a in srun)


def role_script(
    command: str,
    env: dict[str, str],
    setup: str = "",
    cwd: str | None = None,
    heartbeat: tuple[str, float] | None = None,
) -> str:
    """What a role's step runs on its node: `cd cwd`, the node's setup, the exports, the command.

    With `heartbeat` (file, timeout), the step first starts the deployment's dead man's switch
    (`watch_loop`) on the node, over the step's process group (the task is its leader): killing
    srun on the login host ends the step only through slurmctld, so with the controller dead the
    engine would outlive its cell; the switch kills it once the cell lets go of its job slot."""
    cd = f"mkdir -p {quote(cwd)} && cd {quote(cwd)} || exit 1\n" if cwd else ""
    watch = ""
    if heartbeat is not None:
        loop = watch_loop("$1", *heartbeat)
        watch = f"setsid bash -c {quote(loop)} dayzero-watchdog $$ > /dev/null 2>&1 < /dev/null &\n"
    return cd + watch + (f"{setup}\n" if setup else "") + exports(env) + f"exec {command}"


def jobs_dir(cluster: SlurmCluster) -> str:
    """Where the cluster's job slots (leases, their owner files: the heartbeats) and watchdog logs
    live: under the workdir, which the nodes share."""
    return f"{cluster.workdir.rstrip('/')}/jobs"


def node_host(cluster: SlurmCluster, kind: SlurmHardware, node: str, address: str) -> Host:
    """A node of the cluster as a host of a kind: where recipes render, with the cluster's workdir,
    setup, vars and container."""
    return Host(
        name=node,
        hardware=kind.hardware,
        transport=TRANSPORT,
        address=address,
        accelerators=kind.accelerators,
        workdir=cluster.workdir,
        engine_setup=cluster.engine_setup,
        python=cluster.python,
        vars=cluster.vars,
        container=cluster.container_of(kind),
        container_image=kind.container_image,
    )


def _kind(cluster: SlurmCluster, gres: str) -> str | None:
    """The hardware kind of a node's gres (`gpu:nvidia_b300:8(S:0-1)` -> b300), if the inventory maps it."""
    for item in gres.split(","):
        parts = item.split("(")[0].split(":")
        if len(parts) >= 3 and (kind := cluster.kind_of_gres(parts[1])):
            return kind
    return None


def time_limit_seconds(limit: str) -> int:
    """Seconds of a Slurm time limit: `minutes`, `m:s`, `h:m:s`, `d-h`, `d-h:m`, `d-h:m:s`."""
    days, _, rest = limit.rpartition("-")
    parts = [int(p) for p in rest.split(":")]
    if days:
        h, m, sec = (parts + [0, 0])[:3]
    else:
        h, m, sec = {1: [0, parts[0], 0], 2: [0, *parts], 3: parts}[len(parts)]
    return int(days or 0) * 86400 + h * 3600 + m * 60 + sec


def job_name(run_id: str, cell_id: str) -> str:
    """`dayzero:<run>:<cell>`, in characters squeue and scancel --name take as they are."""
    return re.sub(r"[^A-Za-z0-9_.:/+-]", "_", f"dayzero:{run_id}:{cell_id}")


def submit_argv(
    cluster: SlurmCluster, hardware: SlurmHardware, nodes: int, name: str, exclude: tuple[str, ...] = ()
) -> list[str]:
    argv = [
        "sbatch", "--parsable", "--job-name", name, "--nodes", str(nodes), "--ntasks-per-node", "1",
        "--partition", hardware.partition or cluster.partition, "--time", cluster.time_limit,
        "--output", "/dev/null", "--no-requeue",
    ]  # fmt: skip
    optional = (("--account", cluster.account), ("--qos", cluster.qos), ("--constraint", hardware.constraint))
    for flag, value in optional:
        if value:
            argv += [flag, value]
    if hardware.gres:
        argv += ["--gres", hardware.gres]
    if cluster.exclusive:
        argv.append("--exclusive")
    if exclude:
        argv += ["--exclude", ",".join(exclude)]
    # the batch step only holds the allocation (roles run as srun steps), never past the job's time
    # limit: a step orphaned when slurmctld died mid-job is out of scancel's reach (proctrack/linuxproc)
    return [*argv, "--wrap", f"exec sleep {time_limit_seconds(cluster.time_limit)}"]


def nodes_of_kind(cluster: SlurmCluster, hw: SlurmHardware, nodes: tuple[NodeState, ...]) -> list[NodeState]:
    """Nodes of the hardware's partition and gres, whatever their state."""
    partition = hw.partition or cluster.partition
    return [n for n in nodes if partition in n.partitions and (not hw.gres_type or n.kind == hw.hardware)]


def usable_nodes(cluster: SlurmCluster, hw: SlurmHardware, nodes: tuple[NodeState, ...]) -> list[NodeState]:
    """Nodes of the hardware's partition and gres that are not down, drained, failed or unknown."""
    fits = nodes_of_kind(cluster, hw, nodes)
    return [n for n in fits if not re.match(r"(down|drain|fail|inval|unk)", n.state)]


def check_lines(cluster: SlurmCluster, nodes: tuple[NodeState, ...]) -> tuple[list[str], int]:
    """`hosts check` for a cluster: one line per node, then per hardware kind how many nodes are
    usable; returns (lines, number of problems)."""
    lines, problems = [], 0
    wanted = {h.partition or cluster.partition for h in cluster.hardware}
    present = {p for n in nodes for p in n.partitions}
    for partition in sorted(wanted - present):
        lines.append(f"problem: partition {partition!r} not found (sinfo lists {sorted(present)})")
        problems += 1
    for n in nodes:
        kind, gres, parts = n.kind or "-", n.gres or "(none)", ",".join(n.partitions)
        lines.append(f"{n.name:<16} {n.state:<10} {kind:<8} gres {gres}  partitions {parts}")
    for hw in cluster.hardware:
        partition = hw.partition or cluster.partition
        fits = nodes_of_kind(cluster, hw, nodes)
        up = usable_nodes(cluster, hw, nodes)
        asked = hw.gres or "no gres"
        lines.append(f"{hw.hardware}: {len(up)} of {len(fits)} node(s) usable in {partition} ({asked})")
        if not up:
            lines.append(f"problem: no usable node for {hw.hardware}")
            problems += 1
    return lines, problems


def print_check(inventory: Inventory) -> int:
    """`dayzero hosts check` for the inventory's cluster: prints nodes, states and gres through
    the login host; returns how many problems it found (an unreachable controller is one)."""
    from dayzero.lab.transport import open_transport

    cluster = inventory.slurm
    try:
        with open_transport(cluster.login, inventory) as transport:
            nodes = Slurm(cluster, transport).nodes()
    except DayzeroError as exc:
        why = redact(str(exc), inventory.secrets)
        print(f"slurm ({cluster.login.transport} {cluster.login.address}) UNREACHABLE  {why}")
        return 1
    lines, problems = check_lines(cluster, nodes)
    print(f"slurm: partition {cluster.partition}, {len(nodes)} node(s)")
    print("\n".join(lines))
    return problems
