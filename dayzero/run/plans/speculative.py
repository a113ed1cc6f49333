"""Speculative acceptance: accepted length per workload, from the engine's counters across its
phase (read from the /metrics snapshots live, kept in the phase's records as `counters`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from dayzero.checks import CheckResult
from dayzero.checks.speculative import check_acceptance, check_name, from_snapshots
from dayzero.engines.prometheus import SpecCounters
from dayzero.run import plan
from dayzero.run.plan import SpeculativePlan
from dayzero.run.plans.base import MEASUREMENT, Source
from dayzero.spec.card import ModelCard
from dayzero.spec.matrix import Cell


def plain(value):
    return value.__dict__ if hasattr(value, "__dict__") else value


def counters(value):
    """A counter as the records keep it, read back (a bundle's may be anything)."""
    if isinstance(value, dict):
        return SpecCounters(
            **{k: float(value[k]) for k in ("drafts", "draft_tokens", "accepted") if k in value}
        )
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


class Speculative:
    family, stage = "speculative", MEASUREMENT

    def plans(self, card: ModelCard, cell: Cell, suites: Path) -> Iterator[SpeculativePlan]:
        return plan.speculative(card, cell, suites)

    def names(self, sp: SpeculativePlan) -> list[str]:
        return [check_name(sp.workload.name)]

    def judge(self, sp: SpeculativePlan, src: Source) -> Iterator[CheckResult]:
        kind, name = src.card.engine.name, sp.workload.name

        def count(answer: dict, snapshots: dict) -> None:
            before, after = (from_snapshots(kind, snapshots[k]) for k in ("before", "after"))
            answer["counters"] = {"source": kind, "before": plain(before), "after": plain(after)}

        with src.step(f"speculative acceptance: {name}"):
            answer, _ = src.exchange(sp.phase, sp.concurrency, sp.requests(), prepare=count)
            kept = answer.get("counters") or {}
            result = check_acceptance(
                name,
                sp.workload.tag,
                kind,
                counters(kept.get("before")),
                counters(kept.get("after")),
                answer["records"],
                sp.rule.min_accept_length.get(name),
            )
            src.say(f"{result.name}: {result.message}")
            yield result


KIND = Speculative()
