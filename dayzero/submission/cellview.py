"""What the maintainers' matrix expects of one evidence document, and where its raw records are.

The expected checks and the raw-record files each one reads are derived from the matrix, the
protocol and the phase names the harness writes (`dayzero.run.phases`), never from the bundle's own
claims: a vendor cannot choose which records a check is recomputed from.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path

from dayzero.checks import CheckResult
from dayzero.checks.performance import phase_name
from dayzero.evidence import slug
from dayzero.spec.card import (
    AcceptanceRule,
    AccuracyGate,
    Floor,
    ModelCard,
    Protocol,
    floors_for,
    gates_for,
    rules_for,
)
from dayzero.spec.goldens import Golden, load_golden
from dayzero.spec.matrix import Cell, Matrix
from dayzero.spec.workloads import Workload, resolve, suites_dir

PROBES = "probes"


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
    _workloads: dict = field(default_factory=dict, repr=False)

    @property
    def records_dir(self) -> str:
        return f"runs/{self.doc['run']['id']}/{slug(self.cell.id)}/records/"

    def file(self, phase: str) -> str:
        return f"{self.records_dir}{phase}.json"

    def answer(self, phase: str) -> tuple[str, dict]:
        rel = self.file(phase)
        if rel not in self.doc.get("records", []):
            raise Unrecomputable(self.name, f"no raw records {rel} named in the evidence")
        if rel not in self.answers:
            raise Unrecomputable(rel, "raw records absent or not valid")
        return rel, self.answers[rel]

    @cached_property
    def protocol(self) -> Protocol:
        return self.card.protocol

    def floors(self) -> list[Floor]:
        return floors_for(self.card, self.cell)

    def workload(self, name: str, max_tokens: int = 64) -> Workload:
        key = (name, max_tokens)
        if key not in self._workloads:  # YAML and JSON lines: read once per view
            self._workloads[key] = resolve(self.card, name, self.suites / "workloads", max_tokens)
        return self._workloads[key]

    @cached_property
    def golden(self) -> Golden | None:
        return load_golden(self.goldens_dir, self.cell.id)

    def floor_workload(self, floor: Floor) -> Workload:
        """As `phases.run_performance` resolves it: the default workload takes the floor's max_tokens."""
        return self.workload(floor.workload, floor.max_tokens if floor.workload == "default" else 64)

    def repetitions(self, floor: Floor) -> int:
        return floor.repetitions or self.protocol.repetitions

    def floor_phases(self, floor: Floor) -> list[str]:
        return [phase_name(floor.workload, floor.concurrency, rep) for rep in range(self.repetitions(floor))]

    def gates(self) -> list[AccuracyGate]:
        return gates_for(self.card, self.cell)

    def speculative(self) -> list[tuple[AcceptanceRule, str]]:
        return [(rule, name) for rule in rules_for(self.card, self.cell) for name in rule.workloads]


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
        out.append(CellView(name, doc, cell, ref.matrix.card(cell), answers, suites, Path(ref.goldens_dir)))
    return out
