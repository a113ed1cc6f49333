"""Power and energy over a phase from the readings the device tools kept (pure).

A sampler beside a phase keeps each tool's raw output in the phase's records, under the tool's
key (`DeviceTool.record_key`); the tool's own parser (`dayzero.devices`) turns it into watts per
device and joules, so the benchmark card can say joules per output token and watts per
accelerator. The client's host samples itself; every other host of the cell is read in windows
by `lab.power` (`merge_windows`), and a phase's energy counts every host (`from_hosts`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from dayzero import devices
from dayzero.devices import PowerSample, integrate

__all__ = [
    "PowerSample",
    "from_hosts",
    "from_power",
    "host_energy",
    "integrate",
    "merge_windows",
    "per_token",
]


def per_token(joules: Mapping[str, float], output_tokens: int, seconds: float, accelerators: int) -> dict:
    """Joules per output token and mean watts per accelerator over a phase."""
    total = sum(joules.values())
    return {
        "joules": round(total, 3),
        "joules_per_token": round(total / output_tokens, 6) if output_tokens else None,
        "watts_per_accelerator": round(total / seconds / max(accelerators, 1), 3) if seconds > 0 else None,
    }


def host_energy(power: Mapping | None) -> dict:
    """One host's readings over a phase: {source, joules, seconds}, the first tool with readings
    (accelerator tools, then the host's own counters); else {not_measured: why} (the sampler's
    absent tools and errors)."""
    if not power:
        return {"not_measured": "no power sampler ran beside the phase"}
    seconds = float(power.get("t1", 0)) - float(power.get("t0", 0))
    joules, source = {}, ""
    for tool in devices.power_readers():
        if value := power.get(tool.record_key):
            joules, source = tool.joules(value), tool.source or tool.name
        if joules:
            break
    if not joules:
        why = [*(power.get("absent") or ()), *(power.get("errors") or ())]
        return {"not_measured": "; ".join(why) or "no power reading"}
    return {"source": source, "joules": sum(joules.values()), "seconds": seconds}


def from_power(power: Mapping | None, output_tokens: int, accelerators: int) -> dict:
    """A phase's energy from what the host client's sampler kept (`answer["power"]`), one host."""
    got = host_energy(power)
    if "not_measured" in got:
        return got
    return {
        "source": got["source"],
        **per_token({"": got["joules"]}, output_tokens, got["seconds"], accelerators),
    }


def from_hosts(
    power: Mapping[str, Mapping | None], output_tokens: int, seconds: float, accelerators: int
) -> dict:
    """A phase's energy over every host of the cell: each host's mean watts over its readings
    times the phase's `seconds` (the other hosts' windows need not start and end with it).
    Not measured when any host has no reading, naming each such host and why."""
    each = {host: host_energy(p) for host, p in power.items()}
    hosts = {host: e.get("source", "not measured") for host, e in each.items()}
    missing = [f"{host}: {e['not_measured']}" for host, e in each.items() if "not_measured" in e]
    if missing:
        return {"not_measured": "; ".join(missing), "hosts": hosts}
    joules = {
        h: e["joules"] / e["seconds"] * seconds if e["seconds"] > 0 else e["joules"] for h, e in each.items()
    }
    source = ", ".join(dict.fromkeys(e["source"] for e in each.values()))
    return {"source": source, **per_token(joules, output_tokens, seconds, accelerators), "hosts": hosts}


def merge_windows(windows: Sequence[Mapping]) -> dict | None:
    """One host's windows of readings (the client's `power` action, one after another) as one
    phase's: each tool's readings merged by the tool (`DeviceTool.merge_power`: RAPL's counters
    from the first window's start to the last one's end, every line and reading of the others),
    the first window's absent tools, the first errors."""
    if not windows:
        return None
    errors = [e for w in windows for e in w.get("errors") or ()][:5]
    taken = [w for w in windows if "t0" in w]  # a window the host could not take holds errors only
    if not taken:
        return {"t0": 0.0, "t1": 0.0, "absent": [], "errors": errors}
    first, last = taken[0], taken[-1]
    out: dict = {
        "t0": first["t0"],
        "t1": last["t1"],
        "interval": first.get("interval"),
        "absent": list(first.get("absent") or ()),
        "errors": errors,
    }
    for tool in devices.power_readers():
        merged = tool.merge_power([w.get(tool.record_key) for w in taken])
        if merged is not None:
            out[tool.record_key] = merged
    return out
