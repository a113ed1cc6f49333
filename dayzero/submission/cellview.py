"""What the maintainers' matrix expects of one evidence document, and where its raw records are.

The expected checks and the raw-record files each one reads are derived from the matrix, the
request plan and the record names the harness writes (`dayzero.run.plan`, `dayzero.run.records`),
never from the bundle's own claims: a vendor cannot choose which records a check is recomputed from.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cached_property, lru_cache
from pathlib import Path

from dayzero.checks import CheckResult
from dayzero.checks.calibration import hosts_cpu_kind
from dayzero.checks.sweep import check_name as sweep_check_name
from dayzero.run import plan, plans, records
from dayzero.run.phases import mark_contended
from dayzero.run.plan import (
    AccuracyPlan,
    MeasurementPlan,
    ProbePlan,
    ScorePlan,
    SpeculativePlan,
    ToolCallPlan,
)
from dayzero.run.plans import Kind, Planned, Unrecomputable, accuracy, floors, speculative, sweeps, tool_calls
from dayzero.run.sweeps import SweepPlan, SweepPoint, processes_of
from dayzero.spec.card import Floor, ModelCard
from dayzero.spec.goldens import Golden, load_golden
from dayzero.spec.matrix import Cell, Matrix
from dayzero.spec.recipe import parallel_accelerators
from dayzero.spec.workloads import suites_dir
from dayzero.submission.findings import short


def known_cell(matrix: Matrix, cell_id) -> Cell | None:
    try:
        return matrix.cell(cell_id)
    except (KeyError, TypeError):
        return None


def accelerators(doc: dict) -> int:
    counts = [h.get("accelerators") for h in doc["hosts"]]
    if not counts or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in counts):
        raise Unrecomputable(
            "", f"hosts {short(doc['hosts'])} do not say how many accelerators served the cell"
        )
    return sum(counts)


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
    def plans(self) -> tuple[Planned, ...]:
        """The cell's plans as the run made them (`run.plans.of`), files read once per view."""
        return tuple(plans.of(self.card, self.cell, self.suites))

    def units(self, kind: Kind) -> tuple:
        return tuple(p.unit for p in self.plans if p.kind is kind)

    @property
    def measurements(self) -> tuple[MeasurementPlan, ...]:
        """As the run measured them: one per group of floors."""
        return self.units(floors.KIND)

    def measurement_of(self, floor: Floor) -> MeasurementPlan:
        return next(m for m in self.measurements if floor in m.floors)

    def floors(self) -> list[Floor]:
        return [floor for m in self.measurements for floor in m.floors]

    @cached_property
    def golden(self) -> Golden | None:
        return load_golden(self.goldens_dir, self.probes.golden_cell or self.cell.id)

    @property
    def gates(self) -> tuple[AccuracyPlan, ...]:
        return self.units(accuracy.KIND)

    @property
    def speculative(self) -> tuple[SpeculativePlan, ...]:
        return self.units(speculative.KIND)

    @property
    def tool_calls(self) -> tuple[ToolCallPlan, ...]:
        return self.units(tool_calls.KIND)

    @property
    def sweeps(self) -> tuple[SweepPlan, ...]:
        return self.units(sweeps.KIND)

    @cached_property
    def sweep_points(self) -> tuple[SweepPoint, ...]:
        """Every sweep point whose records the evidence names: the card's loads and the searched
        ones (which loads the search had to measure is the recomputation's business), each with
        the extra repetitions an inconclusive floor added where the evidence names them."""
        named = set(self.doc.get("records", []))
        run_id = self.doc["run"]["id"]
        out = []
        for sp in self.sweeps:
            claimed = next(
                (c for c in self.doc["checks"] if c["name"] == sweep_check_name(sp.sweep)),
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
                if records.path(run_id, self.cell.id, point.phase(0)) not in named:
                    continue
                runs, most = point.runs, point.runs + point.protocol.extra_repetitions
                while runs < most and records.path(run_id, self.cell.id, point.phase(runs)) in named:
                    runs += 1
                out.append(replace(point, repetitions=runs))
        return tuple(out)

    @property
    def loads(self) -> tuple[MeasurementPlan, ...]:
        """Every measured load: the floors' measurements, then the sweep points."""
        return (*self.measurements, *self.sweep_points)


@dataclass(frozen=True)
class Recorded:
    """A bundle's raw records as the plans' source of answers (`run.plans.Source`): each phase
    read under the name the run wrote it, then judged by its plan as the run judged it."""

    view: CellView
    recording: bool = False

    @property
    def card(self) -> ModelCard:
        return self.view.card

    @property
    def cell(self) -> Cell:
        return self.view.cell

    @property
    def golden(self) -> Golden | None:
        return self.view.golden  # the maintainers', never the bundle's

    @property
    def recipe_digest(self) -> str:
        return self.view.doc["recipe"]["digest"]

    @property
    def engine_version(self) -> str:
        return self.view.doc["engine"]["version"]

    @property
    def accelerators(self) -> int:
        """What the run divided its per-accelerator figures by (`run.cell`): the mode's parallel
        size where it states one (a share of a host), else every accelerator of its hosts."""
        return parallel_accelerators(self.card, self.cell) or accelerators(self.view.doc)

    @property
    def cpu_kind(self) -> str:
        return hosts_cpu_kind((h.get("facts") or {}).get("machine") for h in self.view.doc["hosts"])

    def exchange(self, phase, concurrency, requests, *, action="load", timeout=0.0, prepare=None):
        rel, answer = self.view.answer(phase)
        return answer, self.view.metrics.get(rel)

    def repetitions(self, m: MeasurementPlan):
        answers = [self.view.answer(phase) for phase in m.phases()]
        # repetitions a floor's inconclusive interval added (`run.phases.until_conclusive`), up
        # to the protocol's budget: those the evidence names
        named = set(self.view.doc.get("records", []))
        run_id, cell_id = self.view.doc["run"]["id"], self.view.cell.id
        for rep in range(m.runs, m.runs + m.protocol.extra_repetitions):
            if records.path(run_id, cell_id, m.phase(rep)) not in named:
                break
            answers.append(self.view.answer(m.phase(rep)))
        processes = processes_of(m, answers)  # the run grew them while saturated: as recorded
        return answers, processes, [self.view.metrics.get(rel) for rel, _ in answers]

    def sweep(self, sp: SweepPlan):
        """The run's walk over the bundle's records: a point without records is one the run's
        budget did not reach."""
        view = self.view
        run_id, cell_id = view.doc["run"]["id"], view.cell.id

        def measure(p: SweepPoint):
            named = view.doc.get("records", [])
            # the last: a repetition an inconclusive floor added, there where the run measured it
            last = p.runs - 1 if p.runs > sp.sweep.repetitions else 0
            if any(records.path(run_id, cell_id, p.phase(i)) not in named for i in (0, last)):
                return None
            return [view.answer(phase) for phase in p.phases()]

        return measure, view.metrics.get

    def contended(self, result: CheckResult, phases) -> CheckResult:
        """The evidence's own marks of its phases (the host-load samples are not in a bundle),
        under the run's rule: a mark can only take a verdict away (a missed floor becomes a lab
        fault, a broken cell, never a pass), so a stated one is safe to apply."""
        stated = next((c for c in self.view.doc["checks"] if c.get("name") == result.name), None)
        marks = ((stated or {}).get("details") or {}).get("contended") or {}
        ours = set(phases)
        return mark_contended(result, {p: why for p, why in marks.items() if p in ours})

    def step(self, title: str):
        return contextlib.nullcontext()

    def say(self, text: str) -> None:
        pass

    def attach(self, name: str, data) -> None:
        pass


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
