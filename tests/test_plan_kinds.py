"""A new kind of check is its plan alone (issue 40, item 1): a toy kind, registered here and
nowhere in dayzero, runs live on a stub cell, is recomputed by the submission checker from the
cell's raw records, and shows in the acceptance detail and the Allure story."""

from __future__ import annotations

import json
import random
from pathlib import Path
from types import SimpleNamespace

import pytest

from dayzero.checks import NOT_MEASURED, CheckResult, family_of
from dayzero.report import acceptance, allure_cell
from dayzero.run import plans, records
from dayzero.run.cell import RunContext, new_run_id, run_cell
from dayzero.run.plans import MEASUREMENT
from dayzero.spec.inventory import load_inventory
from dayzero.spec.matrix import load_matrix
from dayzero.submission import recompute
from dayzero.submission.bundle import Bundle, Reference, Subject

from .conftest import REPO
from .stub_cells import stub_card, stub_inventory, stub_matrix

NAME = "echo:answer_length"


class Echo:
    """The toy kind: one prompt, its answer's length in characters, no bound yet (not measured)."""

    family, stage = "echo", MEASUREMENT

    def plans(self, card, cell, suites):
        yield "Say hello."

    def names(self, prompt):
        return [NAME]

    def judge(self, prompt, src):
        with src.step("echo: one prompt"):
            request = {"id": "e0", "prompt": prompt, "max_tokens": 4}
            answer, _ = src.exchange("echo", 1, [request], action="requests", timeout=60)
            text = answer["records"][0].get("text") or ""
            yield CheckResult(
                NAME, "performance", NOT_MEASURED, f"{len(text)} characters, no bound yet", len(text)
            )


@pytest.fixture
def echo_run(tmp_path, monkeypatch):
    monkeypatch.setenv("DAYZERO_SUITES", str(REPO / "suites"))
    monkeypatch.setattr(plans, "KINDS", [*plans.KINDS, Echo()])
    card = stub_card(model="echoes")
    card["recipe"]["port"] = random.randint(20000, 29000)  # ours alone: other runs use the stub too
    matrix = load_matrix(stub_matrix(tmp_path, card))
    inventory = load_inventory(stub_inventory(tmp_path, ttft=0.01), set(matrix.hardware))
    cell = matrix.cell("echoes/cpu/low_latency/baseline")
    ctx = RunContext(
        matrix, inventory, tmp_path / "reports", tmp_path / "goldens", new_run_id(), say=lambda m: None
    )
    try:
        outcome = run_cell(ctx, cell)
    finally:
        ctx.close()
    return SimpleNamespace(ctx=ctx, matrix=matrix, cell=cell, outcome=outcome)


def _subject(reports: Path, path: Path, doc: dict) -> Subject:
    """The run's evidence and raw records as a bundle's checker reads them (unsigned, unpacked)."""
    files = {rel: json.loads((reports / rel).read_text()) for rel in doc["records"]}
    answers = {rel: d for rel, d in files.items() if not records.is_metrics_file(rel)}
    metrics = {rel: d for rel, d in files.items() if records.is_metrics_file(rel)}
    name = f"evidence/{path.name}"
    return Subject(Bundle(reports, (name, *files)), None, None, {name: doc}, answers, metrics)


def test_a_kind_added_by_its_plan_alone_runs_live_is_recomputed_and_is_shown(echo_run, monkeypatch):
    outcome, ctx = echo_run.outcome, echo_run.ctx
    path = outcome.evidence_path
    assert path is not None, outcome.error
    doc = json.loads(path.read_text())
    [live] = [c for c in doc["checks"] if c["name"] == NAME]
    assert live["family"] == "echo" and family_of(live) == "echo" and live["verdict"] == NOT_MEASURED
    assert live["measured"] > 0, "the stub answered the toy's prompt"
    assert records.path(ctx.run_id, echo_run.cell.id, "echo") in doc["records"]

    # read, then judge: the checker recomputes the toy's check from the raw records
    ref = Reference(echo_run.matrix, ctx.goldens_dir, Path("/dev/null"))
    subject = _subject(ctx.reports_dir, path, doc)
    [redone] = recompute.recompute_all(subject, ref).values()
    assert NAME in redone.required and redone.checks[NAME].to_json() == live
    assert not [f for f in recompute.check_claims(subject, ref) if NAME in f.found]
    forged = json.loads(json.dumps(doc))
    next(c for c in forged["checks"] if c["name"] == NAME)["measured"] += 1
    findings = recompute.check_claims(_subject(ctx.reports_dir, path, forged), ref)
    assert [f.requirement for f in findings if f.found.startswith(f"{NAME}.measured")] == ["recompute.claim"]

    # shown: the acceptance detail names it (the cell stays Pending on it), the Allure story has it
    row = acceptance.row_for(echo_run.matrix, echo_run.cell, (path, doc))
    assert row.status == "Pending" and NAME in row.detail
    attached = {}
    monkeypatch.setattr(
        allure_cell.allure, "attach", lambda body, name, *a, **k: attached.update({name: body})
    )
    allure_cell.attach_story(ctx, doc, path)
    assert NAME in [c["check"] for c in json.loads(attached["metric summary"])]
