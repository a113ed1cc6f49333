"""Preflight: is this host fit to run a cell right now? (LAVA's health-check idea.)

Counts accelerators and free memory with the kind's device tool (`dayzero.devices`), reads the
accelerator driver's version with the same tool (evidence keeps it), checks free disk in the
workdir, that the card's model files are there (`dayzero.lab.weights`: size, and checksum where
the card knows one) and that the engine answers its version command: on a host that runs its engines in a
container (`container: docker|podman`), inside the cell's image (`engine_check`), keeping the
image's resolved id and digests. A cell's lease of a share of the accelerators is judged on
those alone (free memory, compute processes): a neighbour cell's engine holds its own. A host
that fails is quarantined for the rest of the run and the cell is reported as infrastructure,
not product.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from dayzero import devices
from dayzero.devices import DeviceTool, cpu
from dayzero.errors import CommandTimeout, InfrastructureError
from dayzero.lab import hostload, presence, weights
from dayzero.lab.presence import RoleCheck
from dayzero.lab.transport import Transport
from dayzero.loadgen.client import parse_machine
from dayzero.redact import redact
from dayzero.spec import container
from dayzero.spec.card import ModelFile
from dayzero.spec.inventory import Host
from dayzero.spec.matrix import Hardware
from dayzero.spec.shell import quote

MIN_DISK_GB = 2.0
MIN_FREE_MEMORY_SHARE = 0.9  # accelerator memory another job holds would skew every number

# The memory bandwidth of a host whose accelerator is its own CPU (the roofline's figure for a
# kind that publishes none): the best of five copies of 128 MiB, more than any model weights a
# cache could hold, counted as STREAM counts a copy (bytes read + bytes written), GB/s. Stdlib
# Python (every host runs the stdlib client), about a quarter of a second.
BANDWIDTH_PROBE = """python3 - <<'EOF'
import time
n = 128 << 20
a = bytearray(b"\\1") * n
b = bytearray(n)
b[:] = a
best = float("inf")
for _ in range(5):
    t = time.perf_counter()
    b[:] = a
    best = min(best, time.perf_counter() - t)
print(round(2 * n / best / 1e9, 2))
EOF"""
# `uname -m`, then the first CPU's model and flags (dayzero.loadgen.client.parse_machine)
MACHINE_QUERY = "uname -m && grep -m3 -E '^(model name|flags|Features|CPU part)' /proc/cpuinfo"
NO_DRIVER = cpu.NO_DRIVER  # a cpu host (device tool `nproc`) has no accelerator driver
UNKNOWN = "unknown"


@dataclass(frozen=True)
class HostFacts:
    host: str
    reachable: bool
    accelerators_seen: int | None = None
    memory_total_gb: float | None = None
    memory_free_gb: float | None = None
    disk_free_gb: float | None = None
    cpus: int | None = None
    engine_versions: dict[str, str] = field(default_factory=dict)
    problems: tuple[str, ...] = ()
    driver_version: str | None = None
    foreign_load: dict | None = None  # a `hostload.HostLoad` sample taken at preflight, if it could be
    image: dict | None = None  # container hosts: the image the engine was checked in (ImageFacts)
    memory_bandwidth_gbs: float | None = None  # measured where the kind publishes none (cpu)
    model_files: tuple[dict, ...] = ()  # the card's files as read on the host (`weights.facts`)
    # architecture, CPU model, kernel-relevant instruction sets: which near-ties its kernels turn
    machine: dict | None = None

    @property
    def healthy(self) -> bool:
        return self.reachable and not self.problems


def parse_device_memory(tool: str, output: str) -> list[tuple[float | None, float | None]]:
    """(total MiB, free MiB) per accelerator from a device tool's output (`devices`). Pure."""
    return devices.get(tool).parse_memory(output)


def _run(transport: Transport, command: str, timeout: float = 60) -> tuple[bool, str]:
    try:
        result = transport.run(command, timeout=timeout)
    except CommandTimeout:
        return False, f"timed out after {timeout:.0f}s"
    return result.ok, (result.stdout if result.ok else (result.stderr or result.stdout)).strip()


def parse_bandwidth(output: str) -> float | None:
    """The probe's GB/s; None for anything but one positive finite number."""
    try:
        value = float(output.strip())
    except ValueError:
        return None
    return value if math.isfinite(value) and value > 0 else None


def memory_bandwidth(transport: Transport) -> float | None:
    """The host's measured memory bandwidth; one that could not be read is None, never a problem."""
    ok, out = _run(transport, BANDWIDTH_PROBE, 60)
    return parse_bandwidth(out) if ok else None


def driver_version(transport: Transport, device: DeviceTool) -> str:
    """The accelerator driver's version as the device tool reports it; a fact we could not read
    is `unknown`, never a problem (the host may still serve)."""
    if device.no_driver:
        return device.no_driver
    if device.driver_query is None:
        return UNKNOWN
    query = f"set -o pipefail; {device.driver_query}"  # a failing tool's message is no version
    ok, out = _run(transport, query, 30)
    return (" ".join(out.split())[:200] or UNKNOWN) if ok else UNKNOWN


def accelerators(
    transport: Transport, device: DeviceTool, host: Host, share: Sequence[int] = ()
) -> tuple[int | None, float | None, float | None, list[str]]:
    """(accelerators seen, total GB, free GB, problems) as the kind's device tool reports them.
    The figures are the host's; where the cell's lease claimed a `share` (indices: the tool's
    rows in its own order), free memory is judged on those accelerators alone: a neighbour
    cell's engine fills its own."""
    if device.refusal or device.memory_query is None:
        return None, None, None, [f"device tool `{device.name}`: {device.refusal or 'reads no accelerators'}"]
    ok, out = _run(transport, device.memory_query)
    if not ok:
        return None, None, None, [f"device tool `{device.name}` failed: {out[-200:]}"]
    try:
        rows = device.parse_memory(out)
    except (ValueError, KeyError, AttributeError, TypeError) as exc:
        return None, None, None, [f"could not read `{device.name}` output: {exc}"]
    if not rows:
        return None, None, None, []
    seen = 1 if device.is_host else len(rows)
    total, free = _gb(rows)
    problems = []
    if device.is_host:
        if free is not None and free < 1.0:
            problems.append(f"only {free} GB of memory available")
        return seen, total, free, problems
    if seen < host.accelerators:
        problems.append(f"{device.name} sees {seen} accelerator(s), inventory says {host.accelerators}")
    if missing := [j for j in share if not 0 <= j < len(rows)]:
        problems.append(f"{device.name} sees no accelerator {_indices(missing)}, which the lease claimed")
        return seen, total, free, problems
    mine, on = (
        (_gb([rows[j] for j in share]), f" on leased accelerators {_indices(share)}")
        if share
        else ((total, free), "")
    )
    if mine[0] and mine[1] is not None and mine[1] / mine[0] < MIN_FREE_MEMORY_SHARE:
        problems.append(f"accelerator memory busy{on}: {mine[1]} of {mine[0]} GB free")
    return seen, total, free, problems


def _gb(rows: Sequence[tuple[float | None, float | None]]) -> tuple[float | None, float | None]:
    """(total, free) GB of these accelerators' rows (MiB); None where a row does not say."""
    if not all(t is not None and f is not None for t, f in rows):
        return None, None
    return round(sum(r[0] or 0 for r in rows) / 1024, 1), round(sum(r[1] or 0 for r in rows) / 1024, 1)


def _indices(share: Sequence[int]) -> str:
    return ",".join(str(j) for j in share)


def leased_share(host: Host, devices: Sequence[int]) -> tuple[int, ...]:
    """The accelerators a lease claimed when they are a share of the host's; () where it took
    every one (or none): preflight then judges the whole host, as before leases had indices."""
    return tuple(devices) if devices and len(devices) < (host.accelerators or 0) else ()


def engine_check(host: Host, command: str, image: str | None) -> str:
    """The shell that runs an engine's version command as a launch on `host` will meet it: after
    the host's `engine_setup`, on the host itself or, on a container host, inside `image`."""
    setup = f"{host.engine_setup}\n" if host.engine_setup else ""
    if host.container in container.RUNTIMES:
        return f"{setup}{container.version_check(host.container, image or '', command)} 2>&1"
    return f"{setup}{command} 2>&1"


def role_check(host: Host, check: RoleCheck, image: str | None) -> str:
    """`presence.check_command`, inside `image` on a container host (its roles run there)."""
    if host.container in container.RUNTIMES:
        setup = f"{host.engine_setup}\n" if host.engine_setup else ""
        return f"{setup}{container.inside(host.container, image or '', check.shell)}"
    return presence.check_command(host, check)


def gather(
    transport: Transport,
    hardware: Hardware,
    engines: dict[str, str],
    secrets=(),
    roles: Sequence[RoleCheck] = (),
    image: str | None = None,
    model_files: Sequence[ModelFile] = (),
    bandwidth: float | None = None,
    leased: Sequence[int] = (),
) -> HostFacts:
    """Collect facts and judge them against the inventory's claims; never raises for a bad host.
    `leased`: the accelerators the cell's lease claimed; where they are a share of the host's,
    its free memory and compute processes are judged on those alone (`leased_share`).
    On a kind whose bandwidth is measured (`Hardware.measured`), the host's is measured here
    unless `bandwidth` (measured before on this host) is given.
    Every role's program must run after the host's engine_setup (`dayzero.lab.presence`) before
    the engine's version command is trusted: a version command that ends in a pipe exits 0 with
    `not found` as its output. On a container host both run inside the cell's `image`."""
    host = transport.host
    problems: list[str] = []
    try:
        ok, cpus = _run(transport, "nproc", 30)
    except InfrastructureError as exc:
        return HostFacts(host.name, False, problems=(f"unreachable: {exc}",))
    ok, out = _run(transport, MACHINE_QUERY, 30)
    machine = parse_machine(out.split("\n", 1)[0], out.partition("\n")[2]) if ok else None
    device = devices.get(hardware.device_query)
    share = leased_share(host, leased)
    seen, total, free, found = accelerators(transport, device, host, share)
    problems += found
    problems += busy_accelerators(transport, device, share)
    ok, out = _run(transport, f"mkdir -p {quote(host.workdir)} && df -Pk {quote(host.workdir)} | tail -1")
    disk = None
    if ok and (m := re.search(r"\s(\d+)\s+\d+%", out)):
        disk = round(int(m.group(1)) / 2**20, 1)
        if disk < MIN_DISK_GB:
            problems.append(f"only {disk} GB free in {host.workdir} (need {MIN_DISK_GB})")
    else:
        problems.append(f"workdir {host.workdir} not usable: {out[-200:]}")
    versions, seen_image = {}, None
    boxed = host.container in container.RUNTIMES
    if boxed and not image and (roles or engines):
        problems.append(f"runs engines in {host.container}; the card names no image for {hardware.name}")
    limit = 600 if boxed else 120  # a pull is slow
    checks = () if boxed and not image else roles
    absent = presence.problems(
        ((check, *_run(transport, role_check(host, check, image), limit)) for check in checks), host.name
    )
    problems += [redact(p, secrets) for p in absent]
    for engine, command in ({} if absent or (boxed and not image) else engines).items():
        ok, out = _run(transport, engine_check(host, command, image), limit)
        if boxed:
            found, out = container.parse_version_check(image or "", out)
            seen_image = found.to_json() if found else None
        where = f" in image {image}" if boxed else ""
        if ok and out.strip():
            versions[engine] = " ".join(out.split())[:200]
        else:
            problems.append(f"engine {engine} not usable{where}: `{command}`: {redact(out[-200:], secrets)}")
    files: tuple[dict, ...] = ()
    if model_files:  # the card's weights, under this host's {model_root}
        wanted = weights.resolve(model_files, host.var)
        ok, out = _run(transport, weights.check_command(wanted), 600)  # a GGUF's sha256 takes a while
        problems += [f"{p} on {host.name}" for p in weights.problems(wanted, out if ok else "")]
        files = weights.facts(wanted, out if ok else "")
        if shard_check := weights.shard_command(wanted, host.python):
            ok, out = _run(transport, shard_check, weights.SHARD_TIMEOUT_S)  # hashed once, then read
            problems += [f"{p} on {host.name}" for p in weights.shard_problems(wanted, out if ok else "")]
            read = weights.shard_facts(wanted, out if ok else "")
            files = tuple({**f, **read.get(i, {})} for i, f in enumerate(files))
    ncpu = int(cpus) if cpus.isdigit() else None
    driver = driver_version(transport, device)
    # the contention check off (`max_foreign_load: 0`), its sample would only cost a second a cell
    load = hostload.sample(transport, interval=1.0) if host.max_foreign_load > 0 else None
    if hardware.measured and bandwidth is None:
        bandwidth = memory_bandwidth(transport)
    return HostFacts(
        host.name,
        True,
        seen,
        total,
        free,
        disk,
        ncpu,
        versions,
        tuple(problems),
        driver,
        load.to_json() if load else None,
        seen_image,
        bandwidth if hardware.measured else None,
        files,
        machine,
    )


def busy_accelerators(transport: Transport, device: DeviceTool | str, share: Sequence[int] = ()) -> list[str]:
    """Another job's compute processes on the host's accelerators, or on the lease's `share`
    of them (`hostload.compute_processes`; nothing of the cell runs yet): every number measured
    beside them would be skewed."""
    found = hostload.compute_processes(transport, device, share)
    if not found:
        return []
    named = ", ".join(f"{name or '?'} (pid {pid})" for pid, name in found[:5])
    on = f" on leased accelerators {_indices(share)}" if share else ""
    return [f"accelerators busy{on}: {len(found)} foreign compute process(es): {named}"]
