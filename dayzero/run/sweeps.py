"""Benchmark-card sweeps: what each point requests, and the sweep's walk (run live by
`dayzero.run.phases.run_sweeps`).

A point is a `MeasurementPlan` with its own record names (`records.sweep`) and prompts: a context
point sets the workload's input length, a rate point gives every request a Poisson arrival time
(`at`, seeded by the point's phase name, so the checker draws the same schedule; the gaps are
scaled so the point offers exactly its rate). `walk` measures
the card's points in order, then bisects towards the max load at SLO (`checks.sweep.next_load`),
then repeats the points an inconclusive floor hinges on, until `measure` says stop: the live
run stops when the sweep's time budget is spent, the submission checker where the bundle has no
more records. One walk for both, so the points a
run measured are the points a checker expects.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from dayzero import devices
from dayzero.checks.sweep import next_load, point, unsettled
from dayzero.run import records
from dayzero.run.plan import MeasurementPlan
from dayzero.spec.card import ModelCard
from dayzero.spec.matrix import Cell
from dayzero.spec.sweeps import Sweep, sweeps_for
from dayzero.spec.workloads import resolve

POWER_INTERVAL_S = 0.5  # the device tools' power readings; RAPL is a counter, read at both ends


@dataclass(frozen=True)
class SweepPoint(MeasurementPlan):
    """One load of one sweep."""

    sweep: Sweep | None = None
    load: float = 0.0

    @property
    def label(self) -> str:
        return self.sweep.label(self.load)

    @property
    def display(self) -> str:
        return f"{self.sweep.name}-{self.label}"

    @property
    def salt(self) -> int:
        """Prompts differ between points (a prompt cache must not serve one point another's)."""
        return 1000 + zlib.crc32(f"{self.sweep.name}-{self.label}".encode()) % 100_000

    def phase(self, repetition: int) -> str:
        return records.sweep(self.sweep.name, self.label, repetition)

    def requests(self, repetition: int) -> list[dict]:
        out = self.workload.requests(self.prompts_per_run, repetition, salt=self.salt)
        if self.sweep.kind == "rate":
            # Exponential gaps, scaled so the point offers exactly its rate: a few draws miss it
            # far (the first cpu run drew 3.7 req/s for a 1 req/s point of 10 requests).
            rng = random.Random(zlib.crc32(self.phase(repetition).encode()))
            gaps = [rng.expovariate(self.load) for _ in out[1:]]
            scale = len(gaps) / self.load / sum(gaps) if gaps else 1.0
            at = 0.0
            for req, gap in zip(out, [0.0, *gaps], strict=True):
                at += gap * scale
                req["at"] = round(at, 6)
        return out

    @property
    def queues(self) -> bool:
        """Open-loop arrivals come when they are due, whatever is in flight: they can queue."""
        return self.sweep.kind == "rate" or super().queues

    def warmup(self) -> list[dict]:
        """A context point warms up at the sweep's shortest input (a long warm-up prompt would only
        cost time: the server is warm either way, and warm-up prompts never share a prefix)."""
        conc = self.concurrency if self.sweep.kind != "rate" else min(self.concurrency, int(self.load) + 1)
        n = self.protocol.warmup_requests(conc)
        workload = self.workload
        if self.sweep.kind == "context":
            workload = replace(workload, spec={**workload.spec, "isl": int(self.sweep.points[0])})
        return workload.requests(n, warmup=True, salt=self.salt)


def point_plan(sweep: Sweep, base: MeasurementPlan, load: float, slots: int = 0) -> SweepPoint:
    workload = base.workload
    if sweep.kind == "context":
        workload = replace(workload, spec={**workload.spec, "isl": int(load)})
    concurrency = int(load) if sweep.kind == "concurrency" else sweep.concurrency
    return SweepPoint(
        workload,
        concurrency,
        base.protocol,
        num_prompts=sweep.num_prompts,
        repetitions=sweep.repetitions,
        power={"interval": POWER_INTERVAL_S, "tools": devices.power_tools()},
        slots=slots,
        sweep=sweep,
        load=load,
    )


@dataclass(frozen=True)
class SweepPlan:
    sweep: Sweep
    base: MeasurementPlan  # workload and protocol; each point sets its own load
    slots: int = 1  # requests the server takes at once (the mode's concurrency)

    def point(self, load: float) -> SweepPoint:
        return point_plan(self.sweep, self.base, load, self.slots)


def plans(card: ModelCard, cell: Cell, suites: Path) -> Iterator[SweepPlan]:
    for sweep in sweeps_for(card, cell):
        workload = resolve(card, sweep.workload, suites / "workloads")
        plan = MeasurementPlan(workload, 1, card.protocol_for(cell))
        yield SweepPlan(sweep, plan, card.mode(cell.mode).concurrency)


# (records file, raw answer) per repetition of a point, or None: measure no more
Measure = Callable[[SweepPoint], "Sequence[tuple[str, Mapping]] | None"]
# a records file -> the /metrics snapshots kept beside it, or None
Metrics = Callable[[str], "Mapping | None"]


def processes_of(p: MeasurementPlan, answers: Sequence[tuple[str, Mapping]]) -> int:
    """The client processes the measurement's last repetition ran with (more where one saturated):
    the protocol's where it fixes them, else what the recorded answers say, which is what the
    harness reports."""
    return p.protocol.client_processes or (answers[-1][1].get("client") or {}).get("processes") or 1


def repeated(sp: SweepPlan, row: Mapping) -> SweepPoint:
    """A measured point's plan with the repetitions its row holds (an inconclusive floor's extra
    ones included)."""
    return replace(sp.point(row["load"]), repetitions=len(row["records"]))


def walk(sp: SweepPlan, measure: Measure, accelerators: int, metrics: Metrics = lambda rel: None):
    """The card's points in order, then the bisection, then, while the sweep's floor is
    inconclusive, one more repetition of each load it hinges on (`checks.sweep.unsettled`), up to
    the protocol's `extra_repetitions`; returns (points, loads not measured). `measure` may say
    None to any of them (the live run's budget spent, no more records in a bundle).
    `metrics` finds a repetition's /metrics snapshots by its records file, where kept."""
    points: list[dict] = []
    skipped: list[float] = []

    def measured(p: SweepPoint) -> dict | None:
        answers = measure(p)
        if answers is None:
            return None
        docs = [metrics(rel) for rel, _ in answers]
        m = p.measurement(answers, accelerators, processes_of(p, answers), docs)
        return point(sp.sweep, p.load, m, [a for _, a in answers], accelerators)

    def one(load: float) -> bool:
        row = measured(sp.point(load))
        if row is not None:
            points.append(row)
        return row is not None

    def again(load: float) -> bool:
        i = next(i for i, row in enumerate(points) if row["load"] == load)
        row = measured(replace(sp.point(load), repetitions=len(points[i]["records"]) + 1))
        if row is not None:
            points[i] = row
        return row is not None

    for i, load in enumerate(sp.sweep.points):
        if not one(load):
            skipped.extend(sp.sweep.points[i:])
            break
    steps = 0
    while not skipped and steps < sp.sweep.search:
        load = next_load(sp.sweep, points)
        if load is None or not one(load):
            break
        steps += 1
    for _ in range(sp.base.protocol.extra_repetitions):
        loads = unsettled(sp.sweep, points, skipped)
        if not loads or not all(again(load) for load in loads):
            break
    return sorted(points, key=lambda p: p["load"]), skipped
