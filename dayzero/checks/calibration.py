"""Floors calibrated from measured runs, not guessed: `dayzero floors calibrate CELL` (pure core).

Each of N quiet runs of a cell leaves, per floor, its figure's interval (`checks.intervals`); the
calibrated bound is a stated fraction of the slowest run's lower bound (a `min` floor; a `max`
floor: the slowest run's upper bound divided by the fraction). The quiet side comes first: CI's
main job runs on another machine of the same kind, with 8-request phases whose intervals are
wide, and must stay green. Each floor records how far a 2x slowdown of the fastest run sits past
it (`slowdown_margin`): a host's quiet speed moves 1.2-1.8x between hours (docs/measurement.md),
so on a day as fast as the fastest run a floor under 1 may pass such a slowdown, and the verb
warns for a cell none of whose floors is at 1 or more. A run measured on a contended host, an
invalid measurement or a figure without an interval never feeds a calibration (issue 41, item
4): it is named and left out. The provenance (hosts, CPU model and instruction sets or
accelerators, date, runs, the fraction) travels with the floors.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from dayzero.checks import family_of

SLOWDOWN = 2.0  # what a calibrated floor is measured against (issue 41): the engine at half its speed
# sqrt(0.5), rounded: a quiet run's lower bound 1.43x clear, a 2x slowdown of it 1.4x past. Tried
# tighter on 2026-12-07 (a margin of 1.25 from the slowest of 7 runs, nearer the fastest run slowed
# 2x): the main job's nearest floor then cleared by only 1.09-1.14x in each of three clean runs
# here, most on 8-request intervals: little room for a CI machine a few percent slower; this
# fraction leaves 1.25-1.31x there (bench/floors_holdout.py: both on 81 quiet cell-runs)
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
    far_sides: tuple[float, ...]  # each clean run's other bound: upper (min) or lower (max)

    @property
    def slowest(self) -> float:
        """The slowest run's near side: its lower bound (a floor), its upper bound (a ceiling)."""
        return min(self.sides) if self.direction == "min" else max(self.sides)

    @property
    def slowed(self) -> float:
        """The fastest run slowed down `SLOWDOWN` times: its far side moved by that much."""
        if self.direction == "min":
            return max(self.far_sides) / SLOWDOWN
        return min(self.far_sides) * SLOWDOWN

    @property
    def quiet_margin(self) -> float:
        """How far the bound sits from the slowest quiet run (a ratio >= 1)."""
        return self._past(self.slowest, self.bound)

    @property
    def slowdown_margin(self) -> float:
        """How far the fastest run slowed 2x sits past the bound: >= 1 is caught, < 1 passes."""
        return self._past(self.bound, self.slowed)

    def _past(self, better: float, worse: float) -> float:
        """How many times `better` is better than `worse`: higher for a floor, lower for a ceiling."""
        high, low = (better, worse) if self.direction == "min" else (worse, better)
        return high / low if low else math.inf

    def to_json(self) -> dict:
        return {
            "check": self.check,
            "metric": self.metric,
            "workload": self.workload,
            "concurrency": self.concurrency,
            self.direction: self.bound,
            "runs": len(self.sides),
            "interval_sides": list(self.sides),
            "interval_far_sides": list(self.far_sides),
            "medians": list(self.medians),
            "quiet_margin": round(self.quiet_margin, 3),
            "slowdown_margin": round(self.slowdown_margin, 3),
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
            "slowdown": SLOWDOWN,
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
    """The floors of `cell` from its runs' evidence documents (oldest first), at `fraction` of the
    slowest run."""
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction {fraction} is not in (0, 1]")
    sides: dict[str, list[tuple[float, float, float]]] = {}
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
            near, far = (iv["lo"], iv["hi"]) if direction == "min" else (iv["hi"], iv["lo"])
            sides.setdefault(c["name"], []).append((float(near), float(far), float(c.get("measured") or 0.0)))
            metric = c["name"].split(":", 1)[-1].split("@", 1)[0]
            shape[c["name"]] = (metric, d.get("workload", "default"), int(d.get("concurrency", 1)), direction)
    floors = []
    for name, got in sorted(sides.items()):
        metric, workload, concurrency, direction = shape[name]
        shaped = Calibrated(
            name,
            metric,
            workload,
            concurrency,
            direction,
            0.0,
            tuple(near for near, _, _ in got),
            tuple(m for _, _, m in got),
            tuple(far for _, far, _ in got),
        )
        bound = shaped.slowest * fraction if direction == "min" else shaped.slowest / fraction
        floors.append(replace(shaped, bound=_sig(bound)))
    provenance = {"runs": runs, "hosts": hosts, "cpu_kinds": sorted({h["cpu_kind"] for h in hosts.values()})}
    return Calibration(cell, fraction, tuple(floors), tuple(left_out), provenance)
