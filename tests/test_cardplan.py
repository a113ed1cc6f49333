"""The benchmark card's plan: what the card asks each hardware kind to measure, point by point.

Kimi's cards, with no evidence, list every sweep point "not measured" with its SLO, the claims
that apply with their prerequisites, and the fit; the embedded default's card, after the
submission corpus's synthetic run, fills its plan in from evidence. Pure (no engine, no browser:
the Kimi card's page was looked at in Chromium by hand, see the issue note).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dayzero.report import cardplan
from dayzero.report.benchcard import build
from dayzero.spec.matrix import load_matrix

from .submission_corpus.synthetic import synthetic_run

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def cards(tmp_path_factory):
    root = tmp_path_factory.mktemp("plan")
    matrix = load_matrix(REPO / "matrix")
    synthetic_run(matrix, root / "reports", REPO / "suites" / "goldens")
    return {(c.model, c.kind): c for c in build(matrix, root / "reports")}


def test_kimi_s_plan_lists_every_point_not_measured_with_its_slo_per_mode(cards):
    card = cards[("kimi-k3.1-pro", "b300")]
    by_sweep = {first.sweep: (first, rows) for first, rows in cardplan.grouped(card.plan)}
    assert set(by_sweep) == {"conc_ll", "conc", "rate", "ctx"}
    assert all(r.status == cardplan.NOT_MEASURED for r in card.plan)
    assert by_sweep["conc_ll"][0].slo == "TTFT <= 3000 ms, TPOT <= 10 ms"  # the low-latency mode's own
    assert by_sweep["conc"][0].slo == "TTFT <= 10000 ms, TPOT <= 50 ms"  # the workload's
    ctx = [r.point for r in by_sweep["ctx"][1]]
    assert ctx[0] == "isl8192" and ctx[-1] == "isl1048320"  # up to the 1M context: the indexer question
    md = "\n".join(cardplan.markdown(card.plan, card.claim_lines, card.fit))
    assert "Plan: 0 of 20 sweep points measured" in md and "isl1048320: not measured" in md


def test_a_kind_s_plan_leaves_out_its_unsupported_cells(cards):
    h100 = cards[("kimi-k3.1-pro", "h100")]  # Low-Latency TP8 does not fit on 8 H100s
    assert "conc_ll" not in {r.sweep for r in h100.plan}
    assert all("low_latency" not in r.cells for r in h100.plan)
    assert not h100.claim_lines  # the single-user claim needs a Low-Latency cell
    assert cardplan.NO_CLAIM in "\n".join(cardplan.markdown(h100.plan, h100.claim_lines, h100.fit))


def test_claims_show_their_prerequisites_and_needs(cards):
    (agentx, single) = cards[("kimi-k3.1-pro", "gb300")].claim_lines
    assert agentx.startswith("agentx-33.7k-per-gpu-gb300: 33700 output_throughput per accelerator on agentx")
    assert "prerequisites: hardware gb300, mode high_throughput" in agentx
    assert "not measured in any of 4 cell(s)" in agentx  # baseline and dflash, with and without hicache
    assert "needs: no 0.5.23 flag for MegaKernel" in single


def test_the_fit_on_each_card_answers_for_its_kind(cards):
    fit = cards[("kimi-k3.1-pro", "b300")].fit
    assert "weights at mxfp4 (4.25 bits): 1488 GB (the card's); experts only, the rest bf16" in fit
    (kind,) = [line for line in fit if line.startswith("8 x b300 (")]
    assert "mxfp4 weights fit (185.9 GB of 273.5 GB a rank), cache needs data" in kind  # TP8, per rank
    assert any("needs data: architecture.layers[0].kv_lora_rank (dsa)" in line for line in fit)


def test_the_embedded_default_s_plan_is_filled_in_from_evidence(cards):
    card = cards[("smollm2-135m", "cpu")]
    measured = {(r.sweep, r.point): r.status for r in card.plan}
    assert set(measured) >= {("llama.cpp conc", "c1"), ("llama.cpp rate", "q1"), ("llama.cpp ctx", "isl4032")}
    assert all(s != cardplan.NOT_MEASURED for s in measured.values())
    assert "tok/s/acc" in measured[("llama.cpp conc", "c1")]
    assert "decode/token p50" in measured[("llama.cpp ctx", "isl4032")]
