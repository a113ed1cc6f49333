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
from dayzero.submission.findings import short

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
    data["engines"]["sglang"]["goldens"] = {
        "reference": "smollm2-135m/cpu+sglang/low_latency/baseline",
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
