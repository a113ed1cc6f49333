"""The roofline: what a kind of hardware can do at most for a model, from published figures.

The math is checked on values computed by hand; the matrix's figures are checked for what a
ceiling needs (a source, a margin) and against the claims the Kimi card answers to (a ceiling
that refused a published number would be wrong, not the number).
"""

from __future__ import annotations

import math

import pytest

from dayzero.checks.roofline import Ceiling, above, speed
from dayzero.lab.preflight import BANDWIDTH_PROBE, parse_bandwidth
from dayzero.lab.transport.local import LocalTransport
from dayzero.spec.inventory import Host
from dayzero.spec.matrix import Hardware, Peak, load_matrix
from dayzero.submission.physics import cell_ceiling

from .submission_corpus.lab import REPO

KIMI_BYTES = 104e9 * 0.53125  # 104B active parameters at 4.25 bits (MXFP4)


def test_memory_bound_one_stream_reads_the_active_weights_once_per_token():
    c = Ceiling(bandwidth_gbs=20, weights_bytes=80e6, active_parameters=135e6)
    assert c.per_stream == pytest.approx(250.0)  # 20e9 B/s / 80e6 B per step
    assert c.aggregate(4) == pytest.approx(1000.0)  # one read per step serves the whole batch
    assert c.compute_bound is None


def test_speculative_decoding_raises_the_memory_bound_by_the_tokens_per_step():
    c = Ceiling(bandwidth_gbs=20, weights_bytes=80e6, active_parameters=135e6, tokens_per_step=3)
    assert c.per_stream == pytest.approx(750.0)


def test_compute_bound_caps_the_aggregate_at_large_batch():
    # one B300 node: 8 x 8000 GB/s, 8 x 13125 dense FP4 TFLOPS, Kimi K3.1 Pro's active weights
    c = Ceiling(bandwidth_gbs=64000, weights_bytes=KIMI_BYTES, active_parameters=104e9, compute_tflops=105000)
    assert c.per_stream == pytest.approx(1158.371, rel=1e-6)  # 64e12 / 55.25e9
    assert c.compute_bound == pytest.approx(504807.69, rel=1e-6)  # 105e15 / (2 x 104e9)
    assert c.aggregate(256) == pytest.approx(296542.99, rel=1e-6)  # memory-bound: 256 x 1158.37
    assert c.aggregate(1024) == pytest.approx(504807.69, rel=1e-6)  # compute-bound


def test_above_is_the_share_by_which_a_value_exceeds_its_ceiling():
    assert above(150, 100) == pytest.approx(0.5)
    assert above(90, 100) == pytest.approx(-0.1)


def record(send, first, end, tokens):
    return {"send": send, "first": first, "end": end, "usage": {"completion_tokens": tokens}, "error": None}


def test_speed_of_a_phase_from_its_raw_records():
    records = [
        record(0.0, 0.1, 1.0, 10),  # 0.9 s over 9 tokens after the first: 100 ms per token
        record(0.5, 0.6, 1.5, 10),
        record(2.0, 2.1, 2.2, 1),  # one token: no time per output token
        {**record(2.5, None, None, 0), "error": "refused"},
    ]
    s = speed(records)
    assert s.batch == 2  # the first two overlap
    assert s.tpot_ms == pytest.approx(100.0)
    assert s.per_stream == pytest.approx(10.0)
    assert s.aggregate == pytest.approx(21 / 2.2)  # output tokens / first send to last end


def test_speed_of_requests_one_after_another_is_batch_one():
    s = speed([record(0.0, 0.1, 1.0, 10), record(1.0, 1.1, 2.0, 10)])
    assert s.batch == 1


def test_speed_without_timed_requests_has_nothing_to_judge():
    s = speed([{**record(0, None, None, 0), "error": "x"}])
    assert s.per_stream is None and s.aggregate is None


# --- the figures -----------------------------------------------------------------------------------

MATRIX = load_matrix(REPO / "matrix")


def test_every_kind_with_figures_says_where_they_come_from_and_its_margin():
    for hw in MATRIX.hardware.values():
        if hw.peak is None:
            continue
        assert hw.peak.source.strip(), hw.name
        assert hw.peak.margin >= 1, hw.name
        assert all(v > 0 for v in hw.peak.compute_tflops.values()), hw.name


def test_the_kimi_cards_kinds_have_figures_where_a_public_one_is_known():
    with_figures = {n for n, hw in MATRIX.hardware.items() if hw.peak and hw.peak.memory_bandwidth_gbs}
    assert {"b300", "gb300", "b200", "gb200", "h200", "h100", "mi355x", "mi350x", "tpu7x"} <= with_figures
    assert {"trainium2", "trainium3"} <= with_figures
    assert MATRIX.hardware["cpu"].peak.memory_bandwidth_gbs is None  # measured on each host


def test_every_engine_of_every_card_states_its_active_weights():
    for (model, engine), card in MATRIX.engine_cards.items():
        assert card.roofline is not None, (model, engine)
        assert card.roofline.parameters > 0 and card.roofline.bytes_per_parameter > 0


def test_the_kimi_cards_published_claims_lie_under_the_roofline_of_their_kinds():
    card = MATRIX.cards["kimi-k3.1-pro"]
    checked = 0
    for claim in card.claims:
        for cell in MATRIX.cells:
            if cell.model != card.model or not cell.supported or not _selects(claim.when, cell):
                continue
            hw = MATRIX.hardware[cell.hardware]
            accelerators = cell.nodes * hw.accelerators_per_node
            c = cell_ceiling(hw, card.roofline, accelerators, [])
            if isinstance(c, str):
                continue
            conc = card.mode(cell.mode).concurrency
            if claim.unit == "per_user":
                assert claim.value <= c.per_stream, (claim.id, cell.id, c.per_stream)
            else:
                assert claim.value * accelerators <= c.aggregate(conc), (claim.id, cell.id)
            checked += 1
    assert checked >= 5


def _selects(when, cell) -> bool:
    from dayzero.spec.card import matches

    return matches(when, cell)


def test_a_kind_without_figures_is_not_checked_and_says_so():
    ppu = Hardware("ppu_m890", "T-Head", None, None, "ppu-smi")
    card = MATRIX.cards["kimi-k3.1-pro"]
    assert cell_ceiling(ppu, card.roofline, 16, []) == "not checked: no peak figures for ppu_m890"


def test_a_measured_kind_takes_each_hosts_measured_bandwidth():
    cpu = Hardware("cpu", "any", None, 1, "nproc", peak=Peak(margin=1.5, source="measured"))
    card = MATRIX.cards["smollm2-135m"]
    hosts = [
        {"name": "a", "facts": {"memory_bandwidth_gbs": 20.0}},
        {"name": "b", "facts": {"memory_bandwidth_gbs": 10.0}},
    ]
    c = cell_ceiling(cpu, card.roofline, 2, hosts)
    assert c.bandwidth_gbs == pytest.approx(30.0)
    missing = cell_ceiling(cpu, card.roofline, 1, [{"name": "a", "facts": {}}])
    assert isinstance(missing, str) and "a" in missing and "memory bandwidth" in missing


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -1.0, 0, "fast", True])
def test_a_measured_bandwidth_that_is_no_number_is_refused(value):
    cpu = Hardware("cpu", "any", None, 1, "nproc", peak=Peak(margin=1.5, source="measured"))
    card = MATRIX.cards["smollm2-135m"]
    got = cell_ceiling(cpu, card.roofline, 1, [{"name": "a", "facts": {"memory_bandwidth_gbs": value}}])
    assert isinstance(got, str)


# --- the cpu kind's figure, measured by preflight ---------------------------------------------------


def test_parse_bandwidth():
    assert parse_bandwidth("37.19\n") == pytest.approx(37.19)
    assert parse_bandwidth("Traceback ...") is None
    assert parse_bandwidth("nan") is None
    assert parse_bandwidth("-3") is None


def test_the_bandwidth_probe_runs_on_a_host_and_reads_a_positive_figure(tmp_path):
    host = Host(name="here", hardware="cpu", transport="local", workdir=str(tmp_path))
    result = LocalTransport(host).run(BANDWIDTH_PROBE, timeout=60)
    assert result.ok, result.stderr
    value = parse_bandwidth(result.stdout)
    assert value is not None and value > 0 and math.isfinite(value)


def test_preflight_measures_a_cpu_hosts_bandwidth_once_and_only_where_no_figure_is_published(tmp_path):
    from dayzero.lab.preflight import gather

    host = Host(name="here", hardware="cpu", transport="local", workdir=str(tmp_path))
    cpu = MATRIX.hardware["cpu"]
    assert gather(LocalTransport(host), cpu, {}).memory_bandwidth_gbs > 0
    assert (
        gather(LocalTransport(host), cpu, {}, bandwidth=12.5).memory_bandwidth_gbs == 12.5
    )  # measured before
    published = Hardware(
        "cpu", "any", None, 1, "nproc", peak=Peak(1.5, "a datasheet", memory_bandwidth_gbs=100)
    )
    assert cpu.measured and not published.measured  # gather measures only a `measured` kind
