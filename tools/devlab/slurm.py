"""A real Slurm cluster on this machine, to test the Slurm backend without a lab.

`start(nodes, directory)` runs munged (its own key in `directory`, its own socket), `slurmctld -D` and
two or three `slurmd -D -N nK`, each node with two fake GPUs as gres `gpu:h200:2`, and returns when
`sinfo` shows every node idle. Nothing is installed and no system file is touched: every daemon
reads `directory/slurm.conf`, and `directory/inventory.yaml` is a dayzero inventory of the cluster
whose `slurm.setup` line exports SLURM_CONF. `stop` cancels every job, then ends every daemon and
every `slurmstepd` they left, and returns only when all of them are gone.

Differences from the reference configuration (shared/reference/slurm.md), each needed here:
ClusterName (slurmctld 22.05 refuses to start without it); slurmctld's pid and log files in the
directory (the defaults are /run and /var/log, shared by every cluster on the machine); a private
munge socket (`AuthInfo=socket=...`) instead of /run/munge, so two testbeds never share a key; the
controller's address in `SlurmctldHost=host(127.0.0.1)` (no DNS needed); fake GPU devices as
symlinks to /dev/null (a character device, so slurmd accepts them; mknod would need root).

Stdlib only, like devlab.testbed: `tools/testbed slurm` must work before any virtualenv exists.
"""

from __future__ import annotations

import argparse
import getpass
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from devlab.testbed import _CHILDREN, TestbedError, _read, _signal, _stat_fields, _wait_gone, engine_defaults

PROGRAMS = ("munged", "mungekey", "slurmctld", "slurmd", "sinfo", "squeue", "scancel")
INSTALL_HINT = (
    "Slurm and munge are not installed: apt-get install -y --no-install-recommends slurm-wlm munge"
    " (tools/setup does it)"
)
SBIN = ("/usr/sbin", "/sbin")  # where the daemons live, often not on a user's PATH
STATE_FILE = "slurm.json"
PARTITION = "debug"
GRES_TYPE = "h200"
GPUS_PER_NODE = 2


@dataclass(frozen=True)
class Daemon:
    """One daemon of the cluster: its name, the argv that identifies it, and its log."""

    name: str
    argv: tuple[str, ...]
    log: Path


@dataclass(frozen=True)
class SlurmBed:
    """A Slurm cluster in `directory`; `stop()` (or leaving the `with` block) ends it."""

    __test__ = False

    directory: Path
    nodes: tuple[str, ...]

    @property
    def config(self) -> Path:
        return self.directory / "slurm.conf"

    @property
    def inventory(self) -> Path:
        return self.directory / "inventory.yaml"

    @property
    def munge_socket(self) -> Path:
        """In a short directory of its own under /tmp: munged wants every directory above its
        socket searchable by all (pytest's tmp_path is 0700) and a socket path fits in 108 bytes."""
        digest = hashlib.sha1(str(self.directory).encode()).hexdigest()[:12]
        return Path(tempfile.gettempdir()) / f"dayzero-munge-{digest}" / "munge.socket"

    @property
    def env(self) -> dict[str, str]:
        """What a Slurm client command needs to talk to this cluster."""
        return {**os.environ, "SLURM_CONF": str(self.config)}

    def daemons(self) -> tuple[Daemon, ...]:
        d, conf = self.directory, str(self.config)
        munge = d / "munge"
        munged = (
            "munged", "-F", f"--socket={self.munge_socket}", f"--key-file={munge / 'private' / 'munge.key'}",
            f"--pid-file={self.munge_socket.parent / 'munged.pid'}", f"--log-file={d / 'log' / 'munged.log'}",
            f"--seed-file={munge / 'private' / 'munged.seed'}",
        )  # fmt: skip
        out = [Daemon("munged", munged, d / "log" / "munged.out")]
        log = d / "log"
        out.append(Daemon("slurmctld", ("slurmctld", "-D", "-i", "-f", conf), log / "slurmctld.out"))
        out += [Daemon(n, ("slurmd", "-D", "-N", n, "-f", conf), log / f"slurmd-{n}.out") for n in self.nodes]
        return tuple(out)

    def pids(self) -> dict[str, int | None]:
        """Each daemon's pid, found by its exact argv (no pid files: a pid may be reused)."""
        wanted = {"\0".join(dm.argv[1:]): dm.name for dm in self.daemons()}
        found: dict[str, int | None] = {dm.name: None for dm in self.daemons()}
        for pid in _all_pids():
            fields = _stat_fields(pid)
            if not fields or fields[0] in ("Z", "X"):
                continue
            argv = _read(f"/proc/{pid}/cmdline").rstrip("\0").split("\0")
            name = wanted.get("\0".join(argv[1:]))
            if name is not None and os.path.basename(argv[0]) == _program(name):
                found[name] = pid
        return found

    def stepds(self) -> list[int]:
        """`slurmstepd` processes of this cluster (they detach from slurmd, so no parent links
        them): the ones holding a file under the directory open (their node's log or spool)."""
        out = []
        for pid in _all_pids():
            if _read(f"/proc/{pid}/comm").strip() == "slurmstepd" and _holds_file_under(pid, self.directory):
                out.append(pid)
        return out

    def sinfo(self) -> dict[str, str]:
        """node -> state (idle, alloc, down...), or {} when the controller does not answer."""
        result = _client(self, ["sinfo", "-h", "-N", "-o", "%N %t"], timeout=10)
        if result is None or result.returncode != 0:
            return {}
        return dict(line.split()[:2] for line in result.stdout.splitlines() if len(line.split()) >= 2)

    def jobs(self) -> list[str]:
        result = _client(self, ["squeue", "-h", "-o", "%i"], timeout=10)
        return result.stdout.split() if result is not None and result.returncode == 0 else []

    def kill(self, name: str) -> None:
        """SIGKILL one daemon (fault tests: the controller dies mid-cell)."""
        pid = self.pids().get(name)
        if pid is None:
            raise TestbedError(f"{name} is not running")
        _signal(pid, 9)
        if _wait_gone([pid], 10.0):
            raise TestbedError(f"{name} ({pid}) survived SIGKILL")

    def restart(self, name: str, timeout: float = 30.0) -> None:
        """Start a daemon that died again (its state, jobs included, is read back from the
        state directory); returns when the controller answers again."""
        daemon = next(dm for dm in self.daemons() if dm.name == name)
        env = {**self.env, "PATH": os.pathsep.join([os.environ.get("PATH", ""), *SBIN])}
        proc = _launch(daemon, env)
        _wait(f"{name} back", lambda: bool(self.sinfo()), {name: proc}, self, time.monotonic() + timeout)

    def stop(self, grace: float = 5.0) -> None:
        """Cancel every job and wait for the queue to empty, then TERM the daemons (KILL after
        `grace`) and every slurmstepd left; returns when all of them are gone."""
        pids = self.pids()
        if pids.get("slurmctld") and self.jobs():
            _client(self, ["scancel", "--full", *self.jobs()], timeout=15)
            deadline = time.monotonic() + 15
            while self.jobs() and time.monotonic() < deadline:
                time.sleep(0.2)
        order = [*self.nodes, "slurmctld", "munged"]  # munged last: the others need it to say goodbye
        for name in order:
            pid = pids.get(name)
            if pid is not None:
                _signal(pid, 15)
                if _wait_gone([pid], grace):
                    _signal(pid, 9)
        left = [p for p in pids.values() if p is not None]
        stepds = self.stepds()
        # a job's watchdog on the login host polls squeue until its job ends; with the controller
        # gone it would poll until its own deadline (40 min), named by the bed's files it watches
        watchdogs = [p for p in _all_pids() if p != os.getpid() and _mentions(p, self.directory)]
        for p in stepds + watchdogs:
            _signal(p, 9)
        left = _wait_gone(left + stepds + watchdogs, 10.0)
        if left:
            raise TestbedError(f"processes {left} did not exit")
        shutil.rmtree(self.munge_socket.parent, ignore_errors=True)

    def __enter__(self) -> SlurmBed:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def _program(name: str) -> str:
    return name if name in ("munged", "slurmctld") else "slurmd"


def _all_pids() -> list[int]:
    return [int(e) for e in os.listdir("/proc") if e.isdigit()]


def _mentions(pid: int, directory: Path) -> bool:
    """Does the command line of `pid` name a path under `directory`?"""
    return str(directory) + "/" in _read(f"/proc/{pid}/cmdline")


def _holds_file_under(pid: int, directory: Path) -> bool:
    prefix = str(directory) + "/"
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith(prefix):
                return True
        except OSError:
            continue
    return False


def _client(bed: SlurmBed, argv: list[str], timeout: float) -> subprocess.CompletedProcess | None:
    try:
        return subprocess.run(argv, env=bed.env, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None


# --- files --------------------------------------------------------------------------------------


def free_ports(n: int) -> list[int]:
    """n distinct ports free on 127.0.0.1 now (held open together so none repeats)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def node_address(i: int) -> str:
    return f"127.0.2.{i}"


def slurm_conf(bed: SlurmBed, ports: list[int], user: str) -> str:
    """slurm.conf: the reference's configuration with every path inside the directory."""
    d, host = bed.directory, socket.gethostname().split(".")[0]
    ctld_port, slurmd_port, *node_ports = ports
    lines = [
        "# written by tools/testbed slurm; every path is inside this directory",
        "ClusterName=dayzero",
        f"SlurmctldHost={host}(127.0.0.1)",
        f"SlurmUser={user}",
        f"SlurmdUser={user}",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={bed.munge_socket}",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "MpiDefault=none",
        "ReturnToService=2",
        # One machine, loopback: how long a client tries a dead slurmctld follows MessageTimeout
        # (measured: squeue 18 s at the default 10, 4 s at 3); 5 keeps a loaded machine's RPCs inside.
        "MessageTimeout=5",
        f"SlurmctldPort={ctld_port}",
        f"SlurmdPort={slurmd_port}",
        f"StateSaveLocation={d / 'state'}",
        f"SlurmctldPidFile={d / 'slurmctld.pid'}",
        f"SlurmctldLogFile={d / 'log' / 'slurmctld.log'}",
        f"SlurmdSpoolDir={d / 'spool' / '%n'}",
        f"SlurmdPidFile={d / 'slurmd-%n.pid'}",
        f"SlurmdLogFile={d / 'log' / 'slurmd-%n.log'}",
        "GresTypes=gpu",
    ]
    for i, (node, port) in enumerate(zip(bed.nodes, node_ports, strict=True), start=1):
        # an address of its own per node (127.0.2.i, still this machine): engines of cells on two
        # nodes, or of an SSH/local cell beside them on 127.0.0.1, never share a port
        lines.append(
            f"NodeName={node} NodeHostname={host} NodeAddr={node_address(i)} Port={port} CPUs=2 "
            f"RealMemory=1000 Gres=gpu:{GRES_TYPE}:{GPUS_PER_NODE}"
        )
    nodes = ",".join(bed.nodes)
    lines.append(f"PartitionName={PARTITION} Nodes={nodes} Default=YES State=UP MaxTime=INFINITE")
    return "\n".join(lines) + "\n"


def gres_conf(bed: SlurmBed) -> str:
    lines = []
    for i, node in enumerate(bed.nodes):
        first = i * GPUS_PER_NODE
        devices = f"nvidia[{first}-{first + GPUS_PER_NODE - 1}]"
        lines.append(f"NodeName={node} Name=gpu Type={GRES_TYPE} File={bed.directory / 'dev' / devices}")
    return "\n".join(lines) + "\n"


def inventory_yaml(bed: SlurmBed, engine_setup: str, variables: dict[str, str]) -> str:
    """A dayzero inventory of this cluster: cpu cells on its nodes, the login host is this machine."""
    q = json.dumps  # a JSON string is a valid YAML double-quoted scalar
    lines = [
        f"description: {q(f'tools/testbed slurm: {len(bed.nodes)} slurmd on this machine')}",
        "slurm:",
        "  login: {transport: local}",
        f"  setup: {q(f'export SLURM_CONF={bed.config}')}",
        f"  partition: {PARTITION}",
        '  time_limit: "30:00"',
        f"  max_jobs: {len(bed.nodes)}",
        "  # the nodes' gres (gpu:h200:2) are fake devices: only cpu cells run here",
        "  hardware:",
        "    cpu: {accelerators: 1}",
        f"  workdir: {q(str(bed.directory / 'work'))}",
    ]
    if engine_setup:
        lines.append(f"  engine_setup: {q(engine_setup)}")
    if variables:
        lines.append("  vars:")
        lines += [f"    {q(k)}: {q(v)}" for k, v in sorted(variables.items())]
    return "\n".join(lines) + "\n"


def _prepare(bed: SlurmBed, engine_setup: str, variables: dict[str, str]) -> None:
    d = bed.directory
    for sub in ("state", "log", "dev", "work"):
        (d / sub).mkdir(parents=True, exist_ok=True)
    for node in bed.nodes:
        (d / "spool" / node).mkdir(parents=True, exist_ok=True)
    bed.munge_socket.parent.mkdir(mode=0o755, exist_ok=True)
    bed.munge_socket.unlink(missing_ok=True)  # a stale one would pass for a started munged
    private = d / "munge" / "private"
    private.mkdir(mode=0o700, parents=True, exist_ok=True)
    key = private / "munge.key"
    if not key.exists():
        subprocess.run(["mungekey", "--create", f"--keyfile={key}"], check=True, capture_output=True)
    for i in range(len(bed.nodes) * GPUS_PER_NODE):
        dev = d / "dev" / f"nvidia{i}"
        if not dev.is_symlink():
            dev.symlink_to("/dev/null")
    shutil.rmtree(d / "state", ignore_errors=True)
    (d / "state").mkdir()
    bed.config.write_text(slurm_conf(bed, free_ports(2 + len(bed.nodes)), getpass.getuser()))
    (d / "gres.conf").write_text(gres_conf(bed))  # slurmd reads gres.conf beside slurm.conf
    bed.inventory.write_text(inventory_yaml(bed, engine_setup, variables))
    (d / STATE_FILE).write_text(json.dumps({"nodes": list(bed.nodes)}) + "\n")


def _launch(daemon: Daemon, env: dict[str, str]) -> subprocess.Popen:
    with open(daemon.log, "ab") as log:
        proc = subprocess.Popen(
            [shutil.which(daemon.argv[0], path=env["PATH"]) or daemon.argv[0], *daemon.argv[1:]],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            env=env,
            start_new_session=True,
        )
    _CHILDREN[proc.pid] = proc
    return proc


def _wait(what: str, ready, procs: dict[str, subprocess.Popen], bed: SlurmBed, deadline: float) -> None:
    """Poll `ready()` until true; fail at once, with its log, when a daemon exits."""
    while time.monotonic() < deadline:
        for dm in bed.daemons():
            proc = procs.get(dm.name)
            if proc is not None and proc.poll() is not None:
                raise TestbedError(f"{dm.name} exited {proc.returncode}: {_read(str(dm.log))[-1500:]}")
        if ready():
            return
        time.sleep(0.1)
    raise TestbedError(f"timed out waiting for {what}; logs in {bed.directory / 'log'}")


def check_prerequisites(directory: Path) -> None:
    path = os.pathsep.join([os.environ.get("PATH", ""), *SBIN])
    missing = [p for p in PROGRAMS if shutil.which(p, path=path) is None]
    if missing:
        raise TestbedError(INSTALL_HINT)
    if any(c.isspace() for c in str(directory)):
        raise TestbedError(f"{directory}: slurm.conf cannot hold paths with spaces; choose another directory")


def installed() -> bool:
    try:
        check_prerequisites(Path("/"))
    except TestbedError:
        return False
    return True


def start(
    nodes: int,
    directory: Path,
    *,
    engine_setup: str = "",
    variables: dict[str, str] | None = None,
    timeout: float = 60.0,
) -> SlurmBed:
    """Start munged, slurmctld and `nodes` slurmd; returns when sinfo shows every node idle."""
    if nodes not in (2, 3):
        raise TestbedError("--nodes must be 2 or 3")
    directory = Path(directory).resolve()
    check_prerequisites(directory)
    bed = SlurmBed(directory, tuple(f"n{i}" for i in range(1, nodes + 1)))
    running = [name for name, pid in bed.pids().items() if pid]
    if running:
        raise TestbedError(f"{directory}: already running ({', '.join(running)}); stop it first")
    _prepare(bed, engine_setup, {"threads": "1", **(variables or {})})
    env = {**bed.env, "PATH": os.pathsep.join([os.environ.get("PATH", ""), *SBIN])}
    procs: dict[str, subprocess.Popen] = {}
    deadline = time.monotonic() + timeout
    try:
        munged, ctld, *slurmds = bed.daemons()
        procs["munged"] = _launch(munged, env)
        _wait("munged", bed.munge_socket.exists, procs, bed, deadline)
        procs["slurmctld"] = _launch(ctld, env)
        for dm in slurmds:
            procs[dm.name] = _launch(dm, env)
        want = set(bed.nodes)
        _wait("every node idle in sinfo", lambda: _idle(bed) >= want, procs, bed, deadline)
    except BaseException:
        bed.stop(grace=1.0)
        for proc in procs.values():
            proc.kill()
            proc.wait()
            _CHILDREN.pop(proc.pid, None)
        raise
    return bed


def _idle(bed: SlurmBed) -> set[str]:
    return {node for node, state in bed.sinfo().items() if state == "idle"}


def load(directory: Path) -> SlurmBed:
    """The cluster a previous `start` left in `directory` (for stop/status from another process)."""
    directory = Path(directory).resolve()
    try:
        state = json.loads((directory / STATE_FILE).read_text())
    except (OSError, ValueError) as exc:
        raise TestbedError(f"{directory}: no Slurm testbed here ({exc})") from None
    return SlurmBed(directory, tuple(state["nodes"]))


# --- command line ---------------------------------------------------------------------------------


def _print_status(bed: SlurmBed) -> bool:
    pids = bed.pids()
    states = bed.sinfo() if pids.get("slurmctld") else {}
    for name, pid in pids.items():
        state = f"  sinfo: {states.get(name, '?')}" if name in bed.nodes and pid else ""
        print(f"{name:10} {'running pid ' + str(pid) if pid else 'stopped'}{state}")
    return all(pids.values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="tools/testbed slurm", description="a real Slurm (munge, slurmctld, slurmd) on this machine"
    )
    sub = parser.add_subparsers(dest="action", required=True)
    p = sub.add_parser("start", help="start munged, slurmctld and N slurmd; write DIR/inventory.yaml")
    p.add_argument("--dir", default="/tmp/dayzero-slurm", help="directory for config, state, logs, inventory")
    p.add_argument("--nodes", type=int, default=2, choices=(2, 3))
    p.add_argument(
        "--engine-setup", default=None, help="engine_setup line (default: the cached llama-server)"
    )
    for name, text in (("stop", "cancel every job, stop every daemon of DIR"), ("status", "show what runs")):
        sub.add_parser(name, help=text).add_argument("--dir", default="/tmp/dayzero-slurm")
    args = parser.parse_args(argv)
    try:
        if args.action == "start":
            setup, variables = engine_defaults()
            began = time.monotonic()
            bed = start(
                args.nodes,
                Path(args.dir),
                engine_setup=args.engine_setup if args.engine_setup is not None else setup,
                variables=variables,
            )
            _print_status(bed)
            print(f"started in {time.monotonic() - began:.1f}s")
            print(f"inventory: {bed.inventory}\nexport SLURM_CONF={bed.config}")
            return 0
        check_prerequisites(Path(args.dir))
        bed = load(Path(args.dir))
        if args.action == "stop":
            bed.stop()
            print(f"stopped Slurm in {bed.directory}")
            return 0
        return 0 if _print_status(bed) else 1
    except TestbedError as exc:
        print(f"testbed slurm: {exc}", file=sys.stderr)
        return 2 if str(exc) == INSTALL_HINT else 1


if __name__ == "__main__":
    sys.exit(main())
