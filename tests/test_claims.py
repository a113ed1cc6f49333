"""Claims: the published numbers a card answers to, reproduced or not by a cell's evidence."""

from __future__ import annotations

import datetime as dt
import re

import pytest
import yaml

from dayzero import cli, evidence
from dayzero.checks.claims import NOT_MEASURED, NOT_REPRODUCED, REPRODUCED, evaluate
from dayzero.checks.measurement import Measurement
from dayzero.checks.performance import check_floor
from dayzero.errors import ConfigError
from dayzero.lab.lease import Lease
from dayzero.lab.preflight import HostFacts
from dayzero.report.acceptance import rows, write_acceptance
from dayzero.spec.card import Claim, claims_for, floors_for
from dayzero.spec.inventory import Host
from dayzero.spec.matrix import load_matrix
from dayzero.spec.recipe import placeholder_hosts, render

from .conftest import REPO

NOW = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)
AGENTX = "kimi-k3.1-pro/gb300/high_throughput/baseline"
AGENTX_DFLASH = "kimi-k3.1-pro/gb300/high_throughput/dflash"
SINGLE_USER = "kimi-k3.1-pro/b300/low_latency/dflash"


@pytest.fixture(scope="module")
def matrix():
    return load_matrix(REPO / "matrix")


def test_both_headline_claims_are_card_data(matrix):
    card = matrix.card(matrix.cell(AGENTX))
    by_id = {c.id: c for c in card.claims}
    agentx = by_id["agentx-33.7k-per-gpu-gb300"]
    assert (agentx.value, agentx.unit, agentx.workload, agentx.metric) == (
        33700,
        "per_accelerator",
        "agentx",
        "output_throughput",
    )
    single = by_id["single-user-450-dflash2-megakernel"]
    assert (single.value, single.unit, single.concurrency) == (450, "per_user", 1)
    assert "no 0.5.23 flag for MegaKernel" in single.needs
    # prerequisites select the cells; "mode" concurrency becomes the cell's mode's
    (c,) = claims_for(card, matrix.cell(AGENTX))
    assert c.concurrency == 1024
    assert claims_for(card, matrix.cell("kimi-k3.1-pro/b300/high_throughput/baseline")) == []
    assert [c.id for c in claims_for(card, matrix.cell(SINGLE_USER))] == [single.id]


def test_recipe_prints_the_claim_beside_the_command(capsys):
    assert cli.main(["recipe", AGENTX]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    claim = next(i for i, line in enumerate(lines) if line.startswith("# claim agentx-33.7k-per-gpu-gb300"))
    assert "33700 output_throughput per accelerator on agentx at c1024" in lines[claim]
    assert claim < next(i for i, line in enumerate(lines) if "sglang serve" in line)
    assert cli.main(["recipe", SINGLE_USER]) == 0
    assert "#   needs data: no 0.5.23 flag for MegaKernel" in capsys.readouterr().out


def _evidence(matrix, cell_id: str, per_accelerator: float | None, reps: int = 3) -> dict:
    """Evidence of one run of `cell_id` on two 4-GPU GB300 trays (8 accelerators preflight saw),
    its floors measured at `per_accelerator` tok/s per accelerator (None: measured nothing)."""
    cell = matrix.cell(cell_id)
    card = matrix.card(cell)
    hosts = [Host(f"gb300-0{i}", cell.hardware, address=f"10.0.0.{i}", accelerators=4) for i in (1, 2)]
    leases = [Lease(h, 0, "r1", f"/tmp/{h.name}") for h in hosts]
    facts = {h.name: HostFacts(h.name, True, accelerators_seen=4) for h in hosts}
    checks = []
    if per_accelerator is not None:
        for floor in floors_for(card, cell):
            summaries = tuple(
                {
                    "output_throughput": per_accelerator * 8 * k,
                    "output_throughput_per_accelerator": per_accelerator * k,
                    "median_interactivity": 40.0,
                }
                for k in (0.99, 1.0, 1.01)[:reps]
            )
            checks.append(check_floor(floor, Measurement(floor.workload, floor.concurrency, summaries)))
    when = NOW.isoformat(timespec="seconds")
    return evidence.build(
        cell,
        checks,
        leases,
        facts,
        held={},
        run={
            "id": f"r-{cell.strategy}",
            "started": when,
            "finished": when,
            "by": "t",
            "controller": "t",
            "worker": "master",
            "harness_version": "0",
        },
        recipe=render(matrix, cell, placeholder_hosts(matrix, cell, 2 if cell.hardware == "gb300" else 1)),
        engine={"name": "sglang", "version": "0.5.23"},
        records=[],
        logs=[],
        verdict="passed",
        claims=claims_for(card, cell),
    )


def test_generated_evidence_set_shows_reproduced_not_reproduced_and_not_measured(matrix, tmp_path):
    docs = [
        _evidence(matrix, AGENTX, 35_000.0),  # 35000 / 33700 = 1.039
        _evidence(matrix, AGENTX_DFLASH, 20_000.0),  # 20000 / 33700 = 0.593
        _evidence(matrix, SINGLE_USER, 300.0),
    ]
    for doc in docs:
        evidence.write(tmp_path, doc)  # the evidence schema holds them
    by_cell = {d["cell"]: d["claims"] for d in docs}
    (a,) = by_cell[AGENTX]
    assert (a["status"], a["measured"], a["ratio"]) == (REPRODUCED, 35000, 1.039)
    (b,) = by_cell[AGENTX_DFLASH]
    assert (b["status"], b["measured"], b["ratio"]) == (NOT_REPRODUCED, 20000, 0.593)
    assert b["reason"] == "median 20000 over 3 run(s) < 30330 (33700 - 10%)"
    (c,) = by_cell[SINGLE_USER]
    assert (c["status"], c["measured"], c["ratio"]) == (NOT_MEASURED, None, None)
    assert c["reason"].startswith("needs data: no 0.5.23 flag for MegaKernel")

    write_acceptance(matrix, tmp_path, now=NOW)
    md = (tmp_path / "acceptance.md").read_text()
    # Markdown-escaped as every evidence value is (underscores, comparison signs)
    table = md.split("## Claims", 1)[1].replace("\\_", "_").replace("&gt;", ">").replace("&lt;", "<")
    assert "| cell | claim | published | measured | ratio | status | why |" in table
    row = {line.split(" | ")[0].strip("| "): line for line in table.splitlines() if line.startswith("| kimi")}
    assert re.search(
        r"\| 35000 \| 1\.039x \| reproduced \| median 35000 over 3 run\(s\) >= 30330", row[AGENTX]
    )
    assert "| 33700 tok/s per accelerator (agentx at c1024) |" in row[AGENTX]
    assert "| 20000 | 0.593x | not reproduced | median 20000" in row[AGENTX_DFLASH]
    assert "| - | - | not measured | needs data: no 0.5.23 flag for MegaKernel" in row[SINGLE_USER]
    html = (tmp_path / "acceptance.html").read_text()
    assert "<h2>Claims</h2>" in html and 'data-claim="agentx-33.7k-per-gpu-gb300"' in html
    # the acceptance detail says it too; a claim never changes the cell's status
    detail = {r.cell.id: r for r in rows(matrix, tmp_path, now=NOW)}
    assert detail[AGENTX_DFLASH].status == "Verified"
    assert "claims: agentx-33.7k-per-gpu-gb300 not reproduced (0.593x)" in detail[AGENTX_DFLASH].detail


def test_a_cell_that_did_not_measure_the_workload_says_why(matrix):
    doc = _evidence(matrix, AGENTX, None)
    (c,) = doc["claims"]
    assert (
        c["status"] == NOT_MEASURED
        and c["reason"] == "no measurement of workload agentx at c1024 in this run"
    )


def test_per_user_is_each_streams_decode_rate_and_per_node_divides_by_hosts():
    doc = {
        "hosts": [{"accelerators": 8, "facts": {"accelerators_seen": 8}}] * 2,
        "checks": [
            {
                "kind": "performance",
                "measured": 1.0,
                "message": "",
                "details": {
                    "workload": "w",
                    "concurrency": 1,
                    "summaries": [{"output_throughput": 400.0, "median_interactivity": 460.0}],
                },
            }
        ],
    }
    user = Claim("u", "s", "output_throughput", 450, "per_user", "w", concurrency=1)
    r = evaluate(user, doc)
    assert (r.status, r.measured, r.ratio) == (REPRODUCED, 460.0, 1.022)  # not 400 / 1: the stream's own rate
    node = Claim("n", "s", "output_throughput", 250, "per_node", "w", tolerance=0.0)
    assert (evaluate(node, doc).status, evaluate(node, doc).measured) == (NOT_REPRODUCED, 200.0)
    gpu = Claim("g", "s", "output_throughput", 25, "per_accelerator", "w", tolerance=0.0)
    assert evaluate(gpu, doc).measured == 25.0  # 400 / (2 hosts x 8 seen)
    invalid = {**doc, "checks": [{**doc["checks"][0], "measured": None, "message": "invalid: saturated"}]}
    assert evaluate(user, invalid).status == NOT_MEASURED and "saturated" in evaluate(user, invalid).reason


def test_a_bad_claim_is_refused_naming_the_field(matrix_dir):
    path = matrix_dir / "models" / "kimi-k3.1-pro.yaml"
    card = yaml.safe_load(path.read_text())
    card["claims"][1]["metric"] = "median_ttft_ms"
    path.write_text(yaml.safe_dump(card, sort_keys=False))
    with pytest.raises(ConfigError, match=r"claims\[1\]\.metric.*expected a throughput"):
        load_matrix(matrix_dir)
