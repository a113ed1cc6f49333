"""Tool calls: each tool-use suite's answers against the card's thresholds and the answers the
golden cell's golden keeps (never a bundle's own)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from dayzero.checks import CheckResult
from dayzero.checks.tool_calls import check_names, check_tool_calls
from dayzero.run import plan
from dayzero.run.plan import ToolCallPlan
from dayzero.run.plans.base import CORRECTNESS, Source
from dayzero.spec.card import ModelCard, golden_source
from dayzero.spec.matrix import Cell


class ToolCalls:
    family, stage = "tools", CORRECTNESS

    def plans(self, card: ModelCard, cell: Cell, suites: Path) -> Iterator[ToolCallPlan]:
        return plan.tool_calls(card, cell, suites)

    def names(self, tp: ToolCallPlan) -> list[str]:
        return check_names(tp.rule, tp.suite)

    def judge(self, tp: ToolCallPlan, src: Source) -> Iterator[CheckResult]:
        with src.step(f"correctness: tool calls ({tp.suite.name}, {len(tp.suite.cases)} cases)"):
            answer, _ = src.exchange(tp.phase, tp.concurrency, tp.requests())
            golden = src.golden  # the probes' golden cell is the tool answers' reference cell too
            suite = tp.suite.name
            for result in check_tool_calls(
                tp.rule,
                tp.suite,
                answer["records"],
                (golden.tool_calls if golden else {}).get(suite),
                golden_source(src.card, src.cell)[0],
                (golden.tool_tokens if golden else {}).get(suite),
            ):
                src.say(f"{result.name}: {result.message}")
                yield result


KIND = ToolCalls()
