"""Completeness: every claimed cell exists, has one evidence document and every required test.

The required tests come from the maintainers' matrix (probes, goldens, floors, compliance,
accuracy gates, speculative acceptance), not from the bundle: a vendor cannot drop a test by
leaving it out of its own evidence.
"""

from __future__ import annotations

from collections import Counter

from dayzero.submission.bundle import Reference, Subject
from dayzero.submission.cellview import known_cell
from dayzero.submission.findings import Finding, short
from dayzero.submission.recompute import recompute_all


def claimed_cells(s: Subject) -> list[str]:
    return list((s.submission or {}).get("cells", []))


def check_cells_known(s: Subject, ref: Reference) -> list[Finding]:
    out = []
    for cell_id in claimed_cells(s):
        cell = known_cell(ref.matrix, cell_id)
        if cell is None:
            out.append(
                Finding("submission.json", "completeness.cell", short(cell_id), "a cell of the matrix")
            )
        elif not cell.supported:
            out.append(
                Finding(
                    "submission.json",
                    "completeness.cell",
                    f"{cell_id} (unsupported: {cell.reason})",
                    "a supported cell",
                )
            )
    return out


def check_one_evidence_per_cell(s: Subject, ref: Reference) -> list[Finding]:
    out = []
    claimed = set(claimed_cells(s))
    for cell_id in sorted(claimed):
        found = s.evidence_for(cell_id)
        if len(found) != 1:
            out.append(
                Finding(
                    "evidence/",
                    "completeness.evidence",
                    f"{len(found)} evidence document(s) for {cell_id}",
                    "exactly 1",
                )
            )
    if s.submission is not None:
        for name, doc in sorted(s.evidence.items()):
            if doc["cell"] not in claimed:
                out.append(
                    Finding(
                        name, "completeness.unclaimed", f"evidence for {short(doc['cell'])}", "a claimed cell"
                    )
                )
    return out


def check_required_tests(s: Subject, ref: Reference) -> list[Finding]:
    out = []
    for name, r in recompute_all(s, ref).items():
        names = Counter(c["name"] for c in r.view.doc["checks"])
        for required in r.required:
            if names[required] == 0:
                out.append(Finding(name, "completeness.test", "absent", f"check {required}"))
        for check_name, n in sorted(names.items()):
            if n > 1:
                out.append(
                    Finding(name, "completeness.duplicate", f"{n} checks named {short(check_name)}", "one")
                )
    return out


def check_run_completed(s: Subject, ref: Reference) -> list[Finding]:
    """A broken run (lab fault) is not a result; resubmit a run that finished."""
    return [
        Finding(
            name, "completeness.run", f"verdict broken ({short(doc.get('error', ''))})", "a run that finished"
        )
        for name, doc in sorted(s.evidence.items())
        if doc["verdict"] == "broken" or doc.get("error")
    ]


def check_files_present(s: Subject, ref: Reference) -> list[Finding]:
    """Raw records and logs the evidence names are in the bundle and not empty."""
    out = []
    for name, doc in sorted(s.evidence.items()):
        if not doc.get("records"):
            out.append(Finding(name, "completeness.records", "no raw records", "raw per-request records"))
        if not doc.get("logs"):
            out.append(Finding(name, "completeness.logs", "no server logs", "a server log per launch"))
        for rel in doc.get("records", []) + doc.get("logs", []):
            if not s.bundle.has(rel):
                out.append(Finding(name, "completeness.file", f"{short(rel, 160)} absent", "in the bundle"))
            elif s.bundle.path(rel).stat().st_size == 0:
                out.append(Finding(rel, "completeness.file", "an empty file", "the file as the run wrote it"))
    return out


CHECKS = (
    check_cells_known,
    check_one_evidence_per_cell,
    check_required_tests,
    check_run_completed,
    check_files_present,
)
