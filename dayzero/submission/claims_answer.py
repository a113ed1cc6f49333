"""A bundle's answers to the card's published claims, recomputed in full (issue 42, item 2).

Evidence keeps under `claims` how its run answers each claim the card publishes for its cell
(`checks.claims`), and the acceptance table prints them ("reproduced", "not reproduced"). Until
recomputed they are the vendor's word: the checker answers the card's claims for the cell
(`spec.card.claims_for`) from the evidence, whose checks the recomputation holds to the raw
records (`recompute`), and compares the two whole. An answer to a claim the card does not
publish, an answer left out, or any field of one that differs is a finding.
"""

from __future__ import annotations

import json

from dayzero.checks.claims import evaluate_all
from dayzero.spec.card import claims_for
from dayzero.submission.bundle import Reference, Subject
from dayzero.submission.findings import Finding, short

REQUIREMENT = "claims.answer"


def _plain(value):
    return json.loads(json.dumps(value, default=str))


def _said(entry) -> str:
    if not isinstance(entry, dict):
        return short(entry)
    measured = "" if entry.get("measured") is None else f", measured {entry['measured']}"
    return f"{entry.get('claim', '?')}: {entry.get('status', '?')}{measured}"


def problems(stated: list, expected: list[dict]) -> list[tuple[str, str]]:
    """(found, expected) for every way the stated answers are not the recomputed ones."""
    if stated == expected:
        return []
    mine = {e.get("claim"): e for e in stated if isinstance(e, dict)}
    theirs = {e["claim"]: e for e in expected}
    out = []
    for claim, entry in mine.items():
        if claim not in theirs:
            out.append((f"claims: {_said(entry)}", "no such claim published for this cell (the card's)"))
        elif entry != (want := theirs[claim]):
            fields = ", ".join(sorted(k for k in entry.keys() | want.keys() if entry.get(k) != want.get(k)))
            out.append((f"claims: {_said(entry)} ({fields})", f"{_said(want)} recomputed"))
    for claim, entry in theirs.items():
        if claim not in mine:
            out.append((f"claims: no answer to {claim}", f"{_said(entry)} recomputed"))
    return out or [(f"claims: {short(stated)}", f"{short(expected)} recomputed")]  # order, twice


def check_claims_answered(s: Subject, ref: Reference) -> list[Finding]:
    out = []
    for name, doc in sorted(s.evidence.items()):
        try:
            cell = ref.matrix.cell(doc["cell"])
        except KeyError:
            continue  # a cell the matrix lacks: completeness names it
        expected = _plain(evaluate_all(claims_for(ref.matrix.card(cell), cell), doc))
        stated = doc.get("claims") or []
        if not isinstance(stated, list):
            stated = [stated]
        out += [Finding(name, REQUIREMENT, found, want) for found, want in problems(stated, expected)]
    return out


CHECKS = (check_claims_answered,)
