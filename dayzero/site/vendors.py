"""Vendor submissions of a cell with their reproduction status, as the acceptance table words it.

An accepted vendor run rests on the vendor's word until a second party (a lab, another vendor)
has passed evidence of the same recipe on the same kind within the card's tolerance
(`report.reproduction.status`, the acceptance table's rule). The status needs the vendor's
evidence document, the others' (read newest first, at most `LOOKED_AT`) and the matrix (the
floors' directions and the tolerance): without one of them it is "not judged", and says why.
Whose it is is its origin (the vendor and, where its evidence is here, its bundle).
"""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from dayzero.history.points import facts
from dayzero.report import reproduction

LOOKED_AT = 30  # other parties' passed runs read for a reproduction, newest first


@dataclass(frozen=True)
class Submission:
    run: Mapping  # the store's run (with its cell)
    status: str  # reproduction.VENDOR | reproduction.REPRODUCED | "not judged"
    why: str = ""  # why not judged
    origin: str = ""  # whose (`reproduction.origin`), with its bundle where its evidence is here
    engine: str = ""  # the engine and version it states; "" where its evidence is not here


def submissions(
    cell: str, runs: Sequence[Mapping], read: Callable[[str], dict | None], matrix=None
) -> list[Submission]:
    """Each vendor's newest accepted run of the cell (the store's runs, oldest first), newest
    first; `read` gives a run's evidence document from its path, or None where it is not here."""
    newest: dict[str, Mapping] = {}
    for run in runs:
        if run["vendor"]:
            newest[run["vendor"]] = run
    known = matrix is not None and any(c.id == cell for c in matrix.cells)
    out = []
    for run in sorted(newest.values(), key=lambda r: r["finished"], reverse=True):
        doc = read(run["path"])
        # whose by the store (a bundle's kept copy says `source: dayzero`), its bundle by the document
        said = {
            "origin": reproduction.origin(run["vendor"], reproduction.bundle_of(doc) if doc else ""),
            "engine": facts(doc)["engine"] if doc else "",
        }
        if doc is None:
            out.append(Submission(run, "not judged", f"its evidence is not here ({run['path']})", **said))
        elif not known:
            out.append(Submission(run, "not judged", "the cell is not in this matrix", **said))
        else:
            others = [r for r in reversed(runs) if r["verdict"] == "passed" and r["vendor"] != run["vendor"]]
            docs = (d for d in map(read, (r["path"] for r in others[:LOOKED_AT])) if d is not None)
            out.append(Submission(run, reproduction.status(matrix, doc, docs), **said))
    return out


WORDED = {reproduction.VENDOR: "Verified (vendor)", reproduction.REPRODUCED: "Verified (reproduced)"}


def reproduced(s: Submission) -> str:
    """A submission's status as a badge (the acceptance table's words), why where not judged."""
    why = f" ({html.escape(s.why)})" if s.why else ""
    said = html.escape(WORDED.get(s.status, s.status))
    return f'<span class="{html.escape(s.status.replace(" ", "-"))}">{said}</span>{why}'
