"""Every kind of check a cell can be asked for, one module per kind, in the order a cell runs
them: the live run sends, then judges (`run.phases`); the submission checker reads, then judges
(`submission.recompute`); both iterate `of`. A new kind is a module with a `Kind` (`base`) added
to `KINDS`, and nothing else."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from dayzero.run.plans import accuracy, floors, probes, speculative, sweeps, tool_calls
from dayzero.run.plans.base import CORRECTNESS, MEASUREMENT, Kind, Planned, Source, Unrecomputable
from dayzero.spec.card import ModelCard
from dayzero.spec.matrix import Cell

__all__ = ["CORRECTNESS", "KINDS", "MEASUREMENT", "Kind", "Planned", "Source", "Unrecomputable", "of"]

KINDS: list[Kind] = [probes.KIND, tool_calls.KIND, floors.KIND, sweeps.KIND, accuracy.KIND, speculative.KIND]


def of(card: ModelCard, cell: Cell, suites: Path, stage: str | None = None) -> Iterator[Planned]:
    """A cell's plans in order (of one stage, where given); each kind's files are read as it
    comes up, so a live run meets a missing workload when it reaches it."""
    for kind in KINDS:
        if stage is None or kind.stage == stage:
            for unit in kind.plans(card, cell, suites):
                yield Planned(kind, unit)
