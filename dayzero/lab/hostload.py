"""Is the host idle, or is another job eating the cores a cell measures on?

A floor missed on a host another job keeps busy says nothing about the product: the foreign
load is sampled during every phase and a floor missed while the host was contended is a lab
fault ("host contended: ..."). Foreign means not the cell's own: its engine's process groups,
the harness client (its command line carries `CLIENT_MARK`), processes the transport marks as its
own (`Transport.own_marks`: a Slurm job's step daemons) and their children, and the sampler
itself are left out; anything else that burns CPU counts, another cell's engine included, even
one that shares the host's accelerators in another lease (its cores are this cell's too).

The sampler is stdlib Python run by the host's python (like the client): it reads every
process's CPU ticks from /proc twice, `interval` seconds apart, and prints one JSON line. It
also ends, printing nothing, as soon as its stop file appears: the phase it watches has ended,
and waiting out the interval held the end of every phase for a second on average.
The bound is a share of the host's cores (`Host.max_foreign_load`; 0 turns the check off).
On accelerator hosts the vendor tool's compute process list says whether another job holds
an accelerator (`compute_processes`, the device tool's list, checked by preflight): of a leased
share, only the processes on its own accelerators.
"""

from __future__ import annotations

import contextlib
import json
import threading
import uuid
from collections.abc import Collection, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

from dayzero import devices
from dayzero.devices import DeviceTool
from dayzero.devices.base import once
from dayzero.errors import CommandTimeout, InfrastructureError
from dayzero.lab.transport import Transport
from dayzero.spec.shell import quote

CLIENT_MARK = "dayzero-client"  # in the client's `python -c` source (dayzero.lab.deploy.BOOT)

SAMPLER = r"""
import json, os, sys, time
interval, groups, stop, *marks = sys.argv[1:]
interval, ours = float(interval), {int(g) for g in groups.split(",") if g}
def procs():
    out = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                rest = f.read().rpartition(")")[2].split()
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        comm = cmd.split(" ")[0].rsplit("/", 1)[-1] if cmd else "[kernel]"
        out[int(pid)] = (int(rest[1]), int(rest[2]), int(rest[11]) + int(rest[12]), rest[0], comm, cmd)
    return out
def excluded(table):
    mine, pid = set(), os.getpid()
    while pid > 1 and pid in table:
        mine.add(pid)
        pid = table[pid][0]
    roots = {p for p, v in table.items() if v[1] in ours or any(m in v[5] for m in marks)}
    for p in table:
        q, seen = p, 0
        while q > 1 and q in table and seen < 64:
            if q in roots:
                mine.add(p)
                break
            q, seen = table[q][0], seen + 1
    return mine
a = procs()
end = time.monotonic() + interval
while time.monotonic() < end:
    if stop and os.path.exists(stop):
        sys.exit(0)
    time.sleep(min(0.1, max(end - time.monotonic(), 0)))
b = procs()
skip = excluded(b) | excluded(a)
tick = os.sysconf("SC_CLK_TCK")
foreign = sorted(
    ((b[p][2] - a[p][2]) / tick / interval, p, b[p][4])
    for p in b if p in a and p not in skip and b[p][2] > a[p][2]
)[::-1]
print(json.dumps({
    "cores": os.cpu_count(), "load1": os.getloadavg()[0], "interval": interval,
    "foreign": round(sum(f[0] for f in foreign), 3),
    "top": [[p, c, round(f, 3)] for f, p, c in foreign[:5]],
    "runnable": sum(1 for p in b if p not in skip and b[p][3] == "R"),
}))
"""


@dataclass(frozen=True)
class HostLoad:
    """One sample: the host's cores, its 1-minute load average, the CPU (in cores) that foreign
    processes burned over the interval, the biggest of them (pid, name, cores), and how many
    foreign processes were runnable at its end."""

    cores: int
    load1: float
    foreign: float
    top: tuple[tuple[int, str, float], ...] = ()
    runnable: int = 0

    @classmethod
    def parse(cls, output: str) -> HostLoad:
        data = json.loads(output.strip().splitlines()[-1])
        top = tuple((int(p), str(c), float(f)) for p, c, f in data.get("top", []))
        cores, load1, foreign = int(data["cores"]), float(data["load1"]), float(data["foreign"])
        return cls(cores, load1, foreign, top, int(data.get("runnable", 0)))

    def to_json(self) -> dict:
        top = [list(t) for t in self.top]
        return {
            "cores": self.cores,
            "load1": self.load1,
            "foreign": self.foreign,
            "top": top,
            "runnable": self.runnable,
        }


def sample_command(
    python: str, ours: Iterable[int], interval: float, stop: str = "", marks: Iterable[str] = ()
) -> str:
    """The shell that samples a host's foreign load over `interval` seconds (`SAMPLER`), cut
    short, with no sample, once the file `stop` exists; processes whose command line holds one of
    `marks` (or the client's) are the cell's own, with their children."""
    groups = ",".join(str(int(g)) for g in ours)
    own = " ".join(quote(m) for m in (CLIENT_MARK, *marks))
    return f"{python} -c {quote(SAMPLER)} {interval:g} {quote(groups)} {quote(stop)} {own}"


def sample(
    transport: Transport, ours: Iterable[int] = (), interval: float = 2.0, stop: str = ""
) -> HostLoad | None:
    """One sample on the host; None when it could not be taken (a lost sample is no verdict)."""
    command = sample_command(transport.host.python, ours, interval, stop, transport.own_marks)
    try:
        result = transport.run(command, timeout=interval + 30)
        return HostLoad.parse(result.stdout) if result.ok else None
    except (InfrastructureError, CommandTimeout, ValueError, KeyError, IndexError):
        return None


def contention(samples: Iterable[HostLoad], max_share: float) -> str:
    """'' when the host was idle enough, else what was seen ("host contended: load X on N cores,
    foreign processes ..."). The mean foreign load over the samples is held against `max_share`
    of the cores; 0 turns the check off."""
    samples = list(samples)
    if max_share <= 0 or not samples:
        return ""
    cores = samples[-1].cores
    mean = sum(s.foreign for s in samples) / len(samples)
    if mean <= max_share * cores:
        return ""
    busiest: dict[str, float] = {}  # name -> the most its processes used together in one sample
    for s in samples:
        used: dict[str, float] = {}
        for _, name, cores_used in s.top:
            used[name] = used.get(name, 0.0) + cores_used
        for name, u in used.items():
            busiest[name] = max(busiest.get(name, 0.0), u)
    top = sorted(((n, u) for n, u in busiest.items() if u >= 0.05), key=lambda x: -x[1])[:4]
    names = ", ".join(f"{n} ({u:.1f} cores)" for n, u in top)
    load = max(s.load1 for s in samples)
    return (
        f"host contended: load {load:.1f} on {cores} cores, foreign processes used {mean:.2f} cores "
        f"on average (bound {max_share:g} x {cores}): {names or 'unnamed'}"
    )


@contextmanager
def watching(transport: Transport, ours: Iterable[int], interval: float = 2.0) -> Iterator[list[HostLoad]]:
    """Samples of the host's foreign load, taken one after another in a thread while the block
    runs; the list fills as they come. Nothing runs on the host once the block has ended."""
    samples: list[HostLoad] = []
    stop = threading.Event()
    groups = tuple(ours)
    stop_file = f"/tmp/dayzero-hostload-{uuid.uuid4().hex}"  # the host's: the sampler ends on it

    def loop() -> None:
        while not stop.is_set():
            if (s := sample(transport, groups, interval, stop_file)) is not None and not stop.is_set():
                samples.append(s)
            elif s is None:
                stop.wait(interval)

    thread = threading.Thread(target=loop, name=f"hostload-{transport.host.name}", daemon=True)
    thread.start()
    try:
        yield samples
    finally:
        stop.set()
        _run_quietly(transport, f"touch {quote(stop_file)}")
        thread.join(interval + 35)
        _run_quietly(transport, f"rm -f {quote(stop_file)}")


def _run_quietly(transport: Transport, command: str) -> None:
    """A bookkeeping command whose failure changes nothing (the sampler then ends by its interval)."""
    with contextlib.suppress(InfrastructureError, CommandTimeout):
        transport.run(command, timeout=15)


@contextmanager
def watching_hosts(
    transports: Mapping[str, Transport], ours: Mapping[str, Iterable[int]], interval: float = 2.0
) -> Iterator[dict[str, list[HostLoad]]]:
    """`watching` every host at once: host name -> its samples."""
    with contextlib.ExitStack() as stack:
        yield {
            name: stack.enter_context(watching(t, ours.get(name, ()), interval))
            for name, t in transports.items()
        }


def parse_compute_processes(tool: str, output: str) -> list[tuple[int, str]]:
    """(pid, name) of every compute process on the host's accelerators, from the device tool's
    process list (`devices`). Pure."""
    return devices.get(tool).parse_processes(output)


def compute_processes(
    transport: Transport, device: DeviceTool | str, on: Collection[int] = ()
) -> list[tuple[int, str]]:
    """The compute processes on the host's accelerators now, or only on those of `on` (a lease's
    share: a neighbour cell's engine on its own accelerators is no other job's), with those the
    tool does not place; a list that cannot be read is none (the memory check still holds)."""
    device = devices.get(device) if isinstance(device, str) else device
    if device.process_query is None:
        return []
    try:
        result = transport.run(device.process_query, timeout=30)
    except CommandTimeout:
        return []
    try:
        rows = device.parse_device_processes(result.stdout) if result.ok else []
    except (ValueError, KeyError, AttributeError, TypeError):
        return []
    return once((pid, name) for pid, name, index in rows if not on or index is None or index in on)
