"""Vendor submissions: pack, check (CLI and exit codes), accept into the acceptance table."""

from __future__ import annotations

import json
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from dayzero import cli, evidence
from dayzero.errors import DayzeroError
from dayzero.submission.accept import accept
from dayzero.submission.antigaming import max_in_flight
from dayzero.submission.extract import Limits, name_problem
from dayzero.submission.pack import PackError, harness_state, select_evidence
from dayzero.submission.provenance import launch_problem, matrix_digest
from dayzero.submission.recompute import MISSING, diff

from .submission_corpus.lab import REPO, VENDOR, Lab, make_lab
from .submission_corpus.synthetic import SYSTEM, one_host_cells
from .submission_corpus.tarkit import read_members


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> Lab:
    return make_lab(tmp_path_factory.mktemp("vendor-lab"))


def _cli(lab: Lab, *args: str) -> int:
    return cli.main(["--matrix", str(REPO / "matrix"), "submission", *args])


def _check_args(lab: Lab, bundle: Path, *extra: str) -> list[str]:
    return [
        "check",
        str(bundle),
        "--allowed-signers",
        str(lab.allowed),
        "--goldens",
        str(lab.goldens),
        *extra,
    ]


# --- pack ----------------------------------------------------------------------------------------


def test_bundle_is_a_closed_signed_set_of_files(lab):
    members = read_members(lab.bundle)
    manifest = json.loads(members["manifest.json"])
    assert manifest["vendor"] == VENDOR
    assert set(manifest["files"]) == set(members) - {"manifest.json", "manifest.json.sig"}
    assert members["manifest.json.sig"].startswith(b"-----BEGIN SSH SIGNATURE-----")
    submission = json.loads(members["submission.json"])
    cells = sorted(c.id for c in one_host_cells(lab.matrix))  # the cells this one-host lab ran
    assert sorted(submission["cells"]) == cells
    assert submission["harness"] == {
        "version": lab.harness.version,
        "commit": lab.harness.commit,
        "status": "",
        "clean": True,
        "allow_dirty": False,
    }
    assert submission["matrix"]["digest"] == matrix_digest(lab.matrix, cells)
    system = submission["system"]
    assert system["hardware"]["cpu"]["driver"] and system["controller"]["python"]
    assert system["engines"][0]["image_digest"].startswith("sha256:")
    for doc in (json.loads(members[n]) for n in members if n.startswith("evidence/")):
        assert all(rel in members for rel in doc["records"] + doc["logs"])


def test_pack_refuses_a_dirty_tree_unless_allowed(lab, tmp_path):
    dirty = replace(lab.harness, status=" M dayzero/recipe.py\n?? notes.txt\n")
    with pytest.raises(PackError, match="not clean .*dayzero/recipe.py"):
        lab.pack(lab.reports, tmp_path / "b.tar.gz", harness=dirty)
    bundle = lab.pack(lab.reports, tmp_path / "b.tar.gz", harness=dirty, allow_dirty=True)
    report = lab.check(bundle)
    assert [f.requirement for f in report.findings] == ["provenance.clean-tree"]
    assert "dayzero/recipe.py" in report.findings[0].found


def test_harness_state_is_head_and_porcelain_status(tmp_path):
    def git(*args):
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "a.txt").write_text("a\n")
    git("add", "a.txt")
    git("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "a")
    clean = harness_state(tmp_path)
    assert clean.clean and len(clean.commit) == 40 and clean.status == ""
    (tmp_path / "a.txt").write_text("b\n")
    (tmp_path / "new.txt").write_text("new\n")
    dirty = harness_state(tmp_path)
    assert not dirty.clean and " M a.txt" in dirty.status and "?? new.txt" in dirty.status
    assert not harness_state(tmp_path / "nowhere").clean


def test_pack_takes_the_latest_run_per_cell_and_never_accepted_evidence(lab, tmp_path):
    reports = tmp_path / "reports"
    for _, doc in evidence.iter_evidence(lab.reports):
        older = json.loads(json.dumps(doc))
        older["run"]["finished"] = "2000-01-01T00:00:00+00:00"
        older["run"]["id"] = "older"
        evidence.write(reports, older)
        evidence.write(reports, doc)
        vendor = {
            **doc,
            "source": "other",
            "checked": "2099-01-01",
            "submission": {"vendor": "o", "bundle_sha256": "x"},
        }
        vendor["run"] = {**doc["run"], "id": "accepted", "finished": "2099-01-01T00:00:00+00:00"}
        evidence.write(reports, vendor)
    picked = select_evidence(reports)
    assert len(picked) == 4 and all(doc["run"]["id"] not in ("older", "accepted") for _, doc in picked)
    with pytest.raises(
        PackError, match=r"no evidence .* for smollm2-135m/cpu\+llama\.cpp/low_latency/nothing"
    ):
        select_evidence(reports, ["smollm2-135m/cpu+llama.cpp/low_latency/nothing"])


def test_cli_pack_records_this_checkout_and_check_reports_it(lab, tmp_path, monkeypatch, capsys):
    system = tmp_path / "system.yaml"
    system.write_text(json.dumps(SYSTEM))
    out = tmp_path / "cli.tar.gz"
    code = _cli(
        lab,
        "pack",
        "--vendor",
        VENDOR,
        "--key",
        str(lab.key),
        "--reports",
        str(lab.reports),
        "--system",
        str(system),
        "--allow-dirty",
        "-o",
        str(out),
    )
    assert code == 0 and out.exists()
    harness = json.loads(read_members(out)["submission.json"])["harness"]
    state = harness_state(REPO)
    assert (harness["commit"], harness["status"], harness["clean"]) == (
        state.commit,
        state.status,
        state.clean,
    )
    capsys.readouterr()
    code = _cli(lab, *_check_args(lab, out))
    *lines, verdict = capsys.readouterr().out.splitlines()
    if state.clean:
        assert code == 0 and lines == [] and ": accepted (" in verdict
    else:
        assert code == 1 and lines and all("provenance.clean-tree" in line for line in lines)
        assert ": rejected (" in verdict


def test_pack_refuses_an_unsigned_or_unnamed_vendor(lab, tmp_path):
    from dayzero.submission.pack import pack

    with pytest.raises(PackError, match="vendor"):
        pack(
            lab.reports,
            tmp_path / "b.tar.gz",
            "Not A Name",
            lab.key,
            lab.matrix,
            system=SYSTEM,
            harness=lab.harness,
        )
    with pytest.raises(DayzeroError, match="ssh-keygen -Y sign"):
        lab.pack(lab.reports, tmp_path / "b.tar.gz", key=tmp_path / "no-such-key")


def test_pack_names_what_the_system_description_lacks(lab, tmp_path):
    system = {"engines": [{"name": "llama.cpp", "image": "x", "image_digest": "md5:0"}]}
    with pytest.raises(PackError, match="system/engines/0/image_digest"):
        lab.pack(lab.reports, tmp_path / "b.tar.gz", system=system)


# --- check ---------------------------------------------------------------------------------------


def test_check_cli_exit_codes_and_markdown_verdict(lab, tmp_path, capsys):
    md = tmp_path / "verdict.md"
    assert _cli(lab, *_check_args(lab, lab.bundle, "--markdown", str(md))) == 0
    text = md.read_text()
    assert text.startswith("# Submission check: ACCEPTED")
    assert 'Good "dayzero" signature for acme' in text
    assert "| `smollm2-135m/cpu+llama.cpp/low_latency/baseline` | 0 |" in text

    members = read_members(lab.bundle)
    del members["manifest.json.sig"]
    from .submission_corpus.tarkit import write_members

    unsigned = write_members(tmp_path / "unsigned.tar.gz", members)
    capsys.readouterr()
    assert _cli(lab, *_check_args(lab, unsigned, "--markdown", str(md))) == 1
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "manifest.json.sig: signature.missing: found no signature; "
        "expected ssh-keygen -Y sign -n dayzero of manifest.json",
        "unsigned.tar.gz: rejected (1 finding(s), 4 cell(s), vendor acme)",
    ]
    assert "# Submission check: REJECTED" in md.read_text() and "| signature.missing |" in md.read_text()

    assert _cli(lab, *_check_args(lab, tmp_path / "absent.tar.gz")) == 2
    assert _cli(lab, "check", str(lab.bundle), "--allowed-signers", str(tmp_path / "none")) == 2


def test_signature_is_checked_against_the_allowed_signers_given(lab, tmp_path):
    from dayzero.submission.check import check_bundle

    from .submission_corpus.tarkit import write_allowed_signers

    only_mallory = write_allowed_signers(tmp_path / "allowed", [("mallory", lab.other_key)])
    report = check_bundle(lab.bundle, replace(lab.ref, allowed_signers=only_mallory))
    assert [f.requirement for f in report.findings] == ["signature.verify"]


def test_repository_allowed_signers_file_is_valid_and_holds_no_private_key():
    path = REPO / "submissions" / "allowed_signers"
    text = path.read_text()
    assert "PRIVATE KEY" not in text
    for line in text.splitlines():
        if line.strip() and not line.startswith("#"):
            fields = line.split()
            assert fields[1].startswith('namespaces="dayzero"') and fields[2].startswith("ssh-")


# --- accept --------------------------------------------------------------------------------------


def test_accept_adds_vendor_evidence_and_the_table_shows_it_verified(lab, tmp_path):
    reports = tmp_path / "reports"
    report, written = accept(lab.bundle, lab.ref, reports)
    assert report.accepted and len(written) == 4
    for path in written:
        doc = json.loads(path.read_text())
        evidence.validate(doc)
        assert doc["source"] == VENDOR and doc["checked"] == report.checked
        assert doc["submission"]["bundle_sha256"] == report.sha256
        assert VENDOR in path.name
        for rel in doc["records"] + doc["logs"]:
            assert rel.startswith(f"submissions/{VENDOR}/") and (reports / rel).is_file()
    stored = reports / "submissions" / VENDOR / report.sha256[:16]
    assert (stored / "bundle.tar.gz").read_bytes() == lab.bundle.read_bytes()
    assert (stored / "verdict.md").read_text().startswith("# Submission check: ACCEPTED")

    from dayzero.report.acceptance import write_acceptance

    table = write_acceptance(lab.matrix, reports).read_text()
    day, bundle = report.checked[:10], report.sha256[:16]
    for cell in one_host_cells(lab.matrix):
        row = next(line for line in table.splitlines() if f"`{cell.id}`" in line)
        assert (
            "| Verified (vendor) |" in row and f"| {VENDOR} (vendor, bundle {bundle}, checked {day}) |" in row
        )


def test_accept_of_a_rejected_bundle_writes_nothing(lab, tmp_path):
    members = read_members(lab.bundle)
    del members["manifest.json.sig"]
    from .submission_corpus.tarkit import write_members

    bundle = write_members(tmp_path / "unsigned.tar.gz", members)
    reports = tmp_path / "reports"
    report, written = accept(bundle, lab.ref, reports)
    assert not report.accepted and written == [] and not reports.exists()


def test_accept_cli_rebuilds_the_acceptance_table(lab, tmp_path, capsys):
    reports = tmp_path / "reports"
    code = _cli(
        lab,
        "accept",
        str(lab.bundle),
        "--allowed-signers",
        str(lab.allowed),
        "--goldens",
        str(lab.goldens),
        "--reports",
        str(reports),
    )
    assert code == 0
    assert "acceptance table:" in capsys.readouterr().out
    assert f"{VENDOR} (vendor, bundle " in (reports / "acceptance.md").read_text()


# --- the pieces ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("evidence/a.json", ""),
        ("runs/r/c/logs/", ""),
        ("../x", "'..'"),
        ("a/../../x", "'..'"),
        ("/etc/passwd", "absolute"),
        ("C:/x", "absolute"),
        ("a//b", "empty"),
        ("./a", "'.'"),
        ("a\\b", "characters"),
        ("a/b\x00", "characters"),
        ("é.json", "characters"),
        ("a/" * 20 + "b", "deeper"),
    ],
)
def test_member_names(name, problem):
    found = name_problem(name, Limits())
    assert (problem in found) if problem else found == ""


def test_launch_matches_the_template_with_placeholders_as_wildcards():
    template = ("llama-server", "--model", "{weights}", "--port", "{port}", "--threads", "2")
    env = (("HF_TOKEN", "{token}"), ("MODE", "fast"))
    ok = {
        "command": "llama-server --model /m/x.gguf --port 18080 --threads 2",
        "env": {"HF_TOKEN": "***", "MODE": "fast"},
    }
    assert launch_problem(template, env, ok) == ""
    assert "argument 6" in launch_problem(template, env, {**ok, "command": ok["command"].replace("2", "8")})
    assert "arguments" in launch_problem(template, env, {**ok, "command": ok["command"] + " --parallel 8"})
    assert "env MODE" in launch_problem(template, env, {**ok, "env": {"HF_TOKEN": "***", "MODE": "slow"}})
    assert "env" in launch_problem(template, env, {**ok, "env": {"MODE": "fast"}})


def test_max_in_flight_counts_overlaps_and_lets_an_end_free_its_slot():
    seq = [{"send": 0.0, "end": 1.0}, {"send": 1.0, "end": 2.0}, {"send": 2.0, "end": 3.0}]
    assert max_in_flight(seq) == 1
    assert (
        max_in_flight([{"send": 0.0, "end": 2.0}, {"send": 0.5, "end": 1.0}, {"send": 0.6, "end": 3.0}]) == 3
    )


def test_diff_reports_what_the_claim_states_differently_or_leaves_out():
    assert list(diff({"a": 1.0, "b": [1, 2]}, {"a": 1.0, "b": [1, 2]}, "x")) == []
    assert list(diff({"a": 1.0}, {"a": 1.0, "fit": {"slope": 2}}, "x")) == [("x.fit", MISSING, {"slope": 2})]
    assert list(diff({"a": 1.0}, {"a": 1.0 + 1e-6}, "x")) == [("x.a", 1.0, 1.0 + 1e-6)]
    assert list(diff({"a": True}, {"a": 1}, "x")) == [("x.a", True, 1)]
    assert list(diff({"z": 1}, {}, "x")) == [("x.z", 1, MISSING)]
    assert list(diff([1, 2], [1], "x")) == [("x", [1, 2], [1])]


def _kimi_subject(tmp_path, image: str, digest: str, accelerators: int = 8):
    from dayzero.spec.matrix import load_matrix
    from dayzero.spec.recipe import digest as recipe_digest
    from dayzero.submission.bundle import Bundle, Subject

    matrix = load_matrix(REPO / "matrix")
    cell = next(c for c in matrix.cells if c.hardware == "b300" and c.supported)
    doc = {
        "cell": cell.id,
        "model": cell.model,
        "hardware": "b300",
        "mode": cell.mode,
        "strategy": cell.strategy,
        "options": list(cell.options),
        "run": {"id": "r1", "harness_version": "0.1.0"},
        "recipe": {"digest": recipe_digest(matrix.card(cell), cell), "launches": []},
        "engine": {"name": "sglang", "version": "0.5.9"},
        "hosts": [{"name": "b300-1", "hardware": "b300", "accelerators": accelerators}],
        "checks": [],
        "verdict": "passed",
    }
    submission = {
        "vendor": VENDOR,
        "cells": [cell.id],
        "system": {
            "hardware": {"b300": {"accelerator": "NVIDIA B300", "accelerators_per_node": 8, "driver": "580"}},
            "engines": [{"name": "sglang", "version": "0.5.9", "image": image, "image_digest": digest}],
            "hosts": [{"name": "b300-1", "hardware": "b300", "accelerators": 8}],
        },
    }
    subject = Subject(Bundle(tmp_path, ()), None, submission, {"evidence/x.json": doc}, {})
    return subject, replace(_ref_for(matrix), matrix=matrix)


def _ref_for(matrix):
    from dayzero.submission.bundle import Reference

    return Reference(matrix, REPO / "suites" / "goldens", REPO / "submissions" / "allowed_signers")


def test_engine_image_must_be_the_model_cards_for_the_hardware(tmp_path):
    from dayzero.submission.provenance import check_engine, check_hosts

    good = "sha256:" + "1" * 64
    subject, ref = _kimi_subject(tmp_path, "lmsysorg/sglang:kimi-k3.1", good)
    assert check_engine(subject, ref) == [] and check_hosts(subject, ref) == []
    subject, ref = _kimi_subject(tmp_path, "acme/sglang-fork:fast", good)
    assert [f.requirement for f in check_engine(subject, ref)] == ["provenance.image"]
    subject, ref = _kimi_subject(tmp_path, "lmsysorg/sglang:kimi-k3.1@sha256:" + "2" * 64, good)
    assert [f.requirement for f in check_engine(subject, ref)] == ["provenance.image"]
    subject, ref = _kimi_subject(tmp_path, "lmsysorg/sglang:kimi-k3.1", good, accelerators=4)
    found = [f.requirement for f in check_hosts(subject, ref)]
    assert found == ["provenance.hosts", "provenance.system"]  # 4 per node claimed; described as 8


# --- two measurements of one workload at one concurrency ------------------------------------------


def test_two_floors_measured_apart_on_one_workload_and_concurrency_are_rechecked_on_their_own_records(
    tmp_path,
):
    """Floors on one workload and concurrency that differ in length form two measurements; each is
    rechecked from its own raw records (`-m1`), so an honest bundle of such a card is accepted."""
    import shutil

    import yaml

    matrix_dir = tmp_path / "matrix"
    shutil.copytree(REPO / "matrix", matrix_dir)
    card_path = matrix_dir / "models" / "smollm2-135m.yaml"
    card = yaml.safe_load(card_path.read_text())
    card["floors"] += [
        {"when": {"mode": "low_latency"}, "metric": "output_throughput", "concurrency": "mode", "min": 1}
        | {"max_tokens": 8, "repetitions": 1},
        {"when": {"mode": "low_latency"}, "metric": "median_ttft_ms", "concurrency": "mode", "max": 1e9}
        | {"max_tokens": 12, "repetitions": 1},
    ]
    card_path.write_text(yaml.safe_dump(card, sort_keys=False))
    lab = make_lab(tmp_path / "lab", matrix_dir=matrix_dir)

    report = lab.check(lab.bundle)
    assert report.accepted, "\n".join(report.lines())
    cell = next(c for c in lab.matrix.cells if c.hardware == "cpu" and c.mode == "low_latency")
    path = next((lab.reports / "evidence").glob(f"{evidence.slug(cell.id)}__*.json"))
    checks = {c["name"]: c for c in json.loads(path.read_text())["checks"]}
    files = {
        name: [Path(rel).name for rel in checks[name]["details"]["records"]]
        for name in ("floor:output_throughput@default/c1", "floor:median_ttft_ms@default/c1")
    }
    assert files == {
        "floor:output_throughput@default/c1": ["perf-default-c1-r0.json"],
        "floor:median_ttft_ms@default/c1": ["perf-default-m1-c1-r0.json"],
    }
    assert checks["floor:median_ttft_ms@default/c1"]["details"]["summaries"][0]["mean_output_tokens"] == 12


def test_pack_blames_the_real_source_of_a_refused_field(lab, tmp_path):
    """Issue 45: every refusal said "describe it in --system FILE", a placeholder digest came back
    as a raw regex. A value of --system is blamed on it, in words; one pack collected is not."""
    placeholder = {"engines": [{"name": "llama.cpp", "image": "x", "image_digest": "sha256:..."}]}
    with pytest.raises(PackError) as err:
        lab.pack(lab.reports, tmp_path / "b.tar.gz", system=placeholder)
    assert str(err.value) == (
        "submission.json system/engines/0/image_digest: expected 'sha256:' and 64 hex digits (an "
        "image's digest), got 'sha256:...' (as --system FILE gives it: correct it there)"
    )


def test_pack_says_a_refused_field_it_collected_is_not_from_system(lab, tmp_path, monkeypatch):
    from dayzero.submission import pack as pack_module

    monkeypatch.setattr(pack_module, "local_engine_image", lambda name: {})  # no image known here
    with pytest.raises(PackError) as err:
        lab.pack(lab.reports, tmp_path / "b.tar.gz", system={"system_name": "s"})
    message = str(err.value)
    assert message.startswith("submission.json system/engines/0: 'image' is a required property"), message
    assert "(collected from the evidence packed and this machine, not from --system;" in message
    assert "as --system FILE gives it" not in message


def test_pack_refuses_a_description_that_replaces_a_collected_fact(lab, tmp_path):
    """Issue 45: a cpu run's bundle said "NVIDIA driver, CUDA 13.0", and the description replaced
    the engine identity the harness had collected."""
    driver = {"hardware": {"cpu": {"driver": "NVIDIA 580.65.06, CUDA 13.0"}}}
    with pytest.raises(PackError) as err:
        lab.pack(lab.reports, tmp_path / "b.tar.gz", system=driver)
    assert "hardware.cpu.driver 'NVIDIA 580.65.06, CUDA 13.0', collected 'none (cpu)'" in str(err.value)
    assert "it never replaces it" in str(err.value)
    version = {"engines": [{"name": "llama.cpp", "version": "b9999"}]}
    with pytest.raises(PackError, match="engines llama.cpp version 'b9999', its runs recorded "):
        lab.pack(lab.reports, tmp_path / "c.tar.gz", system=version)
