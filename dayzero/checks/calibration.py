"""Floors calibrated from measured runs, not guessed: `dayzero floors calibrate CELL` (pure core).

Each of N quiet runs of a cell leaves, per floor, its figure's interval (`checks.intervals`); the
calibrated bound is a stated fraction of the worst run's lower bound (a `min` floor; a `max`
floor: the worst upper bound divided by the fraction), so a quiet run clears it and a slowdown of
more than 1/fraction misses it. A run measured on a contended host, an invalid measurement or a
figure without an interval never feeds a calibration (issue 41, item 4): it is named and left out.
The provenance (hosts, CPU model and instruction sets or accelerators, date, runs, the fraction)
travels with the floors.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from dayzero.checks import family_of

# sqrt(0.5): the geometric middle between a quiet run (1.0) and a 2x slowdown (0.5), the same
# margin on both sides for a host whose speed drifts between runs (its quiet lower bounds moved
# 44-50 tok/s, 37-96 on vLLM's batched cell, within one hour on the 2-core AMD EPYC)
DEFAULT_FRACTION = 0.7


@dataclass(frozen=True)
class Calibrated:
    """One floor's calibrated bound and the per-run interval sides it came from."""

    check: str
    metric: str
    workload: str
    concurrency: int
    direction: str
    bound: float
    sides: tuple[float, ...]  # each clean run's lower (min) or upper (max) bound
    medians: tuple[float, ...]

    def to_json(self) -> dict:
        return {
            "check": self.check,
            "metric": self.metric,
            "workload": self.workload,
            "concurrency": self.concurrency,
            self.direction: self.bound,
            "runs": len(self.sides),
            "interval_sides": list(self.sides),
            "medians": list(self.medians),
        }


@dataclass(frozen=True)
class Calibration:
    cell: str
    fraction: float
    floors: tuple[Calibrated, ...]
    left_out: tuple[str, ...]  # "run R: check: why" for every number that fed nothing
    provenance: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {
            "cell": self.cell,
            "fraction": self.fraction,
            "provenance": self.provenance,
            "floors": [f.to_json() for f in self.floors],
            "left_out": list(self.left_out),
        }


def cpu_kind(machine: Mapping | None) -> str:
    """A short key for the CPU a number was measured on: vendor, family and the instruction sets
    that change kernels (AMX, AVX-512), e.g. `amd-epyc-avx512`, `intel-xeon-amx`."""
    if not machine or not machine.get("cpu"):
        return "unknown"
    cpu = str(machine["cpu"]).lower()
    vendor = next((v for v in ("amd", "intel", "ampere", "arm") if v in cpu), machine.get("arch", "cpu"))
    family = next((f for f in ("epyc", "ryzen", "xeon", "core", "altra", "neoverse") if f in cpu), "")
    isa = set(machine.get("isa") or ())
    level = "amx" if any(f.startswith("amx") for f in isa) else "avx512" if "avx512f" in isa else ""
    return "-".join(p for p in (vendor, family, level) if p)


def hosts_cpu_kind(machines: Iterable[Mapping | None]) -> str:
    """The CPU kind a cell ran on: its hosts' one kind, "mixed" where they differ (no calibrated
    bound holds on a mix), "unknown" where none says."""
    kinds = {cpu_kind(m) for m in machines}
    return kinds.pop() if len(kinds) == 1 else "mixed" if kinds else "unknown"


def _sig(value: float, digits: int = 3) -> float:
    if value == 0:
        return 0.0
    return round(value, digits - 1 - math.floor(math.log10(abs(value))))


def calibrate(cell: str, docs: Iterable[Mapping], fraction: float = DEFAULT_FRACTION) -> Calibration:
    """The floors of `cell` from its runs' evidence documents (oldest first)."""
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction {fraction} is not in (0, 1]")
    sides: dict[str, list[tuple[float, float]]] = {}
    shape: dict[str, tuple[str, str, int, str]] = {}
    left_out: list[str] = []
    hosts: dict[str, dict] = {}
    runs: list[str] = []
    for doc in docs:
        if doc.get("cell") != cell:
            continue
        run = str(doc["run"]["id"])
        runs.append(run)
        for h in doc.get("hosts") or ():
            facts = h.get("facts") or {}
            hosts[h["name"]] = {
                "hardware": h.get("hardware"),
                "accelerators": h.get("accelerators"),
                "cpus": facts.get("cpus"),
                "machine": facts.get("machine"),
                "cpu_kind": cpu_kind(facts.get("machine")),
            }
        for c in doc["checks"]:
            if family_of(c) != "floor":
                continue
            d = c.get("details") or {}
            iv = d.get("interval") or {}
            why = (
                "measured on a contended host"
                if d.get("contended")
                else f"verdict {c['verdict']}"
                if c["verdict"] not in ("passed", "failed", "inconclusive")
                else "no interval"
                if iv.get("lo") is None or iv.get("hi") is None
                else ""
            )
            if why:
                left_out.append(f"run {run}: {c['name']}: {why}")
                continue
            direction = d.get("direction", "min")
            side = float(iv["lo"] if direction == "min" else iv["hi"])
            sides.setdefault(c["name"], []).append((side, float(c.get("measured") or 0.0)))
            metric = c["name"].split(":", 1)[-1].split("@", 1)[0]
            shape[c["name"]] = (metric, d.get("workload", "default"), int(d.get("concurrency", 1)), direction)
    floors = []
    for name, got in sorted(sides.items()):
        metric, workload, concurrency, direction = shape[name]
        worst = min(s for s, _ in got) if direction == "min" else max(s for s, _ in got)
        bound = _sig(worst * fraction if direction == "min" else worst / fraction)
        floors.append(
            Calibrated(
                name,
                metric,
                workload,
                concurrency,
                direction,
                bound,
                tuple(s for s, _ in got),
                tuple(m for _, m in got),
            )
        )
    provenance = {"runs": runs, "hosts": hosts, "cpu_kinds": sorted({h["cpu_kind"] for h in hosts.values()})}
    return Calibration(cell, fraction, tuple(floors), tuple(left_out), provenance)
