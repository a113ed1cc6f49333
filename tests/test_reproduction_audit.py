"""`submission audit` picks each vendor cell's latest run by instant, as the acceptance table does
(issue 42, item 3): a date's text order is not its time order once offsets differ. A vendor's
run is Verified (reproduced) only by another party's run of its own, never by the run it is
(issue 42, item 2), and the table and the audit say whose each run is."""

from __future__ import annotations

import copy
import datetime as dt
import json
from pathlib import Path

import pytest

from dayzero import evidence
from dayzero.clock import parse_iso
from dayzero.report import acceptance, reproduction
from dayzero.report.reproduction import audit
from dayzero.spec.matrix import load_matrix

from .submission_corpus.synthetic import synthetic_run

REPO = Path(__file__).resolve().parents[1]

CELL = "smollm2-135m/cpu+llama.cpp/low_latency/baseline"


def vendor_doc(run_id: str, finished: str) -> dict:
    return {"cell": CELL, "source": "acme", "verdict": "passed", "run": {"id": run_id, "finished": finished}}


def test_the_latest_run_is_the_latest_instant_not_the_greatest_text():
    later = vendor_doc("later", "2026-12-05T23:30:00-05:00")  # 04:30 UTC on the 6th
    earlier = vendor_doc("earlier", "2026-12-06T01:00:00+00:00")
    assert earlier["run"]["finished"] > later["run"]["finished"]  # as text, the other way round
    assert parse_iso(later["run"]["finished"]) > parse_iso(earlier["run"]["finished"])
    for docs in ([later, earlier], [earlier, later]):
        (item,) = audit(docs, sample=5, seed=1)
        assert item.doc["run"]["id"] == "later"


# --- whose run reproduced whose (issue 42, item 2) ---------------------------------------------


@pytest.fixture(scope="module")
def lab_run(tmp_path_factory):
    """The lab's own run of the embedded default's cells (the corpus's synthetic run: its floors
    measured from records with real timing jitter), one passed document a cell."""
    matrix = load_matrix(REPO / "matrix")
    paths = synthetic_run(matrix, tmp_path_factory.mktemp("lab") / "reports", REPO / "suites" / "goldens")
    docs = [json.loads(p.read_text()) for p in paths]
    assert docs and all(d["verdict"] == "passed" for d in docs)
    return matrix, docs


def accepted_copy(doc: dict, vendor: str, scale: float) -> dict:
    """`doc` as accepted from `vendor`'s bundle, a little later, its floors' measurements times
    `scale` (1.0: the lab's very run, relabelled)."""
    out = copy.deepcopy(doc)
    finished = parse_iso(doc["run"]["finished"]) + dt.timedelta(seconds=30)
    out["run"].update(controller=f"{vendor}-ci", id=f"{vendor}-1", finished=finished.isoformat())
    out["source"], out["checked"] = vendor, finished.isoformat()
    out["submission"] = {"vendor": vendor, "bundle_sha256": "5" * 64, "signer": vendor, "verdict": "v.md"}
    for check in out["checks"]:
        if check["name"].startswith("floor:") and isinstance(check.get("measured"), float):
            check["measured"] = check["measured"] * scale
    return out


def table_of(matrix, tmp_path: Path, *docs: dict) -> dict:
    reports = tmp_path / "reports"
    for doc in docs:
        evidence.write(reports, doc)
    return {r.cell.id: r for r in acceptance.rows(matrix, reports)}


def test_the_labs_run_relabelled_by_a_vendor_reproduces_nothing(lab_run, tmp_path):
    """The lab's run re-signed by a vendor (accepted before the replay index knew the lab's runs)
    is the vendor's word alone, never reproduced by the very run it is; the table says whose."""
    matrix, docs = lab_run
    lab = docs[0]
    theirs = accepted_copy(lab, "acme", 1.0)
    assert reproduction.same_run(lab, theirs) and not reproduction.same_run(
        lab, accepted_copy(lab, "a", 0.99)
    )
    row = table_of(matrix, tmp_path, lab, theirs)[lab["cell"]]
    assert row.label == "Verified (vendor)", row.detail
    assert "on the vendor's word alone" in row.detail
    assert row.source == f"acme (vendor, bundle {'5' * 16}, checked {theirs['checked'][:10]})"
    assert "(the vendor's word: run date and engine version)" in row.detail


def test_a_vendors_run_reproduced_by_the_labs_own_says_by_whom(lab_run, tmp_path):
    matrix, docs = lab_run
    lab, other = docs[0], docs[1]
    theirs = accepted_copy(lab, "acme", 0.99)  # a run of its own, within the card's tolerance
    table = table_of(matrix, tmp_path, lab, theirs, other)
    row = table[lab["cell"]]
    assert row.label == "Verified (reproduced)", row.detail
    assert f"reproduced by lab: run {lab['run']['id']}, finished {lab['run']['finished']}" in row.detail
    assert table[other["cell"]].source == "lab" and "vendor's word" not in table[other["cell"]].detail


def test_the_audit_shows_each_runs_origin_what_is_the_vendors_word_and_who_reproduced_it(lab_run):
    matrix, docs = lab_run
    lab = docs[0]
    mine, copied = accepted_copy(lab, "acme", 0.99), accepted_copy(lab, "bolt", 1.0)
    items = {i.vendor: i for i in audit([lab, mine, copied], sample=5, seed=0)}
    assert sorted(items) == ["acme", "bolt"]  # the lab's own run is never drawn
    acme = "\n".join(items["acme"].lines(matrix, [lab, mine, copied]))
    assert f"from acme (vendor, bundle {'5' * 16}): recipe {lab['recipe']['digest']}" in acme
    assert f"bundle sha256 {'5' * 64}" in acme
    said = f"the vendor's word: run acme-1, finished {mine['run']['finished']}, engine version llama.cpp"
    assert said in acme
    assert f"reproduction: reproduced by lab: run {lab['run']['id']}" in acme
    bolt = "\n".join(items["bolt"].lines(matrix, [lab, mine, copied]))
    # bolt's run is the lab's relabelled: reproduced by acme's run of its own, never the lab's
    assert "reproduction: reproduced by acme (vendor, bundle" in bolt
    alone = "\n".join(items["bolt"].lines(matrix, [lab, copied]))
    assert "reproduction: on the vendor's word alone" in alone


def test_a_vendors_document_is_never_the_labs_whatever_its_source_says():
    doc = {"source": "dayzero", "submission": {"vendor": "dayzero", "bundle_sha256": "1" * 64}}
    assert reproduction.from_vendor(doc) and reproduction.party(doc) != reproduction.LAB
    assert reproduction.origin_of(doc) == f"an unnamed vendor (vendor, bundle {'1' * 16})"


def test_a_stale_vendor_row_still_says_what_is_its_word(lab_run, tmp_path):
    matrix, docs = lab_run
    theirs = accepted_copy(docs[0], "acme", 0.99)
    evidence.write(tmp_path / "reports", theirs)
    later = parse_iso(theirs["run"]["finished"]) + dt.timedelta(days=60)
    row = {r.cell.id: r for r in acceptance.rows(matrix, tmp_path / "reports", now=later)}[theirs["cell"]]
    assert row.status == "Stale" and "evidence is 60 days old" in row.detail
    assert "(the vendor's word: run date and engine version)" in row.detail, row.detail
