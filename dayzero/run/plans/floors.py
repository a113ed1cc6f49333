"""Performance floors: one measurement per group of floors, each floor judged on it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

from dayzero.checks import CheckResult
from dayzero.checks.performance import check_floor
from dayzero.run import plan
from dayzero.run.plan import MeasurementPlan
from dayzero.run.plans.base import MEASUREMENT, Source
from dayzero.spec.card import ModelCard
from dayzero.spec.matrix import Cell


class Floors:
    family, stage = "floor", MEASUREMENT

    def plans(self, card: ModelCard, cell: Cell, suites: Path) -> Iterator[MeasurementPlan]:
        return plan.measurements(card, cell, suites)

    def names(self, m: MeasurementPlan) -> list[str]:
        return [floor.name for floor in m.floors]

    def judge(self, m: MeasurementPlan, src: Source) -> Iterator[CheckResult]:
        m = replace(m, floors=tuple(floor.on(src.cpu_kind) for floor in m.floors))
        with src.step(f"performance: {m.workload.name} at concurrency {m.concurrency}"):
            answers, processes, docs = src.repetitions(m)
            measurement = m.measurement(answers, src.accelerators, processes, docs)
            src.say(f"{m.display}: {measurement.server_gap.describe()}")
            for floor in m.floors:
                # every repetition's phase, those a floor's inconclusive interval added included
                result = src.contended(
                    check_floor(floor, measurement), [m.phase(i) for i in range(len(answers))]
                )
                src.attach(f"measured {floor.name}", {"verdict": result.verdict, "message": result.message})
                yield result


KIND = Floors()
