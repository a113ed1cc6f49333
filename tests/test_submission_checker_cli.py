"""Issue 23 item 8: a checker vendors can use before they submit.

`dayzero submission check` refuses everything `accept` would (a replay too, given the lab's
reports with `--reports`), lists findings by cause (a file that does not parse first: what
follows may only be its consequence), prints the verdict on stdout, shows labelled values rather
than bare tuples, never cuts a value inside a word, and a golden not recorded yet leaves the cell
Pending instead of refusing the bundle.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from dayzero import cli
from dayzero.checks import FAILED
from dayzero.escape import escape
from dayzero.report.acceptance import write_acceptance
from dayzero.submission.accept import accept
from dayzero.submission.bundle import MANIFEST, SIGNATURE, SUBMISSION
from dayzero.submission.findings import Finding, Group, grouped, short

from .submission_corpus.hostile import (
    Members,
    evidence_name,
    fewer_requests,
    out,
    perf_file,
    recomputed,
    run_file,
)
from .submission_corpus.lab import REPO, VENDOR, Lab, make_lab
from .submission_corpus.synthetic import one_host_cells
from .submission_corpus.tarkit import edit_json, manifest_for, resign, sign_bytes, write_members


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> Lab:
    return make_lab(tmp_path_factory.mktemp("vendor-lab"))


def _check(lab: Lab, bundle: Path, *extra: str) -> int:
    args = ["check", str(bundle), "--allowed-signers", str(lab.allowed), "--goldens", str(lab.goldens)]
    return cli.main(["--matrix", str(REPO / "matrix"), "submission", *args, *extra])


def test_check_with_the_labs_reports_refuses_a_replay_as_accept_would(lab, tmp_path, capsys):
    reports = tmp_path / "reports"
    assert accept(lab.bundle, lab.ref, reports)[0].accepted
    members = {n: d for n, d in lab.members().items() if n not in (MANIFEST, SIGNATURE)}
    members = edit_json(members, SUBMISSION, lambda doc: doc.update(vendor="mallory"))
    members[MANIFEST] = manifest_for(members, "mallory")
    members[SIGNATURE] = sign_bytes(members[MANIFEST], lab.other_key, tmp_path)
    theirs = write_members(tmp_path / "mallory.tar.gz", members)
    assert not accept(theirs, lab.ref, reports)[0].accepted

    capsys.readouterr()
    assert _check(lab, theirs, "--reports", str(reports)) == 1
    assert "identity.replay" in capsys.readouterr().out
    assert _check(lab, theirs) == 0  # without the lab's reports nothing says it was accepted before


def test_findings_are_ordered_by_cause_a_file_that_does_not_parse_first(lab, tmp_path):
    def change(members: Members) -> Members:
        rel = perf_file(members, evidence_name(members))
        return {**members, rel: b"{not json"}

    bundle = write_members(out(tmp_path, "broken"), resign(change(lab.members()), lab.key, VENDOR, tmp_path))
    report = lab.check(bundle)
    causes = [f.requirement for f in report.findings]
    assert "schema.json" in causes and len(set(causes)) > 1, causes
    assert causes[0] == "schema.json", report.lines()


def test_the_verdict_is_on_stdout(lab, capsys):
    assert _check(lab, lab.bundle) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines()[-1].startswith(f"{lab.bundle.name}: accepted (0 finding(s)")
    assert "accepted" not in captured.err


def test_findings_show_labelled_values_not_bare_tuples(lab, tmp_path):
    bundle = write_members(
        out(tmp_path, "fewer"), resign(fewer_requests(lab.members()), lab.key, VENDOR, tmp_path)
    )
    report = lab.check(bundle)
    workload = [f for f in report.findings if f.requirement == "antigaming.workload"]
    assert workload, report.lines()
    for f in workload:
        assert "('" not in f.found + f.expected and "max_tokens" in f.found, f.line()


def test_long_values_are_never_cut_inside_a_word():
    words = " ".join(f"word{i:03d}" for i in range(100))
    for cut in (short(words, 40), escape(words, limit=40)):
        assert len(cut) <= 40 and cut.endswith("...")
        assert cut[:-3].rstrip().split()[-1] in words.split(), cut


def _awaiting_goldens(tmp: Path) -> Lab:
    """A lab whose embedded-default card takes its goldens from a reference cell (as the Kimi card
    does), checked before that reference golden was recorded: no golden for its llama.cpp cells."""
    import yaml

    matrix = tmp / "matrix"
    shutil.copytree(REPO / "matrix", matrix)
    card = matrix / "models" / "smollm2-135m.yaml"
    data = yaml.safe_load(card.read_text())
    policy = {"policy": "similarity", "min_ratio": 0.6}
    data["goldens"] = {"reference": "smollm2-135m/cpu+llama.cpp/low_latency/baseline", "policy": policy}
    for engine in ("sglang", "vllm"):  # each engine's cells take their own reference cell's
        data["engines"][engine]["goldens"] = {
            "reference": f"smollm2-135m/cpu+{engine}/low_latency/baseline",
            "policy": policy,
        }
    card.write_text(yaml.safe_dump(data, sort_keys=False))
    made = make_lab(tmp / "lab", matrix_dir=matrix)
    goldens = tmp / "goldens"
    shutil.copytree(made.goldens, goldens)
    shutil.rmtree(goldens / "smollm2-135m" / "cpu+llama.cpp")
    return replace(made, goldens=goldens)


def test_a_golden_not_recorded_leaves_the_cell_pending_instead_of_refusing_the_bundle(tmp_path):
    """The run keeps such a cell passed with its golden checks not measured (the reference cell
    records goldens later); the checker recomputes the same and accepts, the table says Pending."""
    unrecorded = _awaiting_goldens(tmp_path)
    members = recomputed(unrecorded.members(), unrecorded, tmp_path)
    for name in [n for n in members if n.startswith("evidence/")]:

        def as_the_run_judges(doc):
            doc["verdict"] = "failed" if any(c["verdict"] == FAILED for c in doc["checks"]) else "passed"

        members = edit_json(members, name, as_the_run_judges)
    bundle = write_members(out(tmp_path, "unrecorded"), resign(members, unrecorded.key, VENDOR, tmp_path))
    ev = json.loads(members[evidence_name(members)])
    assert any(c["verdict"] == "not_measured" for c in ev["checks"])
    assert run_file(members, evidence_name(members), "/probes.json")

    report = unrecorded.check(bundle)
    assert report.accepted, "\n".join(report.lines())
    reports = tmp_path / "reports"
    assert accept(bundle, unrecorded.ref, reports)[0].accepted
    table = write_acceptance(unrecorded.matrix, reports).read_text()
    for cell in one_host_cells(unrecorded.matrix):
        row = next(line for line in table.splitlines() if f"`{cell.id}`" in line)
        assert "| Pending |" in row and "golden not recorded" in row, row


# Issue 28 item 6: `check` explains what it was given instead of a bundle, refuses a --reports
# that is not there, and folds the findings that follow from a cause under it.


def test_check_explains_a_directory_given_for_a_bundle(lab, tmp_path, capsys):
    """An empty directory read `no such file`; a reports directory is named as one, with the pack step."""
    empty = tmp_path / "empty"
    empty.mkdir()
    assert _check(lab, empty) == 2
    out = capsys.readouterr().out
    assert f"empty: unusable: {empty}: an empty directory, not a bundle: check the .tar.gz that" in out, out
    assert _check(lab, lab.reports) == 2
    out = capsys.readouterr().out
    assert "a reports directory, not a bundle: pack it first (`dayzero submission pack" in out, out
    assert f"--reports {lab.reports}`" in out, out


def test_check_refuses_a_reports_directory_that_is_not_there(lab, tmp_path, capsys):
    """`check --reports /nonexistent` accepted (rc 0): no replay can be found in nothing."""
    missing = tmp_path / "nonexistent"
    assert _check(lab, lab.bundle, "--reports", str(missing)) == 2
    captured = capsys.readouterr()
    assert "accepted" not in captured.out, captured.out
    assert captured.err.strip() == f"dayzero: {missing}: --reports: no such directory " + (
        "(the lab's reports, where `accept` adds evidence)"
    )


def test_one_edited_token_count_is_one_cause_with_its_consequences_folded_under_it(lab, tmp_path, capsys):
    """It gave 46 findings in a row: the engine's log disagreeing with the records first, then
    45 figures recomputed from them, unmarked. Now: the cause, then the rest folded under it."""

    def one_more_token(members: Members) -> Members:
        def change(doc):
            doc["records"][0]["usage"]["completion_tokens"] += 1

        return edit_json(members, perf_file(members, evidence_name(members)), change)

    bundle = write_members(
        out(tmp_path, "token"), resign(one_more_token(lab.members()), lab.key, VENDOR, tmp_path)
    )
    report = lab.check(bundle)
    assert len(report.findings) > 20 and len(report.groups) == 1, report.lines()
    [group] = report.groups
    assert group.cause.requirement == "engine.records" and group.cause == report.findings[0]
    assert {"engine.metrics", "recompute.claim"} <= {f.requirement for f in group.consequences}

    capsys.readouterr()
    assert _check(lab, bundle) == 1
    cause, folded, *rest, verdict = capsys.readouterr().out.splitlines()
    assert cause == group.cause.line()
    assert folded.startswith(f"  + {len(group.consequences)} finding(s) that may follow from it (")
    assert "recompute.claim " in folded and "engine.metrics 1" in folded, folded
    assert rest == [f"    {f.line()}" for f in group.consequences]
    assert verdict.startswith(f"{bundle.name}: rejected ({len(report.findings)} finding(s)")
    markdown = report.to_markdown()
    assert markdown.count("| ↳ ") == len(group.consequences), markdown[-2000:]


def test_findings_of_no_cell_stand_alone_and_each_cell_folds_under_its_first():
    sig = Finding("manifest.json.sig", "signature.verify", "x", "y")
    bad_json, claim_a, claim_b = (
        Finding("a.json", "schema.json", "x", "y"),
        Finding("a.json", "recompute.claim", "x", "y"),
        Finding("b.json", "recompute.claim", "x", "y"),
    )
    groups = grouped([claim_b, claim_a, bad_json, sig], {"a.json": "cell-a", "b.json": "cell-b"})
    assert groups == [Group(sig), Group(bad_json, (claim_a,)), Group(claim_b)]
    assert Group(sig).lines() == [sig.line()]
