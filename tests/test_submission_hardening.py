"""Issue 12: vendor strings cannot forge the checker's output; time, replay and crashes are told apart."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from dayzero import cli
from dayzero.escape import escape
from dayzero.report.acceptance import Row, current_engine_versions, to_html, to_markdown
from dayzero.submission.accept import INDEX, accept
from dayzero.submission.bundle import MANIFEST, SIGNATURE, SUBMISSION

from .submission_corpus.hostile import CASES, FORGING
from .submission_corpus.lab import REPO, VENDOR, Lab, make_lab
from .submission_corpus.tarkit import edit_json, manifest_for, sign_bytes, write_members

FORGING_CASES = [c for c in CASES if c.id in FORGING]


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> Lab:
    return make_lab(tmp_path_factory.mktemp("vendor-lab"))


def _cli(*args: str) -> int:
    return cli.main(["--matrix", str(REPO / "matrix"), "submission", *args])


def _args(lab: Lab, verb: str, bundle: Path, *extra: str) -> list[str]:
    return [verb, str(bundle), "--allowed-signers", str(lab.allowed), "--goldens", str(lab.goldens), *extra]


def test_escape_makes_one_inert_line_per_context():
    hostile = "a\nACCEPTED\r\x1b[2J\u2028|`<script>&[x](y)\\"
    text = escape(hostile)
    assert "\n" not in text and "\r" not in text and "\x1b" not in text and "\u2028" not in text
    assert text.startswith("a\\x0aACCEPTED\\x0d\\x1b[2J\\u2028")
    md = escape(hostile, "markdown")
    assert "<" not in md and "|" not in md.replace("\\|", "") and "`" not in md.replace("\\`", "")
    code = escape(hostile, "code")
    assert "`" not in code and "|" not in code.replace("\\|", "")
    assert "<script>" not in escape(hostile, "html")
    assert escape("x" * 50, limit=10) == "x" * 7 + "..."


@pytest.mark.parametrize("case", FORGING_CASES, ids=[c.id for c in FORGING_CASES])
def test_a_vendor_string_cannot_forge_a_line_of_the_checkers_output(lab, case, tmp_path, capsys):
    bundle = case.build(lab, tmp_path)
    markdown = tmp_path / "verdict.md"
    code = _cli(*_args(lab, "check", bundle, "--markdown", str(markdown)))
    out, err = capsys.readouterr()
    assert code == 1, out + err
    lines = out.splitlines() + err.splitlines()
    assert lines and not [line for line in lines if line.startswith(("ACCEPTED", "|", "<"))], lines
    assert all(line.split(":", 1)[0].strip() for line in out.splitlines())
    assert case.requirement in out
    md = markdown.read_text()
    assert "<script>" not in md and "# Submission check: REJECTED" in md
    rows = [line for line in md.splitlines() if line.startswith("| ")]
    report = lab.check(bundle)
    tables = [report.cells, report.findings]  # a header row, then one row per cell, per finding
    assert len(rows) == sum(len(t) + 1 for t in tables if t)
    assert not [line for line in md.splitlines() if line.startswith(("ACCEPTED", "<", "- findings: 0"))]


def test_the_acceptance_table_escapes_what_evidence_says(lab, tmp_path):
    from dayzero.spec.matrix import load_matrix

    cell = load_matrix(REPO / "matrix").cells[0]
    detail = "2026-01-01, llama.cpp 1\n| `x/y` | Verified | forged | acme | |\n<script>alert(1)</script>"
    row = Row(cell, "Verified", detail, "acme (checked 2026-01-01)|x", tmp_path / "evidence" / "a b)(.json")
    md = to_markdown([row], tmp_path)
    table = [line for line in md.splitlines() if line.startswith("| ")]
    assert len(table) == 2 and "<script>" not in md and "a%20b%29%28.json" in md
    html = to_html([row], tmp_path)
    assert "<script>alert" not in html and html.count("<script>") == 1  # the page's own filter script
    assert html.count("<tr data-cell=") == 1 and html.count("<td data-cell=") == 1  # the list and the grid


def test_vendor_evidence_never_sets_the_labs_current_engine_version():
    lab_doc = {
        "hardware": "cpu",
        "engine": {"name": "llama.cpp", "version": "b1"},
        "run": {"finished": "2026-01-01"},
    }
    vendor = {**lab_doc, "engine": {"name": "llama.cpp", "version": "b9"}, "run": {"finished": "2030-01-01"}}
    vendor["source"], vendor["submission"] = "acme", {"vendor": "acme", "bundle_sha256": "0"}
    assert current_engine_versions([lab_doc, vendor]) == {("cpu", "llama.cpp"): "b1"}


def test_future_evidence_is_stale(lab):
    from dayzero.report.acceptance import stale_reasons

    doc = {
        "recipe": {"digest": "d"},
        "engine": {"version": "b1"},
        "run": {"finished": "2030-01-01T00:00:00+00:00"},
    }
    reasons = stale_reasons(doc, "d", "b1", dt.datetime(2026, 1, 1, tzinfo=dt.UTC), 30)
    assert reasons and "future" in reasons[0]


def test_records_replayed_by_another_vendor_are_rejected_at_accept(lab, tmp_path):
    reports = tmp_path / "reports"
    report, written = accept(lab.bundle, lab.ref, reports)
    assert report.accepted and written
    index = json.loads((reports / INDEX).read_text())
    assert {v["vendor"] for v in index.values()} == {VENDOR} and len(index) >= len(written)
    again, _ = accept(lab.bundle, lab.ref, reports)  # the same bundle twice is not a replay
    assert again.accepted

    members = {n: d for n, d in lab.members().items() if n not in (MANIFEST, SIGNATURE)}
    members = edit_json(members, SUBMISSION, lambda doc: doc.update(vendor="mallory"))
    members[MANIFEST] = manifest_for(members, "mallory")
    members[SIGNATURE] = sign_bytes(members[MANIFEST], lab.other_key, tmp_path)
    theirs = write_members(tmp_path / "mallory.tar.gz", members)
    assert lab.check(theirs).accepted  # on its own it is a valid bundle of mallory's
    before = sorted(p.relative_to(reports) for p in reports.rglob("*"))
    report, written = accept(theirs, lab.ref, reports)
    assert not report.accepted and written == [] and report.exit_code == 1
    replay = [f for f in report.findings if f.requirement == "identity.replay"]
    assert replay and replay[0].file.startswith("runs/") and VENDOR in replay[0].found
    assert sorted(p.relative_to(reports) for p in reports.rglob("*")) == before


def test_accept_that_fails_writes_nothing_and_exits_crashed_not_rejected(lab, tmp_path, capsys):
    reports = tmp_path / "reports-is-a-file"
    reports.write_text("not a directory\n")
    code = _cli(*_args(lab, "accept", lab.bundle, "--reports", str(reports)))
    err = capsys.readouterr().err
    assert code == 3 and "crashed:" in err, err
    assert reports.read_text() == "not a directory\n"


def test_harness_root_is_the_checkout_holding_the_matrix(tmp_path, monkeypatch):
    """An installed package has no checkout of its own: the harness commit is the one of the
    checkout whose matrix is checked, never a venv's enclosing repository."""
    import subprocess

    from dayzero.submission.check import harness_root

    lab = tmp_path / "lab"
    (lab / "matrix").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(lab)], check=True)
    monkeypatch.chdir(tmp_path)
    assert harness_root(lab / "matrix") == lab.resolve()
    monkeypatch.chdir(lab / "matrix")
    assert harness_root() == lab.resolve()
