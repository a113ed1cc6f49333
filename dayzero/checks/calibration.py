"""Floors calibrated from measured runs, not guessed: `dayzero floors calibrate CELL` (pure core).

Each of N quiet runs of a cell leaves, per floor, its figure's interval (`checks.intervals`). A
floor must pass the slowest quiet run and catch a 2x slowdown of the fastest one, and a host's
quiet speed moves between hours and days (the same 2-core machine ran the main job's engines
1.2-1.6x faster at 08:00 than at 04:30 one day): so the bound is the geometric middle of that
band, between the slowest run's lower bound and half the fastest run's upper bound (a ceiling:
the slowest run's upper bound and twice the fastest run's lower bound), the same margin to both
sides. The margin shrinks as the runs spread; below `QUIET_MARGIN` the quiet side keeps it and
the slowdown side is short, said in the file and by the verb (a cell whose quiet runs spread
over 2/1.25 = 1.6x has no absolute floor that does both with that margin). Runs of one stretch,
no spread, give 1/sqrt(2) of the slowest run's lower bound, the old fixed fraction's rule.
A run measured on a contended host, an invalid measurement or a figure without an interval
never feeds a calibration (issue 41, item 4): it is named and left out. The provenance (hosts,
CPU model and instruction sets or accelerators, date, runs) travels with the floors.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from dayzero.checks import family_of

SLOWDOWN = 2.0  # what a calibrated floor must catch (issue 41): the engine at half its speed
# the least a floor keeps below the slowest quiet run's lower bound (a ceiling above its upper).
# Chosen on 63 quiet cell-runs of 2026-12-07 (the main job's 9 cells x 7 runs over 7 hours, the
# 2-core AMD EPYC), each judged by floors calibrated from the other 6 (bench/floors_holdout.py):
# 1.25 failed 2, both in the one run of 7 whose llama.cpp high-throughput cells ran 1.65x slower
# than the rest (the old fixed fraction 0.7 failed one of those two), and caught 60 of 63 slowed
# 2x, against 51; 1.1 caught all 63 and failed 4, in 3 runs; 1.3 caught 58 and failed the same 2
QUIET_MARGIN = 1.25
# a floor that cannot catch the fastest run slowed 2x while another floor of its cell can keeps the
# old rule's distance, sqrt(2), from the slowest run: held tighter, it would add risk to quiet runs
# and catch nothing the cell's other floor does not (the main job's short 8-request agentx point
# cleared 1.25 by 1.09x in CI, its interval 16.7-45.8 tok/s)
SPARE_MARGIN = math.sqrt(2)


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
    floors: tuple[Calibrated, ...]
    left_out: tuple[str, ...]  # "run R: check: why" for every number that fed nothing
    provenance: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {
            "cell": self.cell,
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


def bound_between(direction: str, slowest: float, slowed: float) -> float:
    """The bound between the slowest quiet run's near side and the fastest run slowed 2x: their
    geometric middle, kept `QUIET_MARGIN` from the quiet side (the slowdown side is short where
    the runs spread too far for both: `Calibrated.slowdown_margin` < 1 says so)."""
    middle = math.sqrt(slowest * slowed)
    if direction == "min":
        return _sig(min(middle, slowest / QUIET_MARGIN))
    return _sig(max(middle, slowest * QUIET_MARGIN))


def spare(floor: Calibrated) -> Calibrated:
    """A floor another of its cell's catches the slowdown for: `SPARE_MARGIN` from the slowest run."""
    slowest = floor.slowest
    bound = slowest / SPARE_MARGIN if floor.direction == "min" else slowest * SPARE_MARGIN
    return replace(floor, bound=_sig(bound))


def calibrate(cell: str, docs: Iterable[Mapping]) -> Calibration:
    """The floors of `cell` from its runs' evidence documents (oldest first)."""
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
        floors.append(replace(shaped, bound=bound_between(direction, shaped.slowest, shaped.slowed)))
    if any(f.slowdown_margin >= 1 for f in floors):
        floors = [f if f.slowdown_margin >= 1 else spare(f) for f in floors]
    provenance = {"runs": runs, "hosts": hosts, "cpu_kinds": sorted({h["cpu_kind"] for h in hosts.values()})}
    return Calibration(cell, tuple(floors), tuple(left_out), provenance)
