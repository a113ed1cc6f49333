"""Whose run it is, after acceptance (issue 42, item 3): the lab's own runs are never a vendor's,
and a vendor's never a lab's, in the replay index and the history store.

The vendor is the synthetic lab of tests/submission_corpus (fast); the lab's reports are a folder
beside it. The same checks on the main job's real bundle: tests/test_submission_e2e.py.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from dayzero import evidence
from dayzero.escape import escape
from dayzero.history.store import open_store
from dayzero.report import benchcard
from dayzero.report import claims as claims_table
from dayzero.report.acceptance import write_acceptance
from dayzero.submission.accept import accept
from dayzero.submission.bundle import SUBMISSION
from dayzero.submission.check import check_bundle

from .submission_corpus.hostile import UNPUBLISHED_CLAIM
from .submission_corpus.lab import VENDOR, Lab, make_lab
from .submission_corpus.tarkit import edit_json, resign, write_allowed_signers, write_members


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> Lab:
    return make_lab(tmp_path_factory.mktemp("vendor-lab"))


def test_the_labs_own_run_resigned_by_a_vendor_is_refused_as_the_labs(lab, tmp_path):
    """The lab publishes its reports; a vendor packs that very run and signs it as its own."""
    reports = tmp_path / "reports"
    shutil.copytree(lab.reports, reports)  # the lab's own run, records and all
    report, written = accept(lab.bundle, lab.ref, reports)
    assert not report.accepted and written == []
    replays = [f for f in report.findings if f.requirement == "identity.replay"]
    assert replays and all("the lab's own run of" in f.found for f in replays), report.lines()
    assert not (reports / "submissions").exists()


def lab_nights(lab_reports: Path, reports: Path) -> None:
    """The lab's nights under the very controller and run ids the vendor's bundle states (a
    vendor's choice), as the lab's reports keep them (their records not at hand: no replay)."""
    for path in sorted((lab_reports / evidence.EVIDENCE_DIR).glob("*.json")):
        doc = json.loads(path.read_text())
        doc["run"]["lab"] = "nightly"
        (reports / evidence.EVIDENCE_DIR).mkdir(parents=True, exist_ok=True)
        (reports / evidence.EVIDENCE_DIR / path.name).write_text(json.dumps(doc))


def _series(found: dict, lab: str) -> dict:
    return {
        k: [(p.run_id, p.finished, p.value, p.vendor) for p in pts]
        for k, (_, pts) in found.items()
        if k[0] == lab
    }


def accepted_beside_the_labs_nights(lab: Lab, lab_reports: Path, tmp_path: Path) -> list[str]:
    """Accept the vendor's bundle into reports that hold the lab's nights of the same run ids,
    ingest the reports again: the lab's nights unchanged, the vendor's values in their own
    series, marked. Returns the cells checked."""
    reports, history = tmp_path / "reports", tmp_path / "history.sqlite"
    lab_nights(lab_reports, reports)
    with open_store(history) as store:
        store.ingest_folder(reports)
        cells = store.cells()
        before = {cell: _series(store.cell_series(cell), "nightly") for cell in cells}
        runs_before = {cell: store.runs(cell) for cell in cells}
    assert cells and any(before.values())

    report, written = accept(lab.bundle, lab.ref, reports)
    assert report.accepted and written, report.lines()
    assert sorted(
        (reports / "submissions" / VENDOR).rglob("evidence/*.json")
    )  # kept copies: `source: dayzero`
    ours = {json.loads(p.read_text())["cell"] for p in written}

    with open_store(history) as store:
        store.ingest_folder(reports)  # the lab's nights, the accepted copies, the bundle's kept ones
        for cell in cells:
            assert [r for r in store.runs(cell) if r["vendor"] is None] == runs_before[cell]
            both = store.cell_series(cell, vendor=True)
            assert _series(store.cell_series(cell), "nightly") == before[cell] == _series(both, "nightly")
            theirs = [(r["vendor"], r["source"], r["lab"]) for r in store.runs(cell) if r["vendor"]]
            # one vendor run per cell it submitted (its accepted and its kept copy are one)
            assert theirs == ([(VENDOR, VENDOR, f"vendor:{VENDOR}")] if cell in ours else []), cell
            vendor_series = _series(both, f"vendor:{VENDOR}")
            assert bool(vendor_series) == (cell in ours)
            assert all(p[3] == VENDOR for pts in vendor_series.values() for p in pts)
    return sorted(ours)


def test_an_accepted_vendor_run_leaves_the_labs_nights_and_has_a_series_of_its_own(lab, tmp_path):
    assert accepted_beside_the_labs_nights(lab, lab.reports, tmp_path)


def test_the_card_says_whose_points_and_whose_cost(lab, tmp_path):
    reports = tmp_path / "reports"
    report, written = accept(lab.bundle, lab.ref, reports)
    assert report.accepted, report.lines()
    cards = [c for c in benchcard.build(lab.matrix, reports) if c.points]
    assert cards
    for card in cards:
        assert {p.whose for p in card.points} == {VENDOR}
        assert all(p.origin == f"{VENDOR} (vendor, bundle {report.sha256[:16]})" for p in card.points)
        markdown = benchcard.to_markdown(card, card.kind)
        assert f"points: accepted vendor submissions, on the vendor's word: {VENDOR} (vendor" in markdown
        assert "| whose |" in markdown
        assert re.search(f"{VENDOR}(&#x27;|&#39;|')s \\(vendor\\)", benchcard.pareto_svg(card))  # its legend
        line = benchcard.frontier_cost_line(card)
        assert f"the frontier of {VENDOR} (vendor, bundle {report.sha256[:16]}): " in line, line


def test_the_table_shows_no_answer_to_a_claim_the_card_does_not_publish(lab, tmp_path):
    reports = tmp_path / "reports"
    report, written = accept(lab.bundle, lab.ref, reports)
    assert report.accepted, report.lines()
    # evidence accepted before answers were recomputed, with an answer of the vendor's own
    for path in written:
        doc = json.loads(path.read_text())
        doc["claims"] = [UNPUBLISHED_CLAIM]
        path.write_text(json.dumps(doc))
    table = write_acceptance(lab.matrix, reports).read_text()
    assert "vendor-fastest" not in table and "Verified (vendor)" in table


def test_a_vendor_named_as_the_lab_is_refused(lab, tmp_path):
    """A key the maintainers listed under the lab's own name: its runs would read as the lab's."""
    allowed = write_allowed_signers(tmp_path / "allowed", [("dayzero", lab.key)])
    members = edit_json(lab.members(), SUBMISSION, lambda doc: doc.update(vendor="dayzero"))
    bundle = write_members(tmp_path / "as-the-lab.tar.gz", resign(members, lab.key, "dayzero", tmp_path))
    report = check_bundle(bundle, replace(lab.ref, allowed_signers=allowed))
    assert not report.accepted
    assert "provenance.vendor" in {f.requirement for f in report.findings}, report.lines()


def test_every_table_says_whose_run_each_row_is(lab, tmp_path):
    """Issue 42 item 2: the acceptance table's rows, its speculative acceptance and claims rows
    name the run's origin: the vendor and its bundle (and the check's day in the source)."""
    reports = tmp_path / "reports"
    report, written = accept(lab.bundle, lab.ref, reports)
    assert report.accepted, report.lines()
    origin = f"{VENDOR} (vendor, bundle {report.sha256[:16]})"
    table = write_acceptance(lab.matrix, reports).read_text()
    for path in written:
        cell = json.loads(path.read_text())["cell"]
        row = next(line for line in table.splitlines() if f"`{cell}`" in line)
        assert f"| {VENDOR} (vendor, bundle {report.sha256[:16]}, checked {report.checked[:10]}) |" in row
        assert "the vendor's word: run date and engine version" in row
    spec = table.split("## Speculative acceptance", 1)[1]
    rows = [line for line in spec.splitlines() if line.startswith("| cpu")]
    assert rows and all(line.endswith(f"| {escape(origin, 'markdown')} |") for line in rows), rows
    doc = json.loads(written[0].read_text())
    doc["claims"] = [UNPUBLISHED_CLAIM]
    assert {r.whose for r in claims_table.rows_of(doc)} == {origin}
