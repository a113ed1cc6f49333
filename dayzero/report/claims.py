"""The "Claims" table: every published claim, per cell that answers to it, from evidence only.

One row per (cell, claim) of the latest evidence: the published value and unit, the measured
value, their ratio, reproduced / not reproduced / not measured, and why. The acceptance table
(Markdown and HTML) and a cell's Allure story print these rows, each with whose run answered
(`lab`, or a vendor and its bundle: `report.reproduction.origin`); values a vendor's evidence
holds pass `dayzero.escape` where they are printed.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from dayzero.checks.claims import WORDS
from dayzero.report import reproduction

UNITS = {
    "per_accelerator": "tok/s per accelerator",
    "per_user": "tok/s per user",
    "per_node": "tok/s per node",
}
HEADER = ("cell", "claim", "published", "measured", "ratio", "status", "why", "whose")


@dataclass(frozen=True)
class ClaimRow:
    cell: str
    claim: str
    published: str
    measured: str
    ratio: str
    status: str  # reproduced | not reproduced | not measured
    why: str
    whose: str = "lab"  # the answering run's origin (issue 42, item 2)

    def cells(self) -> tuple[str, ...]:
        return (
            self.cell,
            self.claim,
            self.published,
            self.measured,
            self.ratio,
            self.status,
            self.why,
            self.whose,
        )


def published(doc: Mapping, ids: Collection[str]) -> list[Mapping]:
    """The document's answers to claims the card publishes for its cell (`ids`): an answer to
    any other (a vendor's own, in evidence accepted before the checker recomputed answers) is
    shown nowhere (issue 42, item 2)."""
    return [e for e in doc.get("claims") or () if isinstance(e, Mapping) and e.get("claim") in ids]


def rows_of(doc: Mapping, ids: Collection[str] | None = None) -> list[ClaimRow]:
    """The claims one evidence document answers (of `ids` only, where given)."""
    out = []
    for e in doc.get("claims") or () if ids is None else published(doc, ids):
        unit = UNITS.get(e["unit"], e["unit"])
        at = f" at c{e['concurrency']}" if e.get("concurrency") else ""
        out.append(
            ClaimRow(
                cell=doc["cell"],
                claim=e["claim"],
                published=f"{e['published']:g} {unit} ({e['workload']}{at})",
                measured="-" if e.get("measured") is None else f"{e['measured']:g}",
                ratio="-" if e.get("ratio") is None else f"{e['ratio']:g}x",
                status=WORDS.get(e["status"], e["status"]),
                why=e.get("reason", ""),
                whose=reproduction.origin_of(doc),
            )
        )
    return out


def rows(docs: Iterable[Mapping]) -> list[ClaimRow]:
    return [row for doc in docs for row in rows_of(doc)]


def as_text(table: list[ClaimRow]) -> str:
    """Plain text for an Allure attachment."""
    return "\n".join(" | ".join(r.cells()) for r in table)
