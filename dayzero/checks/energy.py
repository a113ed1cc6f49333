"""Power and energy from the tools hosts have: nvidia-smi, amd-smi, Linux RAPL (pure parsers).

A sampler beside a phase keeps each tool's raw output in the phase's records; these functions turn
it into watts per device and joules, so the benchmark card can say joules per output token and
watts per accelerator. The client's host samples itself; every other host of the cell is read in
windows by `lab.power` (`merge_windows`), and a phase's energy counts every host (`from_hosts`).
Parsers take the tools' text as printed:

- `nvidia-smi --query-gpu=timestamp,index,power.draw --format=csv` (header with units; values
  like `72.45 W`; `[N/A]` or `[Not Supported]` where the board has no reading),
- `amd-smi metric --power` (per `GPU: <n>` block, `SOCKET_POWER: 140 W`, `N/A` where unsupported),
- RAPL, `/sys/class/powercap/intel-rapl:<n>[:<m>]/{name,energy_uj,max_energy_range_uj}`: a
  cumulative microjoule counter per zone that wraps at `max_energy_range_uj`.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class PowerSample:
    t: float  # seconds (any common origin)
    watts: Mapping[str, float]  # device -> W; a device without a reading is absent


def _watts(text: str) -> float | None:
    match = re.match(r"\s*(-?\d+(?:\.\d+)?)\s*(?:W)?\s*$", text or "")
    return float(match.group(1)) if match else None


def nvidia_smi_csv(text: str) -> list[PowerSample]:
    """`nvidia-smi --query-gpu=timestamp,index,power.draw --format=csv[,nounits]` -> one sample per
    timestamp (every GPU printed at that time)."""
    rows = list(csv.reader(io.StringIO(text), skipinitialspace=True))
    if not rows:
        return []
    head = [h.strip().split(" [")[0] for h in rows[0]]
    if not {"timestamp", "index", "power.draw"} <= set(head):
        raise ValueError(f"nvidia-smi CSV without timestamp, index and power.draw columns: {rows[0]}")
    ti, ii, pi = head.index("timestamp"), head.index("index"), head.index("power.draw")
    by_time: dict[float, dict[str, float]] = {}
    for row in rows[1:]:
        if len(row) < len(head):
            continue  # a line cut short (the sampler was stopped mid-write)
        when = dt.datetime.strptime(row[ti].strip(), "%Y/%m/%d %H:%M:%S.%f").timestamp()
        watts = _watts(row[pi])
        by_time.setdefault(when, {})
        if watts is not None:
            by_time[when][f"gpu{row[ii].strip()}"] = watts
    return [PowerSample(t, w) for t, w in sorted(by_time.items())]


def amd_smi_power(text: str) -> dict[str, float]:
    """`amd-smi metric --power` (one reading) -> {"gpu<n>": socket watts}; N/A is absent."""
    out: dict[str, float] = {}
    gpu = None
    for line in text.splitlines():
        head = re.match(r"\s*GPU:\s*(\d+)\s*$", line)
        if head:
            gpu = f"gpu{head.group(1)}"
            continue
        field = re.match(r"\s*SOCKET_POWER:\s*(.+?)\s*$", line)
        if field and gpu is not None:
            watts = _watts(field.group(1))
            if watts is not None:
                out[gpu] = watts
    return out


def rapl_joules(before: Mapping[str, Mapping], after: Mapping[str, Mapping]) -> dict[str, float]:
    """Zone -> joules between two reads of each zone's {name, energy_uj, max_energy_range_uj};
    a counter that went down wrapped once at its range. Top-level zones (packages) only: a
    subzone (core, dram) is part of its package's count."""
    out = {}
    for zone, b in before.items():
        a = after.get(zone)
        if a is None or zone.count(":") > 1:
            continue
        delta = int(a["energy_uj"]) - int(b["energy_uj"])
        if delta < 0:
            delta += int(b["max_energy_range_uj"])
        out[str(b.get("name") or zone)] = delta / 1e6
    return out


def integrate(samples: Sequence[PowerSample]) -> dict[str, float]:
    """Device -> joules over the samples' span (trapezoids between consecutive readings)."""
    out: dict[str, float] = {}
    for a, b in zip(samples, samples[1:], strict=False):
        for device in a.watts.keys() & b.watts.keys():
            out[device] = out.get(device, 0.0) + (a.watts[device] + b.watts[device]) / 2 * (b.t - a.t)
    return out


def per_token(joules: Mapping[str, float], output_tokens: int, seconds: float, accelerators: int) -> dict:
    """Joules per output token and mean watts per accelerator over a phase."""
    total = sum(joules.values())
    return {
        "joules": round(total, 3),
        "joules_per_token": round(total / output_tokens, 6) if output_tokens else None,
        "watts_per_accelerator": round(total / seconds / max(accelerators, 1), 3) if seconds > 0 else None,
    }


def host_energy(power: Mapping | None) -> dict:
    """One host's readings over a phase: {source, joules, seconds}, the first source with readings
    (nvidia-smi, amd-smi, RAPL); else {not_measured: why} (the sampler's absent tools and errors)."""
    if not power:
        return {"not_measured": "no power sampler ran beside the phase"}
    seconds = float(power.get("t1", 0)) - float(power.get("t0", 0))
    joules, source = {}, ""
    if power.get("nvidia_smi"):
        joules, source = integrate(nvidia_smi_csv(power["nvidia_smi"])), "nvidia-smi"
    if not joules and power.get("amd_smi"):
        samples = [PowerSample(float(r["t"]), amd_smi_power(r["text"])) for r in power["amd_smi"]]
        joules, source = integrate(samples), "amd-smi"
    if not joules and power.get("rapl"):
        joules, source = rapl_joules(power["rapl"]["before"], power["rapl"]["after"]), "RAPL"
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
    phase's: RAPL's counters from the first window's start to the last one's end, every
    nvidia-smi line and amd-smi reading, the first window's absent tools, the first errors."""
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
    before, after = (first.get("rapl") or {}).get("before"), (last.get("rapl") or {}).get("after")
    if before and after:
        out["rapl"] = {"before": before, "after": after}
    texts = [w["nvidia_smi"].splitlines() for w in taken if w.get("nvidia_smi")]
    if texts:
        out["nvidia_smi"] = "\n".join([texts[0][0], *(line for t in texts for line in t[1:])]) + "\n"
    if reads := [r for w in taken for r in w.get("amd_smi") or ()]:
        out["amd_smi"] = reads
    return out
