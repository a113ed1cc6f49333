"""Issue 23 item 6: one timestamp format, enforced by the bundle's schema, and every ordering of
times by the time they mean, never by their text.

A valid ISO 8601 basic-format date ("20261204T112943Z") sorts after every extended-format one
("2026-12-04T..."), and a time written with another offset sorts by its wall-clock digits: as
text, a vendor row could never be displaced by the lab's later runs.

Each bundle-level case is built twice (`either_lab`, tests/conftest.py): from the synthetic lab
and from the main job's real cpu run.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path

import pytest

from dayzero.clock import parse_iso
from dayzero.report.acceptance import current_engine_versions, latest_evidence
from dayzero.report.nightly import latest_by_cell
from dayzero.submission.accept import accept
from dayzero.submission.bundle import SUBMISSION
from dayzero.submission.pack import select_evidence

from .submission_corpus.hostile import Members, evidence_name, out
from .submission_corpus.lab import VENDOR, Lab, make_lab
from .submission_corpus.tarkit import edit_json, resign, write_members


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> Lab:
    return make_lab(tmp_path_factory.mktemp("vendor-lab"))


def basic(text: str) -> str:
    """The same instant in ISO 8601's basic format, UTC."""
    return dt.datetime.fromisoformat(text).astimezone(dt.UTC).strftime("%Y%m%dT%H%M%SZ")


def resigned(lab: Lab, tmp: Path, change) -> Path:
    return write_members(out(tmp, "dated"), resign(change(lab.members()), lab.key, VENDOR, tmp))


def findings(lab: Lab, bundle: Path, requirement: str, word: str) -> list:
    report = lab.check(bundle)
    assert not report.accepted, "accepted"
    hits = [f for f in report.findings if f.requirement == requirement and word in f.found]
    assert hits, "\n".join(report.lines())
    return hits


def test_parse_iso_takes_only_rfc3339_with_an_offset():
    assert parse_iso("2026-12-04T11:29:43+00:00") == dt.datetime(2026, 12, 4, 11, 29, 43, tzinfo=dt.UTC)
    assert parse_iso("2026-12-04T11:29:43.125Z") is not None
    assert parse_iso("2026-12-04T06:29:43-05:00") == parse_iso("2026-12-04T11:29:43+00:00")
    wrong = ("20261204T112943Z", "2026-12-04T11:29:43", "2026-12-04", "2026-12-04 11:29:43+00:00", None, 5)
    for text in wrong:
        assert parse_iso(text) is None, text


def test_a_run_dated_in_the_basic_format_is_refused_by_the_schema(either_lab, tmp_path):
    def change(members: Members) -> Members:
        def redate(doc):
            doc["run"].update(started=basic(doc["run"]["started"]), finished=basic(doc["run"]["finished"]))

        return edit_json(members, evidence_name(members), redate)

    findings(either_lab, resigned(either_lab, tmp_path, change), "schema.evidence", "run/started")


def test_a_bundle_created_in_the_basic_format_is_refused_by_the_schema(either_lab, tmp_path):
    def change(members: Members) -> Members:
        return edit_json(members, SUBMISSION, lambda doc: doc.update(created=basic(doc["created"])))

    findings(either_lab, resigned(either_lab, tmp_path, change), "schema.submission", "created")


def test_a_lease_time_in_another_format_is_a_finding(either_lab, tmp_path):
    def change(members: Members) -> Members:
        def redate(doc):
            lease = doc["hosts"][0]["lease"]
            lease["acquired"] = basic(lease["acquired"])

        return edit_json(members, evidence_name(members), redate)

    findings(either_lab, resigned(either_lab, tmp_path, change), "timeline.date", "lease.acquired")


def _later_lab_run(source: Path, dest_dir: Path) -> Path:
    """The lab's own run of the same cell an hour after `source`'s, written with a -05:00 offset:
    later in time, earlier as text."""
    doc = json.loads(source.read_text())
    for key in ("source", "checked", "submission"):
        doc.pop(key, None)
    finished = dt.datetime.fromisoformat(doc["run"]["finished"]) + dt.timedelta(hours=1)
    local = finished.astimezone(dt.timezone(dt.timedelta(hours=-5))).isoformat(timespec="seconds")
    doc["run"].update(id="lab-later", finished=local)
    doc["engine"]["version"] = "lab build"
    assert local < json.loads(source.read_text())["run"]["finished"]  # as text it sorts first
    path = dest_dir / f"lab-later__{source.name}"
    path.write_text(json.dumps(doc))
    return path


def test_a_labs_later_run_displaces_a_vendor_row_by_parsed_time(either_lab, tmp_path):
    reports = tmp_path / "reports"
    report, written = accept(either_lab.bundle, either_lab.ref, reports)
    assert report.accepted
    vendor = next(p for p in written if "low_latency__baseline" in p.name)
    cell = json.loads(vendor.read_text())["cell"]
    later = _later_lab_run(vendor, vendor.parent)
    assert latest_evidence(reports)[cell][0] == later

    own = tmp_path / "own" / "evidence"
    own.mkdir(parents=True)
    first = own / "first.json"
    shutil.copyfile(either_lab.reports / "evidence" / Path(evidence_name(either_lab.members())).name, first)
    second = _later_lab_run(first, own)
    assert select_evidence(own.parent, [cell]) == [(second, json.loads(second.read_text()))]
    assert latest_by_cell(own.parent)[cell]["run"]["id"] == "lab-later"
    docs = [json.loads(p.read_text()) for p in (first, second)]
    assert current_engine_versions(docs) == {("cpu", "llama.cpp"): "lab build"}
