"""What the maintainers' matrix expects of one evidence document, and where its raw records are.

The expected checks and the raw-record files each one reads are derived from the matrix, the
request plan and the record names the harness writes (`dayzero.run.plan`, `dayzero.run.records`),
never from the bundle's own claims: a vendor cannot choose which records a check is recomputed from.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path

from dayzero.checks import CheckResult
from dayzero.run import plan, records
from dayzero.run.plan import (
    AccuracyPlan,
    MeasurementPlan,
    ProbePlan,
    ScorePlan,
    SpeculativePlan,
    ToolCallPlan,
)
from dayzero.run.sweeps import SweepPlan, SweepPoint, plans
from dayzero.spec.card import Floor, ModelCard
from dayzero.spec.goldens import Golden, load_golden
from dayzero.spec.matrix import Cell, Matrix
from dayzero.spec.workloads import suites_dir


def known_cell(matrix: Matrix, cell_id) -> Cell | None:
    try:
        return matrix.cell(cell_id)
    except (KeyError, TypeError):
        return None


class Unrecomputable(Exception):  # noqa: N818 - a reason, reported as a finding
    """The raw records a check needs are missing or unreadable."""

    def __init__(self, file: str, reason: str):
        self.file, self.reason = file, reason
        super().__init__(f"{file}: {reason}")


@dataclass(frozen=True)
class Expected:
    """One check the matrix requires, with how to recompute it from raw records."""

    name: str
    recompute: Callable[[], CheckResult] = field(compare=False, repr=False)


@dataclass(frozen=True, eq=False)
class CellView:
    """One evidence document of a known cell, with the matrix's card and the bundle's raw records."""

    name: str  # evidence file in the bundle
    doc: dict
    cell: Cell
    card: ModelCard
    answers: dict[str, dict]  # records file named by the evidence -> schema-valid raw answer
    suites: Path
    goldens_dir: Path
    metrics: dict[str, dict] = field(default_factory=dict)  # records file -> its /metrics snapshots

    def answer(self, phase: str) -> tuple[str, dict]:
        rel = records.path(self.doc["run"]["id"], self.cell.id, phase)
        if rel not in self.doc.get("records", []):
            raise Unrecomputable(self.name, f"no raw records {rel} named in the evidence")
        if rel not in self.answers:
            raise Unrecomputable(rel, "raw records absent or not valid")
        return rel, self.answers[rel]

    @cached_property
    def probes(self) -> ProbePlan:
        return plan.probes(self.card, self.cell)

    @cached_property
    def score_plan(self) -> tuple[ScorePlan | None, str]:
        """The goldens' scoring plan (teacher forcing), or None and why there is none."""
        golden = self.golden
        return plan.scores(self.card, self.cell, golden.outputs if golden else None)

    @property
    def scores(self) -> ScorePlan | None:
        return self.score_plan[0]

    @cached_property
    def forced(self) -> dict[str, tuple[list | None, str]]:
        """Per probe, the engine's scores of the maintainers' golden texts as the bundle's raw
        records keep them, or None and why not (read once per evidence document)."""
        score_plan, why = self.score_plan
        if score_plan is None:
            return {p.id: (None, why) for p in self.card.probes}
        try:
            _, answer = self.answer(score_plan.phase)
        except Unrecomputable:
            return {p.id: (None, "no scoring records in the evidence") for p in self.card.probes}
        return score_plan.forced(answer["records"])

    @cached_property
    def measurements(self) -> tuple[MeasurementPlan, ...]:
        """As the run measured them: one per group of floors, workloads read once per view."""
        return tuple(plan.measurements(self.card, self.cell, self.suites))

    def measurement_of(self, floor: Floor) -> MeasurementPlan:
        return next(m for m in self.measurements if floor in m.floors)

    def floors(self) -> list[Floor]:
        return [floor for m in self.measurements for floor in m.floors]

    @cached_property
    def golden(self) -> Golden | None:
        return load_golden(self.goldens_dir, self.probes.golden_cell or self.cell.id)

    @cached_property
    def gates(self) -> tuple[AccuracyPlan, ...]:
        return tuple(plan.accuracy(self.card, self.cell, self.suites))

    @cached_property
    def speculative(self) -> tuple[SpeculativePlan, ...]:
        return tuple(plan.speculative(self.card, self.cell, self.suites))

    @cached_property
    def tool_calls(self) -> tuple[ToolCallPlan, ...]:
        return tuple(plan.tool_calls(self.card, self.cell, self.suites))

    @cached_property
    def sweeps(self) -> tuple[SweepPlan, ...]:
        return tuple(plans(self.card, self.cell, self.suites))

    @cached_property
    def sweep_points(self) -> tuple[SweepPoint, ...]:
        """Every sweep point whose records the evidence names: the card's loads and the searched
        ones (which loads the search had to measure is the recomputation's business)."""
        named = set(self.doc.get("records", []))
        out = []
        for sp in self.sweeps:
            claimed = next(
                (c for c in self.doc["checks"] if c["name"] == f"sweep:{sp.sweep.name}@{sp.sweep.workload}"),
                {},
            )
            loads = {*sp.sweep.points}
            loads |= {
                p["load"]
                for p in (claimed.get("details") or {}).get("points") or ()
                if isinstance(p, dict) and isinstance(p.get("load"), int | float)
            }
            for load in sorted(loads):
                point = sp.point(float(load))
                if records.path(self.doc["run"]["id"], self.cell.id, point.phase(0)) in named:
                    out.append(point)
        return tuple(out)

    @property
    def loads(self) -> tuple[MeasurementPlan, ...]:
        """Every measured load: the floors' measurements, then the sweep points."""
        return (*self.measurements, *self.sweep_points)


@lru_cache(maxsize=4)
def views(subject, ref) -> list[CellView]:
    """A view per evidence document whose cell the matrix knows."""
    suites = suites_dir(ref.goldens_dir, ref.matrix.root)
    out = []
    for name, doc in sorted(subject.evidence.items()):
        cell = known_cell(ref.matrix, doc["cell"])
        if cell is None:
            continue
        answers = {rel: subject.records[rel] for rel in doc.get("records", []) if rel in subject.records}
        kept = subject.metrics
        metrics = {rel: kept[m] for rel in answers if (m := records.metrics_for(rel)) in kept}
        card = ref.matrix.card(cell)
        out.append(CellView(name, doc, cell, card, answers, suites, Path(ref.goldens_dir), metrics))
    return out
