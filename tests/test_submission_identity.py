"""Vendor submissions, issue 23 items 4, 5 and 7: inputs tied to the workload, identity, and
reproduction status. Each forgery starts from the lab's honest bundle and is re-signed with the
vendor's own key; the evidence is recomputed where the forger would recompute it.

The forgeries, the replay and the key bound to kinds are built twice (`either_lab`,
tests/conftest.py): from the synthetic lab and from the main job's real cpu run. Reproduction
status and audit judge accepted rows, not a forgery: synthetic only."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from dayzero.submission.accept import accept
from dayzero.submission.bundle import MANIFEST, SIGNATURE, SUBMISSION
from dayzero.submission.inputs import PromptCounts

from .submission_corpus.hostile import evidence_name, perf_file
from .submission_corpus.identity import CASES, IdentityCase, reserialised
from .submission_corpus.lab import Lab, make_lab
from .submission_corpus.tarkit import edit_json, manifest_for, sign_bytes, write_members


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> Lab:
    return make_lab(tmp_path_factory.mktemp("vendor-lab"))


def test_the_honest_bundle_is_accepted(lab):
    report = lab.check(lab.bundle)
    assert report.accepted, "\n".join(report.lines())


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_forgery_is_rejected_with_its_finding(either_lab, case: IdentityCase, tmp_path):
    report = either_lab.check(case.build(either_lab, tmp_path))
    assert not [f for f in report.findings if f.requirement == "checker.internal"], report.lines()
    found = [f for f in report.findings if f.requirement == case.requirement]
    assert report.exit_code == 1 and found, "\n".join(report.lines())
    assert all(f.found and f.expected for f in found)
    if case.file_suffix:
        assert any(f.file.endswith(case.file_suffix) for f in found), "\n".join(report.lines())


# --- item 4: inputs tied to the workload --------------------------------------------------------


def test_a_prompt_is_counted_alike_each_time_a_cell_sends_it():
    counts = PromptCounts()
    assert counts.note("d1", 40, "a", "f1") == "" and counts.note("d2", 12, "b", "f1") == ""
    assert counts.note("d1", 40, "c", "f2") == ""
    said = counts.note("d1", 20, "d", "f2")
    assert "20 prompt tokens, 40" in said and "a in f1" in said


def test_the_honest_records_carry_the_digests_the_plan_regenerates(either_lab):
    members = either_lab.members()
    records = json.loads(members[perf_file(members, evidence_name(members))])
    assert records["client"]["version"] >= 4
    assert all(len(r["prompt_digest"]) == 64 for r in records["records"])


# --- item 5: identity ---------------------------------------------------------------------------


def _as_mallory(members: dict, lab: Lab, tmp_path):
    members = {n: d for n, d in members.items() if n not in (MANIFEST, SIGNATURE)}
    members = edit_json(members, SUBMISSION, lambda doc: doc.update(vendor="mallory"))
    members[MANIFEST] = manifest_for(members, "mallory")
    members[SIGNATURE] = sign_bytes(members[MANIFEST], lab.other_key, tmp_path)
    return write_members(tmp_path / "mallory.tar.gz", members)


def test_a_run_re_encoded_by_another_vendor_is_a_replay(either_lab, tmp_path):
    reports = tmp_path / "reports"
    assert accept(either_lab.bundle, either_lab.ref, reports)[0].accepted
    theirs = _as_mallory(reserialised(either_lab.members()), either_lab, tmp_path)
    assert either_lab.check(theirs).accepted  # on its own, a valid bundle of mallory's
    report, written = accept(theirs, either_lab.ref, reports)
    replay = [f for f in report.findings if f.requirement == "identity.replay"]
    assert written == [] and replay and "acme" in replay[0].found, report.lines()
    assert len(replay) == sum(1 for n in either_lab.members() if "/records/" in n and ".metrics." not in n)


B300 = {"accelerators_seen": 8, "memory_total_gb": 2148.0, "driver_version": "580.65.06"}


@pytest.mark.parametrize(
    "facts, problem",
    [
        (B300, ""),
        ({**B300, "driver_version": "none (cpu)"}, "no accelerator driver"),
        ({**B300, "accelerators_seen": 4}, "4 accelerators seen"),
        ({**B300, "memory_total_gb": 632.0}, "632.0 GB"),  # eight H100s' memory
        ({**B300, "memory_total_gb": None}, "None GB"),
        ({"driver_version": "580.65.06"}, "accelerators_seen None"),
    ],
    ids=["b300", "cpu-driver", "count", "memory", "no-memory", "no-count"],
)
def test_preflight_facts_must_be_those_of_the_claimed_kind(lab, facts, problem):
    from dayzero.submission.configuration import facts_problem

    said = facts_problem(facts, lab.matrix.hardware["b300"], 8)
    assert problem in said and bool(said) == bool(problem), said


@pytest.mark.parametrize("kinds", ['kinds="b300,gb300"', ""], ids=["other-kinds", "unbound"])
def test_a_vendors_key_signs_only_for_the_hardware_kinds_it_is_bound_to(either_lab, tmp_path, kinds):
    from dataclasses import replace

    from .submission_corpus.tarkit import write_allowed_signers

    allowed = write_allowed_signers(tmp_path / "allowed_signers", [("acme", either_lab.key)], kinds=kinds)
    report = check_with(either_lab, replace, allowed)
    found = [f for f in report.findings if f.requirement == "signature.kinds"]
    assert found and "cpu" in found[0].expected, report.lines()
    assert not [f for f in report.findings if f.requirement == "signature.verify"]


def test_the_allowed_signers_kinds_option_is_read_and_hidden_from_ssh_keygen(tmp_path):
    from dayzero.submission.signers import bound_kinds, for_ssh_keygen

    path = tmp_path / "allowed_signers"
    path.write_text(
        "# comment\n"
        'acme namespaces="dayzero",kinds="b300,gb300" ssh-ed25519 AAAA1 acme-ci\n'
        'acme kinds="cpu",namespaces="dayzero" ssh-ed25519 AAAA2\n'
        'beta namespaces="dayzero" ssh-ed25519 AAAA3\n'
    )
    assert (
        for_ssh_keygen(path.read_text(), "acme", {"cpu"}) == 'acme namespaces="dayzero" ssh-ed25519 AAAA2\n'
    )
    assert for_ssh_keygen(path.read_text(), "acme", {"b300"}).startswith(
        'acme namespaces="dayzero" ssh-ed25519 AAAA1'
    )
    assert for_ssh_keygen(path.read_text(), "beta", {"cpu"}) == ""
    assert bound_kinds(path.read_text(), "acme") == {"b300", "gb300", "cpu"}


def check_with(lab, replace, allowed):
    from dayzero.submission.check import check_bundle

    return check_bundle(lab.bundle, replace(lab.ref, allowed_signers=allowed))


# --- item 7: reproduction status ----------------------------------------------------------------


def _accepted_reports(lab, tmp_path):
    reports = tmp_path / "reports"
    report, written = accept(lab.bundle, lab.ref, reports)
    assert report.accepted and written
    return reports, written


def _lab_run_of(path, reports, scale: float):
    """The lab's own run of a vendor's cell: the same recipe, its floors measured `scale` times."""
    doc = json.loads(path.read_text())
    for key in ("source", "checked", "submission"):
        doc.pop(key, None)
    doc["run"]["id"] = "lab-" + doc["run"]["id"]
    for key in ("started", "finished"):  # an earlier run: the vendor's stays the cell's latest
        when = dt.datetime.fromisoformat(doc["run"][key]) - dt.timedelta(minutes=1)
        doc["run"][key] = when.isoformat(timespec="seconds")
    for c in doc["checks"]:
        if c["name"].startswith("floor:") and isinstance(c.get("measured"), int | float):
            c["measured"] *= scale
    (reports / "evidence" / f"lab-{path.name}").write_text(json.dumps(doc))
    return doc["cell"]


def test_an_accepted_vendor_cell_is_verified_by_the_vendor_until_a_second_party_reproduces_it(lab, tmp_path):
    from dayzero.report.acceptance import rows, to_html, to_markdown

    reports, written = _accepted_reports(lab, tmp_path)
    table = {r.cell.id: r for r in rows(lab.matrix, reports)}
    vendor_cells = {json.loads(p.read_text())["cell"] for p in written}
    assert {table[c].label for c in vendor_cells} == {"Verified (vendor)"}
    # a lab run of one cell: same recipe digest, throughput and latency within the card's 10%
    same = _lab_run_of(written[0], reports, 0.99)
    # a lab run of another that does not reproduce: every floor measured 30% off the vendor's
    off = _lab_run_of(written[1], reports, 0.7)
    # the vendor's run itself under a lab run id (every figure alike): it reproduces nothing
    itself = _lab_run_of(written[2], reports, 1.0)
    table = {r.cell.id: r for r in rows(lab.matrix, reports)}
    assert table[same].label == "Verified (reproduced)"
    assert table[off].label == "Verified (vendor)"
    assert table[itself].label == "Verified (vendor)"
    md, html = to_markdown(list(table.values()), reports), to_html(list(table.values()), reports)
    assert "| Verified (vendor) |" in md and 'data-reproduction="vendor"' in html


def test_reproduction_holds_each_floor_to_the_cards_tolerance_in_its_direction():
    from dayzero.report.reproduction import agrees

    directions = {"floor:tps": "min", "floor:ttft": "max"}
    vendor = {"checks": [{"name": "floor:tps", "measured": 100.0}, {"name": "floor:ttft", "measured": 50.0}]}

    def other(tps, ttft):
        return {"checks": [{"name": "floor:tps", "measured": tps}, {"name": "floor:ttft", "measured": ttft}]}

    assert agrees(vendor, other(91.0, 54.0), directions, 0.1)
    assert not agrees(vendor, other(89.0, 50.0), directions, 0.1)  # 11% slower
    assert not agrees(vendor, other(100.0, 56.0), directions, 0.1)  # 12% more latency
    assert not agrees(vendor, {"checks": [{"name": "floor:tps", "measured": 100.0}]}, directions, 0.1)


def test_audit_picks_a_seeded_sample_and_says_what_a_rerun_must_reproduce(lab, tmp_path, capsys):
    from dayzero import cli

    reports, written = _accepted_reports(lab, tmp_path)
    args = ["--matrix", str(lab.matrix.root), "submission", "audit", "--reports", str(reports)]
    args += ["--sample", "2"]
    assert cli.main([*args, "--seed", "7"]) == 0
    first = capsys.readouterr().out
    assert cli.main([*args, "--seed", "7"]) == 0
    assert capsys.readouterr().out == first  # the same seed, the same sample
    cells = [line for line in first.splitlines() if line.startswith("- ")]
    assert len(cells) == 2 and all("acme" in line and "recipe" in line for line in cells)
    assert "floor:" in first and ">=" in first and "sha256" in first.lower()
