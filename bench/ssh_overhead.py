"""Per-command overhead of SSHTransport versus OpenSSH with ControlMaster, on one testbed host.

Both sides run the same remote line over an already open connection, N times, and we time each
command from the controller: SSHTransport.run() on its pooled paramiko connection, and one `ssh`
process per command multiplexed over a ControlMaster (what Ansible, labgrid and testinfra do).
The host is a dayzero testbed sshd (started here unless --dir names a running one).

  .venv/bin/python bench/ssh_overhead.py [--n 200] [--dir DIR --host lab1]
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tools")]

from dayzero.lab.transport import ssh  # noqa: E402
from dayzero.spec.inventory import load_inventory  # noqa: E402
from devlab import testbed  # noqa: E402


def timed(fn, n: int) -> list[float]:
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def ssh_argv(host, inventory, control_path: str) -> list[str]:
    """OpenSSH with the same host, key and known_hosts as the inventory, and no user config."""
    return [
        "ssh", "-F", "/dev/null", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
        "-i", host.identity, "-o", f"UserKnownHostsFile={inventory.known_hosts}",
        "-o", "StrictHostKeyChecking=yes", "-o", "ControlMaster=auto",
        "-o", f"ControlPath={control_path}", "-o", "ControlPersist=120",
        "-p", str(host.port), f"{host.user}@{host.address}",
    ]  # fmt: skip


def run_ssh(argv: list[str], remote: str) -> None:
    devnull = subprocess.DEVNULL  # stderr carries the pgid line our wrapper writes
    subprocess.run([*argv, remote], check=True, stdin=devnull, stdout=devnull, stderr=devnull)


def summary(name: str, samples: list[float]) -> str:
    q = statistics.quantiles(samples, n=10)
    return (
        f"{name:34} median {statistics.median(samples):6.2f} ms   p10 {q[0]:6.2f}   p90 {q[-1]:6.2f}   "
        f"mean {statistics.fmean(samples):6.2f}   (n={len(samples)})"
    )


def bench(inventory_path: Path, host_name: str, n: int, warmup: int) -> None:
    inventory = load_inventory(inventory_path)
    host = inventory.host(host_name)
    remote = ssh.channel.wrap("true")  # exactly the line SSHTransport sends for run("true")
    transport = ssh.SSHTransport(host, inventory)
    with ExitStack() as stack:
        control_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix="dzcm-"))  # short: socket path
        argv = ssh_argv(host, inventory, f"{control_dir}/cm")
        stack.callback(subprocess.run, [*argv[:-1], "-O", "exit", argv[-1]], capture_output=True)

        first_ours = timed(lambda: transport.run("true", timeout=30), 1)[0]
        first_ssh = timed(lambda: run_ssh(argv, remote), 1)[0]
        timed(lambda: transport.run("true", timeout=30), warmup)
        timed(lambda: run_ssh(argv, remote), warmup)
        ours = timed(lambda: transport.run("true", timeout=30), n)
        theirs = timed(lambda: run_ssh(argv, remote), n)

    print(f"host {host.name} ({host.address}:{host.port}); remote line: {remote}")
    print(
        f"first command incl. handshake: SSHTransport {first_ours:.1f} ms, OpenSSH master {first_ssh:.1f} ms"
    )
    print(summary("SSHTransport.run (pooled)", ours))
    print(summary("OpenSSH ssh + ControlMaster", theirs))
    print(f"ratio of medians ours/openssh: {statistics.median(ours) / statistics.median(theirs):.2f}")
    print("openssh command per sample: " + shlex.join([*argv, remote]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200, help="commands per side")
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--dir", help="a running testbed (tools/testbed start); default: start one here")
    parser.add_argument("--host", default="lab1")
    args = parser.parse_args(argv)
    print(
        "reproduce: .venv/bin/python bench/ssh_overhead.py "
        + shlex.join(sys.argv[1:] if argv is None else argv)
    )
    if args.dir:
        bench(Path(args.dir) / "inventory.yaml", args.host, args.n, args.warmup)
        return 0
    with (
        tempfile.TemporaryDirectory(prefix="dz-bench-") as tmp,
        testbed.start(1, Path(tmp), port=testbed.free_port(1)) as bed,
    ):
        try:
            bench(bed.inventory, args.host, args.n, args.warmup)
        finally:
            ssh.close_all()
    return 0


if __name__ == "__main__":
    sys.exit(main())
