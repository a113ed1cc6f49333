"""evidence.build (pure: what a cell run gathered -> the document) and the one atomic writer."""

from __future__ import annotations

import json
import os
import threading

import pytest

from dayzero import atomic, evidence
from dayzero.checks import CheckResult
from dayzero.lab.lease import Lease
from dayzero.lab.preflight import HostFacts
from dayzero.spec.inventory import Host
from dayzero.spec.matrix import load_matrix
from dayzero.spec.recipe import render

from .conftest import REPO

SECRET = "hf_build-secret-7Qx"
RUN = {
    "id": "r1",
    "started": "2026-01-01T00:00:00+00:00",
    "finished": "2026-01-01T00:01:00+00:00",
    "by": "me",
    "controller": "ctl",
    "worker": "gw0",
    "harness_version": "0.1",
}


@pytest.fixture(scope="module")
def parts():
    matrix = load_matrix(REPO / "matrix")
    cell = matrix.cell("smollm2-135m/cpu+llama.cpp/low_latency/baseline")
    host = Host(
        name="local",
        hardware="cpu",
        transport="local",
        accelerators=1,
        engine_setup=f"export HF_TOKEN={SECRET}",
        vars=(("model_root", "/models"),),
    )
    lease = Lease(host, 1, "r1", "/w/leases/slot-1")
    facts = HostFacts("local", True, 1, 7.5, 6.0, 40.0, 2, {"llama.cpp": "b1"}, ("ignored",), "none (cpu)")
    return cell, render(matrix, cell, [host]), lease, facts


def build(parts, **overrides):
    cell, recipe, lease, facts = parts
    args = {
        "held": {"acquired": "t0", "released": "t1"},
        "run": RUN,
        "recipe": recipe,
        "engine": {"name": "llama.cpp", "version": "b1"},
        "records": ["runs/r1/x/records/probes.json", "runs/r1/x/records/accuracy.json"],
        "logs": ["runs/r1/x/logs/local-server-0.log"],
        "verdict": "passed",
        "secrets": [lease.host.engine_setup],
    }
    checks = [CheckResult("probe:a", "correctness", "passed", "ok", measured="hi")]
    return evidence.build(cell, checks, [lease], {"local": facts}, **{**args, **overrides})


def test_a_complete_run_builds_valid_evidence_with_host_facts_and_driver(parts):
    doc = build(parts)
    evidence.validate(doc)
    assert doc["cell"] == "smollm2-135m/cpu+llama.cpp/low_latency/baseline" and doc["verdict"] == "passed"
    (host,) = doc["hosts"]
    assert host["lease"] == {"slot": 1, "acquired": "t0", "released": "t1"}
    assert host["facts"]["driver_version"] == "none (cpu)"
    assert host["facts"]["engine_versions"] == {"llama.cpp": "b1"}
    assert "problems" not in host["facts"] and "host" not in host["facts"]
    assert doc["records"] == sorted(doc["records"]) and "error" not in doc
    assert doc["recipe"]["digest"] == parts[1].digest and doc["recipe"]["launches"][0]["role"]


def test_a_run_that_broke_before_leasing_still_builds_valid_evidence(parts):
    doc = evidence.build(
        parts[0],
        [],
        [],
        {},
        held={},
        run=RUN,
        recipe=None,
        engine={"name": "llama.cpp", "version": "unknown"},
        records=[],
        logs=[],
        verdict="broken",
        error="no host",
    )
    evidence.validate(doc)
    assert (
        doc["hosts"] == [] and doc["recipe"] == {"digest": "", "launches": []} and doc["error"] == "no host"
    )


def test_secrets_in_any_text_are_masked(parts):
    doc = build(parts, verdict="failed", error=f"server said HF_TOKEN={SECRET}")
    assert SECRET not in json.dumps(doc)
    assert "HF_TOKEN=***" in doc["error"]


def test_a_host_without_facts_is_kept_with_empty_facts(parts):
    cell, _, lease, _ = parts
    doc = evidence.build(
        cell,
        [],
        [lease],
        {},
        held={"acquired": "t0"},
        run=RUN,
        recipe=None,
        engine={"name": "e", "version": "v"},
        records=[],
        logs=[],
        verdict="passed",
    )
    assert doc["hosts"][0]["facts"] == {} and doc["hosts"][0]["lease"] == {"slot": 1, "acquired": "t0"}


def test_old_evidence_without_a_driver_version_is_still_valid(parts):
    doc = build(parts)
    del doc["hosts"][0]["facts"]["driver_version"]
    evidence.validate(doc)


def test_write_is_atomic_and_leaves_no_partial_file(tmp_path, parts):
    path = evidence.write(tmp_path, build(parts))
    assert json.loads(path.read_text())["cell"] == parts[0].id
    assert [p.name for p in path.parent.iterdir()] == [path.name]


def test_atomic_write_keeps_the_old_document_when_writing_fails(tmp_path, monkeypatch):
    target = tmp_path / "sub" / "doc.json"
    atomic.write_json(target, {"a": 1})
    assert target.read_text() == '{\n  "a": 1\n}\n'
    with pytest.raises(TypeError):
        atomic.write_json(target, {"a": object()})
    tried = []

    def disk_full(src, dst):
        tried.append(str(src))
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", disk_full)
    with pytest.raises(OSError, match="disk full"):
        atomic.write_text(target, "new")
    monkeypatch.undo()
    assert json.loads(target.read_text()) == {"a": 1}
    assert tried and tried[0].endswith(".partial") and tried[0] != str(target)
    assert sorted(p.name for p in target.parent.iterdir()) == ["doc.json"], "no partial file left"


def test_concurrent_writers_never_leave_a_torn_document(tmp_path):
    target = tmp_path / "doc.json"
    docs = [{"writer": i, "pad": "x" * 200_000} for i in range(4)]
    threads = [threading.Thread(target=atomic.write_json, args=(target, d)) for d in docs]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        if target.exists():
            assert json.loads(target.read_text())["writer"] in range(4)  # never half a document
    for t in threads:
        t.join()
    assert json.loads(target.read_text())["writer"] in range(4)
    assert not list(tmp_path.glob("*.partial")) and not list(tmp_path.glob(".*.partial"))
