"""Accuracy gates: the first questions of an eval set, scored against the gate's threshold."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from dayzero.checks import CheckResult
from dayzero.checks.accuracy import check_accuracy
from dayzero.run import plan
from dayzero.run.plan import AccuracyPlan
from dayzero.run.plans.base import MEASUREMENT, Source
from dayzero.spec.card import ModelCard
from dayzero.spec.matrix import Cell


class Accuracy:
    family, stage = "accuracy", MEASUREMENT

    def plans(self, card: ModelCard, cell: Cell, suites: Path) -> Iterator[AccuracyPlan]:
        return plan.accuracy(card, cell, suites)

    def names(self, a: AccuracyPlan) -> list[str]:
        return [a.gate.name]

    def judge(self, a: AccuracyPlan, src: Source) -> Iterator[CheckResult]:
        with src.step(f"accuracy: {a.gate.eval} ({len(a.items)} questions)"):
            answer, _ = src.exchange(a.phase, a.concurrency, a.requests())
            result = check_accuracy(a.gate, a.items, answer["records"])
            src.say(f"{a.gate.name}: {result.message}")
            yield result


KIND = Accuracy()
