"""Reproduction status: whose word an accepted vendor cell rests on.

An accepted vendor cell is Verified on the vendor's word ("vendor"): a fully consistent forgery
passes every check a bundle can be held to. It is "reproduced" once a second party (the lab's
own run, or another vendor's accepted one) has passed evidence of the same recipe digest on the
same hardware kind whose every floor measurement lies within the card's tolerance
(`protocol.reproduction_tolerance`, default 10%) of the vendor's, in the floor's direction.
`audit` draws a seeded sample of vendor cells and says what a re-run must reproduce.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from dayzero.checks import family_of
from dayzero.clock import moment
from dayzero.spec.card import floors_for
from dayzero.spec.matrix import Matrix

VENDOR, REPRODUCED = "vendor", "reproduced"
LAB = "dayzero"


def from_vendor(doc: dict) -> bool:
    """Evidence accepted from a vendor bundle (it says what the vendor ran, not what the lab runs)."""
    return "submission" in doc or doc.get("source", LAB) != LAB


def party(doc: dict) -> str:
    return doc.get("source", LAB) if from_vendor(doc) else LAB


def _measured(doc: dict) -> dict[str, float]:
    return {
        c["name"]: c["measured"]
        for c in doc["checks"]
        if family_of(c) == "floor"
        and isinstance(c.get("measured"), int | float)
        and not isinstance(c.get("measured"), bool)
    }


def agrees(claimed: dict, other: dict, directions: Mapping[str, str], tolerance: float) -> bool:
    """Every floor the vendor measured, measured by the other party within `tolerance`: no less
    of what a floor wants more of, no more of what it wants less of."""
    mine, theirs = _measured(claimed), _measured(other)
    for name, value in mine.items():
        got = theirs.get(name)
        if got is None:
            return False
        if directions.get(name, "min") == "max":
            if got > value * (1 + tolerance):
                return False
        elif got < value * (1 - tolerance):
            return False
    return True


def directions(matrix: Matrix, cell_id: str) -> dict[str, str]:
    cell = matrix.cell(cell_id)
    return {f.name: f.direction for f in floors_for(matrix.card(cell), cell)}


def tolerance(matrix: Matrix, cell_id: str) -> float:
    return matrix.card(matrix.cell(cell_id)).protocol.reproduction_tolerance


def status(matrix: Matrix, doc: dict, docs: Iterable[dict]) -> str:
    """'' for the lab's own evidence; else `reproduced` or `vendor`."""
    if not from_vendor(doc):
        return ""
    ways, tol = directions(matrix, doc["cell"]), tolerance(matrix, doc["cell"])
    for other in docs:
        if (
            party(other) != party(doc)
            and other["verdict"] == "passed"
            and other["hardware"] == doc["hardware"]
            and other["recipe"]["digest"] == doc["recipe"]["digest"]
            and agrees(doc, other, ways, tol)
        ):
            return REPRODUCED
    return VENDOR


@dataclass(frozen=True)
class AuditItem:
    """One sampled vendor cell and what a re-run of it must show."""

    cell: str
    vendor: str
    doc: dict

    def lines(self, matrix: Matrix) -> list[str]:
        d, tol = self.doc, tolerance(matrix, self.cell)
        ways = directions(matrix, self.cell)
        out = [
            f"- {self.cell} from {self.vendor} (run {d['run']['id']}, finished {d['run']['finished']}): "
            f"recipe {d['recipe']['digest']}, engine {d['engine']['name']} {d['engine']['version']}, "
            f"bundle sha256 {(d.get('submission') or {}).get('bundle_sha256', '?')}"
        ]
        for name, value in sorted(_measured(d).items()):
            if ways.get(name, "min") == "max":
                out.append(f"    {name}: <= {value * (1 + tol):.6g} (vendor {value:g}, +{tol:.0%})")
            else:
                out.append(f"    {name}: >= {value * (1 - tol):.6g} (vendor {value:g}, -{tol:.0%})")
        return out


def audit(docs: Iterable[dict], sample: int, seed: int) -> list[AuditItem]:
    """A seeded random sample of the accepted vendor cells (their latest evidence each)."""
    latest: dict[tuple[str, str], dict] = {}
    for doc in docs:
        if from_vendor(doc) and doc["verdict"] == "passed":
            key = (doc["cell"], party(doc))
            # by instant, as the acceptance table orders them: "+02:00" text can sort after "Z"
            if key not in latest or moment(doc["run"]["finished"]) > moment(latest[key]["run"]["finished"]):
                latest[key] = doc
    items = [AuditItem(cell, vendor, doc) for (cell, vendor), doc in sorted(latest.items())]
    return sorted(
        random.Random(seed).sample(items, min(sample, len(items))), key=lambda i: (i.cell, i.vendor)
    )
