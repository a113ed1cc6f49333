"""The "Speculative acceptance" table: hardware x workload -> accepted length, from evidence only.

It answers the readers' question "how much does the draft's accepted length differ between code
and prose" on the hardware it is about: one row per cell of the latest evidence that measured
speculative acceptance (`speculative:accept_length@<workload>` checks), one column per workload
(its tag: code, prose). A workload whose counters could not be read says so ("unreadable"): the
check failed and the cell is not Verified. The acceptance table (Markdown and HTML) prints it,
each row with whose run it is (`lab`, or a vendor and its bundle).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from dayzero.report import reproduction

PREFIX = "speculative:accept_length@"
UNREADABLE = "unreadable"


@dataclass(frozen=True)
class Accepted:
    """One workload's accepted length in one cell's evidence."""

    cell: str
    hardware: str
    workload: str
    tag: str
    length: str  # "3.412", or "unreadable" where the counters could not be read
    verdict: str
    whose: str = "lab"  # the run's origin (`reproduction.origin`)


def accepted_of(doc: Mapping) -> list[Accepted]:
    out = []
    for check in doc.get("checks") or ():
        if not check["name"].startswith(PREFIX):
            continue
        details = check.get("details") or {}
        unread = "could not be read" in check.get("message", "")
        measured = check.get("measured")
        length = UNREADABLE if unread or measured is None else f"{measured:.3f}"
        workload = check["name"].removeprefix(PREFIX)
        out.append(
            Accepted(
                doc["cell"],
                doc["hardware"],
                workload,
                details.get("tag") or workload,
                length,
                check["verdict"],
                reproduction.origin_of(doc),
            )
        )
    return out


def columns(rows: Iterable[Accepted]) -> list[tuple[str, str]]:
    """(workload, tag) in first-seen order: the table's workload columns."""
    seen: list[tuple[str, str]] = []
    for r in rows:
        if (r.workload, r.tag) not in seen:
            seen.append((r.workload, r.tag))
    return seen


def table(rows: Iterable[Accepted]) -> tuple[list[str], list[list[str]]]:
    """Header and body: hardware, cell, then the accepted length per workload ("-": not run)."""
    rows = list(rows)
    cols = columns(rows)
    by_cell: dict[str, dict[str, Accepted]] = {}
    for r in rows:
        by_cell.setdefault(r.cell, {})[r.workload] = r
    header = ["hardware", "cell", *(f"{w} ({t})" for w, t in cols), "whose"]
    body = []
    for cell, got in by_cell.items():
        first = next(iter(got.values()))
        body.append(
            [first.hardware, cell, *(got[w].length if w in got else "-" for w, _ in cols), first.whose]
        )
    return header, body
