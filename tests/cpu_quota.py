"""Half the machine's CPU time for the engines a test launches (issue 41's slowdown test).

A cgroup whose CPU quota is half the host's cores, joined by the launch's own shell (the
inventory's `engine_setup` runs in it before the engine's command), so the engine keeps every
thread the card gives it and runs at most half the time: a 2x slowdown of a CPU-bound engine.
Half its threads is not one: llama.cpp with one thread of two measured 38.6 tok/s against a quiet
68.7 on the 2-core AMD EPYC (memory-bound decode does not halve). cgroup v2 (`cpu.max`) or v1
(`cpu.cfs_quota_us`), whichever the host mounts; where neither can be written, the launch's shell
pins itself to half the cores (`taskset`: every thread on half the cores, a slowdown of 2x or
more); None where that is missing too.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from dayzero.spec.shell import quote

V2 = Path("/sys/fs/cgroup")
V1 = Path("/sys/fs/cgroup/cpu")


@dataclass(frozen=True)
class CpuQuota:
    group: Path | None  # the cgroup's folder; None: pinned to the first `cores` cores instead
    cores: float  # the quota, in cores

    def join(self) -> str:
        """The shell line that moves the shell running it, and so everything it starts, in."""
        if self.group is None:
            return f"taskset -p -c 0-{max(int(self.cores), 1) - 1} $$ >/dev/null"
        return f"echo $$ > {quote(str(self.group / 'cgroup.procs'))}"


def _v2_group(name: str, share: float) -> Path:
    controllers = (V2 / "cgroup.subtree_control").read_text().split()
    if "cpu" not in controllers:
        (V2 / "cgroup.subtree_control").write_text("+cpu")
    group = V2 / name
    group.mkdir(exist_ok=True)
    period = 100_000
    (group / "cpu.max").write_text(f"{int(period * share)} {period}")
    return group


def _v1_group(name: str, share: float) -> Path:
    group = V1 / name
    group.mkdir(exist_ok=True)
    period = int((group / "cpu.cfs_period_us").read_text())
    (group / "cpu.cfs_quota_us").write_text(str(int(period * share)))
    return group


@contextlib.contextmanager
def half_the_cpus(name: str = "dayzero-half-cpus") -> Iterator[CpuQuota | None]:
    """A cgroup capped at half of this host's cores for the duration; removed after (its
    processes, if any outlived the run, back in the root group first)."""
    share = (os.cpu_count() or 2) / 2
    try:
        if (V2 / "cgroup.controllers").exists():
            group, root = _v2_group(name, share), V2
        elif (V1 / "cpu.cfs_quota_us").exists():
            group, root = _v1_group(name, share), V1
        else:
            group = None
    except OSError:
        group = None
    if group is None:
        yield CpuQuota(None, share) if shutil.which("taskset") else None
        return
    try:
        yield CpuQuota(group, share)
    finally:
        for _ in range(20):
            with contextlib.suppress(OSError):
                for pid in (group / "cgroup.procs").read_text().split():
                    with contextlib.suppress(OSError):
                        (root / "cgroup.procs").write_text(pid)
                group.rmdir()
                break
            time.sleep(0.5)
