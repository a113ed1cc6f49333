"""Bounds on every physical figure a vendor states (issue 42, item 4).

A bundle states figures no account recomputes: each host's measured memory bandwidth, memory,
disk, CPUs and accelerators seen (its preflight facts), the engine's readiness time, the warm-up's
and each phase's durations and the client's CPU time. Each is held to a bound from the hardware
catalogue (`matrix/hardware.yaml`: memory per accelerator, accelerators per node, published
bandwidth) or from physics, and the finding names the bound (`physics.figure`), so an absurd
figure (a 2-core host copying at 50 TB/s, a negative duration) is refused rather than believed.
The bounds are generous by construction: they refuse the impossible, not the unusual.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from dayzero.run.records import is_records_file
from dayzero.spec.matrix import Hardware
from dayzero.submission.bundle import Reference, Subject
from dayzero.submission.findings import Finding, short
from dayzero.submission.timeline import when

REQUIREMENT = "physics.figure"
# No cpu host copies memory faster than two sockets of 12 DDR5-8800 channels (1.7 TB/s), HBM CPUs
# included (Xeon Max: ~1 TB/s a socket).
CPU_BANDWIDTH_GBS = 2000.0
HOST_MEMORY_GB = 32768.0  # the largest single-image servers (32 TB)
HOST_DISK_GB = 1e6  # a petabyte free on one host
NR_CPUS = 8192  # the most CPUs a Linux kernel addresses (x86_64's CONFIG_NR_CPUS maximum)
SPAN_TOLERANCE_S = 2.0  # the run's window is stated to the second


def _number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def bound(label: str, value, low: float, high: float) -> str:
    """'' when `value` is a finite number in [low, high] (or not stated: schema and the checks
    that need it say so); else what was found (the caller names the bound)."""
    if value is None:
        return ""
    if not _number(value) or not low <= value <= high:
        return f"{label} {short(value, 40)}"
    return ""


def host_bounds(hw: Hardware, host: dict) -> Iterator[tuple[str, str]]:
    """(found, expected) for each figure of one host's facts outside its bound."""
    facts = host.get("facts") if isinstance(host.get("facts"), dict) else {}
    stated = host.get("accelerators")
    count = max(stated, 1) if _number(stated) else 1  # a count provenance holds to the kind's
    label = f"host {short(host.get('name'), 60)}:"
    if hw.measured:
        high, why = (
            CPU_BANDWIDTH_GBS,
            f"no cpu host copies faster ({CPU_BANDWIDTH_GBS:g} GB/s: two 12-channel DDR5-8800 sockets)",
        )
    elif hw.peak is not None and hw.peak.memory_bandwidth_gbs:
        high = hw.peak.memory_bandwidth_gbs * count * hw.peak.margin
        why = (
            f"{hw.peak.margin:g}x {hw.peak.memory_bandwidth_gbs:g} GB/s x {count} accelerators"
            f" ({hw.name}'s published peak)"
        )
    else:
        high, why = math.inf, ""
    if found := bound(f"{label} memory_bandwidth_gbs", facts.get("memory_bandwidth_gbs"), 1e-9, high):
        yield found, f"more than 0 and at most {high:g} GB/s: {why}" if why else "more than 0 GB/s"
    if hw.capacity_mib:
        mem_high = hw.capacity_mib / 1024 * count
        mem_why = f"{count} x {hw.capacity_mib:g} MiB, {hw.name}'s memory as its device tool reports it"
    elif hw.memory_gb:
        mem_high, mem_why = (
            hw.memory_gb * count,
            f"{count} x {hw.memory_gb:g} GB, {hw.name}'s memory (catalogue)",
        )
    else:
        mem_high, mem_why = HOST_MEMORY_GB, f"{HOST_MEMORY_GB:g} GB, the largest single-image servers"
    total = facts.get("memory_total_gb")
    if found := bound(f"{label} memory_total_gb", total, 0, mem_high):
        yield found, f"0 to {mem_high:g} GB: {mem_why}"
    free_high = total if _number(total) else mem_high
    if found := bound(f"{label} memory_free_gb", facts.get("memory_free_gb"), 0, free_high):
        yield found, f"0 to {free_high:g} GB: never more free than the memory_total_gb stated"
    if found := bound(f"{label} disk_free_gb", facts.get("disk_free_gb"), 0, HOST_DISK_GB):
        yield found, f"0 to {HOST_DISK_GB:g} GB free on one host"
    if found := bound(f"{label} cpus", facts.get("cpus"), 1, NR_CPUS):
        yield found, f"1 to {NR_CPUS}: the most CPUs a Linux kernel addresses"
    per_node = hw.accelerators_per_node
    if per_node and (
        found := bound(f"{label} accelerators_seen", facts.get("accelerators_seen"), 0, per_node)
    ):
        yield found, f"0 to {per_node}: {hw.name}'s accelerators per node (catalogue)"


def duration_bounds(doc: dict) -> Iterator[tuple[str, str]]:
    """The engine's readiness: no negative time, and within the deadline it was given."""
    ready = doc.get("readiness") if isinstance(doc.get("readiness"), dict) else {}
    deadline = ready.get("deadline_s")
    if _number(deadline) and (found := bound("readiness.ready_s", ready.get("ready_s"), 0, deadline)):
        yield found, f"0 to {deadline:g} s: the readiness deadline_s it was given"


def phase_bounds(answer: dict, window_s: float | None) -> Iterator[tuple[str, str]]:
    """A phase's span within the run's window, its warm-up's times not negative and its first token
    within its end-to-end time, and the client's CPU time within its cores times its wall time."""
    start, end = answer.get("start"), answer.get("end")
    if window_s is not None and _number(start) and _number(end):
        high = window_s + SPAN_TOLERANCE_S
        if found := bound("the phase's span (end - start)", end - start, 0, high):
            yield found + " s", f"0 to {high:g} s: within the run's window (run.started to run.finished)"
    warm = answer.get("warmup") if isinstance(answer.get("warmup"), dict) else {}
    for key in ("wall_s", "e2e_s"):
        if found := bound(f"warmup.{key}", warm.get(key), 0, math.inf):
            yield found, "0 s or more: a duration"
    if _number(warm.get("e2e_s")) and (
        found := bound("warmup.ttft_s", warm.get("ttft_s"), 0, warm["e2e_s"] + 1e-3)
    ):
        yield found, f"0 to {warm['e2e_s']:g} s: a first token within its requests' end-to-end time"
    client = answer.get("client") if isinstance(answer.get("client"), dict) else {}
    cores = client.get("cpu_count")
    if _number(cores) and _number(start) and _number(end) and end >= start:
        high = cores * (end - start) + 1.0
        if found := bound("client_cpu_s", answer.get("client_cpu_s"), 0, high):
            yield found, f"0 to {high:.1f} s: {cores:g} client cores for the phase's {end - start:.1f} s"


def _window_s(doc: dict) -> float | None:
    run = doc.get("run") if isinstance(doc.get("run"), dict) else {}
    started, finished = when(run.get("started")), when(run.get("finished"))
    return finished - started if started is not None and finished is not None else None


def check_figures(s: Subject, ref: Reference) -> list[Finding]:
    out = []
    for name, doc in sorted(s.evidence.items()):
        kind = doc.get("hardware")
        hw = ref.matrix.hardware.get(kind) if isinstance(kind, str) else None
        if hw is not None:
            for host in doc.get("hosts") or []:
                if isinstance(host, dict):
                    out += [Finding(name, REQUIREMENT, f, e) for f, e in host_bounds(hw, host)]
        window = _window_s(doc)
        out += [Finding(name, REQUIREMENT, f, e) for f, e in duration_bounds(doc)]
        for rel in doc.get("records") or []:
            if is_records_file(rel) and isinstance(s.records.get(rel), dict):
                out += [Finding(rel, REQUIREMENT, f, e) for f, e in phase_bounds(s.records[rel], window)]
    return out


CHECKS = (check_figures,)
