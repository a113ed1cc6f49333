"""Reproduction status: whose word an accepted vendor cell rests on.

An accepted vendor cell is Verified on the vendor's word ("vendor"): a fully consistent forgery
passes every check a bundle can be held to. It is "reproduced" once a second party (the lab's
own run, or another vendor's accepted one) has passed evidence of the same recipe digest on the
same hardware kind whose every floor measurement lies within the card's tolerance
(`protocol.reproduction_tolerance`, default 10%) of the vendor's, in the floor's direction, and
that evidence is a run of its own: never the vendor's run itself, relabelled (the lab's run
re-signed by a vendor reproduces nothing: `same_run`). Who reproduced it is said (`Verdict`).
`audit` draws a seeded sample of vendor cells and says what a re-run must reproduce, each with
its origin and which of its fields rest on the vendor's word alone (`VENDORS_WORD`).
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Iterator, Mapping
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
    """Whose run it is: LAB, or the vendor whose accepted bundle it came from (never LAB for a
    vendor's document, whatever its `source` says: the checker refuses a vendor named as the lab)."""
    if not from_vendor(doc):
        return LAB
    who = (doc.get("submission") or {}).get("vendor") or doc.get("source")
    return who if isinstance(who, str) and who and who != LAB else "an unnamed vendor"


def bundle_of(doc: dict) -> str:
    """The sha256 of the accepted bundle a vendor's document came from ('' for the lab's)."""
    sha = (doc.get("submission") or {}).get("bundle_sha256") if from_vendor(doc) else ""
    return sha if isinstance(sha, str) else ""


def origin(whose: str, bundle: str = "", checked: str = "") -> str:
    """A run's origin as every report prints it: `lab`, or `acme (vendor, bundle 1a2b...)`."""
    if whose == LAB:
        return "lab"
    said = [
        "vendor",
        *([f"bundle {bundle[:16]}"] if bundle else []),
        *([f"checked {checked}"] if checked else []),
    ]
    return f"{whose} ({', '.join(said)})"


def origin_of(doc: dict) -> str:
    return origin(party(doc), bundle_of(doc))


# What a report shows of a vendor's document that the checker does not recompute from its raw
# records: bounded (dates by the harness commit and the check time, figures by `figures`, the
# engine by the card and the system description) but the vendor's own word all the same.
VENDORS_WORD = "the vendor's word"


def _timed(value) -> Iterator[str]:
    """Every non-integral number under `value`: the figures a run timed (throughputs, latencies,
    their intervals), each to its last digit."""
    if isinstance(value, dict):
        for v in value.values():
            yield from _timed(v)
    elif isinstance(value, list):
        for v in value:
            yield from _timed(v)
    elif isinstance(value, float) and math.isfinite(value) and not value.is_integer():
        yield repr(value)


def timed_figures(doc: dict) -> tuple[str, ...]:
    """A run's fingerprint in its evidence: its checks' timed figures, sorted."""
    return tuple(
        sorted(f for c in doc.get("checks") or () for f in _timed([c.get("measured"), c.get("details")]))
    )


def same_run(a: dict, b: dict) -> bool:
    """Whether two documents are one run, however relabelled: the same controller's run id, or
    the same timed figures to the last digit (two runs of a recipe never time alike, as their
    records never do: `submission.identity`; a copy always does). A run without a timed figure
    is told by its id alone."""
    ra, rb = a.get("run") or {}, b.get("run") or {}
    if ra.get("id") and (ra.get("controller"), ra.get("id")) == (rb.get("controller"), rb.get("id")):
        return True
    figures = timed_figures(a)
    return bool(figures) and figures == timed_figures(b)


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


@dataclass(frozen=True)
class Verdict:
    """An accepted vendor cell's reproduction: `reproduced` by `by` (another party's own run of
    the recipe), or `vendor` (by is None): on the vendor's word alone."""

    status: str
    by: dict | None = None

    def words(self) -> str:
        """What the table's detail says of it."""
        if self.by is None:
            return f"on {VENDORS_WORD} alone: no other party's own passed run of this recipe agrees"
        run = self.by.get("run") or {}
        return (
            f"reproduced by {origin_of(self.by)}: run {run.get('id', '?')}, "
            f"finished {run.get('finished', '?')}"
        )


def reproduced_by(matrix: Matrix, doc: dict, docs: Iterable[dict]) -> Verdict | None:
    """None for the lab's own evidence; else who reproduced the vendor's run, if anyone: a passed
    run of another party, of the same recipe on the same kind, within tolerance, and not the
    vendor's run itself (`same_run`)."""
    if not from_vendor(doc):
        return None
    ways, tol = directions(matrix, doc["cell"]), tolerance(matrix, doc["cell"])
    for other in docs:
        if (
            party(other) != party(doc)
            and other["verdict"] == "passed"
            and other["hardware"] == doc["hardware"]
            and other["recipe"]["digest"] == doc["recipe"]["digest"]
            and not same_run(doc, other)
            and agrees(doc, other, ways, tol)
        ):
            return Verdict(REPRODUCED, other)
    return Verdict(VENDOR)


def status(matrix: Matrix, doc: dict, docs: Iterable[dict]) -> str:
    """'' for the lab's own evidence; else `reproduced` or `vendor`."""
    found = reproduced_by(matrix, doc, docs)
    return "" if found is None else found.status


@dataclass(frozen=True)
class AuditItem:
    """One sampled vendor cell and what a re-run of it must show."""

    cell: str
    vendor: str
    doc: dict

    def lines(self, matrix: Matrix, docs: Iterable[dict] = ()) -> list[str]:
        """The cell, its origin, what rests on the vendor's word, who reproduced it among `docs`
        (every evidence document of the reports), and each floor a re-run must meet."""
        d, tol = self.doc, tolerance(matrix, self.cell)
        ways = directions(matrix, self.cell)
        found = reproduced_by(matrix, d, docs)
        out = [
            f"- {self.cell} from {origin_of(d)}: recipe {d['recipe']['digest']}, engine "
            f"{d['engine']['name']} {d['engine']['version']}, bundle sha256 {bundle_of(d) or '?'}",
            f"    {VENDORS_WORD}: run {d['run']['id']}, finished {d['run']['finished']}, engine version "
            f"{d['engine']['version']} (bounded, not recomputed); the floors below are recomputed "
            "from the raw records",
            f"    reproduction: {found.words() if found else 'the lab run'}",
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
