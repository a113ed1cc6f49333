"""Benchmark-card sweeps: the walk over a sweep's points (`run.sweeps`: the points an
inconclusive floor hinges on measured again within the protocol's budget), then its floor, judged
on its interval as every floor is (`checks.sweep.sweep_floor_check`)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

from dayzero.checks import FAILED, CheckResult
from dayzero.checks.sweep import check_name, sweep_check, sweep_floor_check
from dayzero.run import sweeps
from dayzero.run.plans.base import MEASUREMENT, Source
from dayzero.spec.card import ModelCard
from dayzero.spec.matrix import Cell


class Sweeps:
    family, stage = "sweep", MEASUREMENT

    def plans(self, card: ModelCard, cell: Cell, suites: Path) -> Iterator[sweeps.SweepPlan]:
        return sweeps.plans(card, cell, suites)

    def names(self, sp: sweeps.SweepPlan) -> list[str]:
        sweep = sp.sweep
        return [check_name(sweep)] + ([sweep.floor_name] if sweep.floor else [])

    def judge(self, sp: sweeps.SweepPlan, src: Source) -> Iterator[CheckResult]:
        sweep = sp.sweep
        with src.step(f"sweep: {sweep.name} ({sweep.kind}, {sweep.workload})"):
            measure, metrics_of = src.sweep(sp)
            points, skipped = sweeps.walk(sp, measure, src.accelerators, metrics_of)
            result = sweep_check(sweep, points, skipped)
            phases = [ph for p in points for ph in sweeps.repeated(sp, p).phases()]
            if result.verdict != FAILED:  # anti-gaming is counted, not timed: contention excuses none
                result = src.contended(result, phases)  # its points marked where a host was contended
            src.say(f"{result.name}: {result.message}")
            yield result
            if (floor := sweep_floor_check(sweep, result)) is not None:
                floor = src.contended(floor, phases)
                src.say(f"{floor.name}: {floor.message}")
                yield replace(floor, family="floor")  # a floor, as the card's own are


KIND = Sweeps()
