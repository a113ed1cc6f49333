"""DFLASH acceptance per workload on the Kimi card: every DFLASH cell measures the accepted length
on code and on prose from SGLang's own counters, and the report answers "how much does it differ
between code and prose" per hardware. The stub engine serves SGLang's counters (as 0.5.23 names
them) with a higher acceptance on code prompts than on prose; a server whose counters cannot be
read leaves a cell that is not Verified."""

from __future__ import annotations

import datetime as dt

import pytest

from dayzero import evidence
from dayzero.checks import FAILED
from dayzero.lab.lease import Lease
from dayzero.lab.preflight import HostFacts
from dayzero.report.acceptance import rows, write_acceptance
from dayzero.run.phases import Endpoint, metrics_check, run_speculative
from dayzero.spec.card import rules_for
from dayzero.spec.inventory import Host
from dayzero.spec.matrix import load_matrix
from dayzero.spec.recipe import placeholder_hosts, render
from devlab.stub import StubConfig, StubServer

from .conftest import REPO
from .test_measurement_client import client

NOW = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)
B300 = "kimi-k3.1-pro/b300/balanced/dflash"
MI355X = "kimi-k3.1-pro/mi355x/balanced/dflash"
# every code prompt of suites/workloads/prompts/code.jsonl has one of these; no prose prompt does
CODE = (("```", 1.0), ("Python", 1.0), ("SQL", 1.0))


@pytest.fixture(scope="module")
def matrix():
    return load_matrix(REPO / "matrix")


def test_every_kimi_dflash_cell_measures_code_and_prose(matrix):
    cells = [c for c in matrix.cells if c.model == "kimi-k3.1-pro" and c.supported]
    for cell in cells:
        rules = rules_for(matrix.card(cell), cell)
        if cell.strategy != "dflash":
            assert rules == [], cell.id
            continue
        (rule,) = rules
        assert rule.workloads == ("chat-code", "chat-prose") and set(rule.min_accept_length) == set(
            rule.workloads
        )
    assert sum(c.strategy == "dflash" for c in cells) > 50


def _measure(matrix, cell_id: str, cfg: StubConfig) -> list:
    """The cell's speculative phase against the stub engine over HTTP (the real client)."""
    cell = matrix.cell(cell_id)
    with StubServer(cfg) as stub:
        ep = Endpoint(
            stub.url,
            client,
            keep=lambda phase, answer: phase,
            say=lambda m: None,
            meters=(("server[0]@local", stub.url + "/metrics"),),
            engine="sglang",
        )
        checks = list(run_speculative(matrix.card(cell), cell, ep, REPO / "suites"))
        if (unread := metrics_check(ep)) is not None:
            checks.append(unread)
    return checks


def _evidence(matrix, cell_id: str, checks: list) -> dict:
    cell = matrix.cell(cell_id)
    host = Host(f"{cell.hardware}-01", cell.hardware, address="10.0.0.1", accelerators=8)
    when = NOW.isoformat(timespec="seconds")
    return evidence.build(
        cell,
        checks,
        [Lease(host, 0, "r1", "/tmp/x")],
        {host.name: HostFacts(host.name, True, accelerators_seen=8)},
        held={},
        run={
            "id": f"r-{cell.hardware}",
            "started": when,
            "finished": when,
            "by": "t",
            "controller": "t",
            "worker": "master",
            "harness_version": "0",
        },
        recipe=render(matrix, cell, placeholder_hosts(matrix, cell, 1)),
        engine={"name": "sglang", "version": "0.5.23"},
        records=[],
        logs=[],
        verdict="failed" if any(c.verdict == FAILED for c in checks) else "passed",
    )


def test_the_report_tables_accepted_length_by_hardware_and_workload(matrix, tmp_path):
    # 128 tokens a request, 64 drafted: code accepts all 64 (128 / 64 verify calls = 2.0), prose
    # 44 (int(64 x 0.7); 128 / 84 = 1.524)
    good = StubConfig(metrics_format="sglang", draft_per_token=0.5, accept_rate=0.7, accept_when=CODE)
    b300 = _measure(matrix, B300, good)
    by_name = {c.name: c for c in b300}
    assert by_name["speculative:accept_length@chat-code"].measured == 2.0
    assert by_name["speculative:accept_length@chat-prose"].measured == round(128 / 84, 4)
    assert all(c.passed for c in b300), [c.message for c in b300]
    # the MI355X server's /metrics carry no SGLang counters (llama.cpp's text): they cannot be read
    unread = _measure(matrix, MI355X, StubConfig(metrics_format="none"))
    assert [c.verdict for c in unread if c.name.startswith("speculative:")] == [FAILED, FAILED]
    assert any(c.name == "engine:metrics" for c in unread)
    for doc in (_evidence(matrix, B300, b300), _evidence(matrix, MI355X, unread)):
        evidence.write(tmp_path, doc)

    status = {r.cell.id: r.status for r in rows(matrix, tmp_path, now=NOW)}
    assert status[B300] == "Verified" and status[MI355X] == "Failed"
    write_acceptance(matrix, tmp_path, now=NOW)
    md = (tmp_path / "acceptance.md").read_text().replace("\\_", "_").replace("\\-", "-")
    section = md.split("## Speculative acceptance", 1)[1]
    assert "| hardware | cell | chat-code (code) | chat-prose (prose) |" in section
    assert f"| b300 | {B300} | 2.000 | 1.524 |" in section
    assert f"| mi355x | {MI355X} | unreadable | unreadable |" in section
    html = (tmp_path / "acceptance.html").read_text()
    assert "<h2>Speculative acceptance</h2>" in html and f'<tr data-accepted="{B300}">' in html
