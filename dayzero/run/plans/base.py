"""What a kind of plan is, and what its answers come from.

A kind (`Kind`) names its checks and judges its answers; where the answers come from is the
`Source`: the live server (`run.phases.Live`: send, keep, then judge) or a bundle's raw records
(`submission.cellview.Recorded`: read, then judge). One judgement for both, so a run and the
checker cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from dayzero.checks import CheckResult
from dayzero.run.plan import MeasurementPlan
from dayzero.run.sweeps import SweepPlan
from dayzero.spec.card import ModelCard
from dayzero.spec.goldens import Golden
from dayzero.spec.matrix import Cell

CORRECTNESS, MEASUREMENT = "correctness", "measurement"  # the run's two stages (`Kind.stage`)
LOAD_TIMEOUT = 3600.0


class Unrecomputable(Exception):  # noqa: N818 - a reason, reported as a finding
    """The raw records a check needs are missing or unreadable (a bundle's, never a live run's)."""

    def __init__(self, file: str, reason: str):
        self.file, self.reason = file, reason
        super().__init__(f"{file}: {reason}")


Answers = list[tuple[str, dict]]  # each repetition's (records file, raw answer)


class Source(Protocol):
    """Where a plan's answers come from, and what it is judged against."""

    card: ModelCard
    cell: Cell
    golden: Golden | None  # the golden of the cell's golden cell; None while recording it
    recording: bool  # `dayzero golden record`: no golden to compare with yet
    recipe_digest: str
    engine_version: str

    @property
    def accelerators(self) -> int: ...

    @property
    def cpu_kind(self) -> str:
        """The CPU kind of the cell's hosts (`checks.calibration.hosts_cpu_kind`): which of a
        floor's calibrated bounds holds."""
        ...

    def exchange(
        self,
        phase: str,
        concurrency: int,
        requests: list[dict],
        *,
        action: str = "load",
        timeout: float = LOAD_TIMEOUT,
        prepare: Callable[[dict, dict], None] | None = None,
    ) -> tuple[dict, dict | None]:
        """One phase's raw answer and its /metrics snapshots; `prepare(answer, snapshots)` adds
        to a live answer what its records keep beside the client's (read back as is)."""
        ...

    def repetitions(self, m: MeasurementPlan) -> tuple[Answers, int, list]:
        """A measurement's repetitions, the client processes the last one used, their snapshots."""
        ...

    def sweep(self, sp: SweepPlan) -> tuple[Callable[[Any], Answers | None], Callable[[str], Any]]:
        """How a sweep's walk measures a point (None: not measured) and finds a file's snapshots."""
        ...

    def contended(self, result: CheckResult, phases: Sequence[str]) -> CheckResult:
        """A floor as the hosts' foreign load during its phases leaves it."""
        ...

    def step(self, title: str) -> AbstractContextManager: ...

    def say(self, text: str) -> None: ...

    def attach(self, name: str, data: Any) -> None: ...


class Kind(Protocol):
    """One kind of check: its plans for a cell, the checks each must make, and the judgement."""

    family: str  # the checks' family (`CheckResult.family`)
    stage: str  # CORRECTNESS (after readiness, also when recording goldens) or MEASUREMENT

    def plans(self, card: ModelCard, cell: Cell, suites: Path) -> Iterable[Any]: ...

    def names(self, unit: Any) -> list[str]:
        """The checks `judge` makes of this plan, in its order (the checker requires each)."""
        ...

    def judge(self, unit: Any, src: Source) -> Iterator[CheckResult]:
        """Its answers from `src`, judged; checks as they are made."""
        ...


@dataclass(frozen=True)
class Planned:
    """One plan of a cell and the kind it is of."""

    kind: Kind
    unit: Any

    def names(self) -> list[str]:
        return self.kind.names(self.unit)

    def judge(self, src: Source) -> Iterator[CheckResult]:
        for result in self.kind.judge(self.unit, src):
            yield result if result.family else replace(result, family=self.kind.family)
