"""The server's own /metrics as a second account of a phase: parsing, deltas, speculative counters.

SGLANG_* below is SGLang's Prometheus text as sglang 0.5.23 prints it: metric names, label names
and the `_total`/`_sum` samples come from its source, sglang/srt/observability/metrics_collector.py
(`TokenizerMetricsCollector`: prompt_tokens_total and generation_tokens_total labelled with
`is_streaming`, cached_tokens_total with `cache_source`, num_requests_total, spec_verify_calls_total,
the e2e_request_latency_seconds histogram; `SchedulerMetricsCollector`: the spec_accept_length and
spec_num_draft_tokens gauges; labels from `tokenizer_metric_labels`: model_name, engine_type), the
version `tools/setup` installs into the engines' virtualenv for `dayzero lint`. LLAMA_* is what the
lab's llama-server build (tools/build-engine) printed at /metrics with --metrics.
"""

from __future__ import annotations

from dataclasses import replace

from dayzero.checks.server_metrics import Totals, phase_totals, totals
from dayzero.checks.speculative import SpecCounters, check_acceptance, counters
from dayzero.run.phases import Endpoint, metered, metrics_check, run_speculative
from dayzero.submission.engine_metrics import client_account, disagreements

LABELS = 'model_name="moonshotai/Kimi-K3.1-Pro",engine_type="unified"'


def sglang_text(
    prompt: float, cached: float, generated: float, requests: float, e2e: float, calls: float
) -> str:
    return f"""# HELP sglang:prompt_tokens_total Number of prefill tokens processed.
# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{{{LABELS},is_streaming="true"}} {prompt}
sglang:prompt_tokens_total{{{LABELS},is_streaming="false"}} 0.0
# HELP sglang:generation_tokens_total Number of generation tokens processed.
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{{{LABELS},is_streaming="true"}} {generated}
# HELP sglang:spec_verify_calls_total Number of speculative decoding verification calls.
# TYPE sglang:spec_verify_calls_total counter
sglang:spec_verify_calls_total{{{LABELS}}} {calls}
# HELP sglang:cached_tokens_total Number of cached prompt tokens by source (device/host/storage).
# TYPE sglang:cached_tokens_total counter
sglang:cached_tokens_total{{{LABELS},cache_source="device"}} {cached}
# HELP sglang:num_requests_total Number of requests processed.
# TYPE sglang:num_requests_total counter
sglang:num_requests_total{{{LABELS},is_streaming="true"}} {requests}
# HELP sglang:e2e_request_latency_seconds Histogram of End-to-end request latency in seconds
# TYPE sglang:e2e_request_latency_seconds histogram
sglang:e2e_request_latency_seconds_bucket{{{LABELS},le="0.1"}} 0.0
sglang:e2e_request_latency_seconds_bucket{{{LABELS},le="+Inf"}} {requests}
sglang:e2e_request_latency_seconds_count{{{LABELS}}} {requests}
sglang:e2e_request_latency_seconds_sum{{{LABELS}}} {e2e}
# HELP sglang:spec_accept_length Mean acceptance length of speculative decoding (accepted drafts ...
# TYPE sglang:spec_accept_length gauge
sglang:spec_accept_length{{{LABELS}}} 9.99
# HELP sglang:spec_num_draft_tokens Currently active speculative_num_draft_tokens (decouples ...
# TYPE sglang:spec_num_draft_tokens gauge
sglang:spec_num_draft_tokens{{{LABELS}}} 4.0
"""


# Before the first request: prometheus_client prints a labelled counter's HELP and TYPE only.
SGLANG_FRESH = """# HELP sglang:generation_tokens_total Number of generation tokens processed.
# TYPE sglang:generation_tokens_total counter
# HELP sglang:spec_verify_calls_total Number of speculative decoding verification calls.
# TYPE sglang:spec_verify_calls_total counter
"""

LLAMA = """# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed, excluding cached tokens
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total {prompt}
llamacpp:prompt_tokens_cached_total 0
llamacpp:prompt_seconds_total {prompt_s}
llamacpp:tokens_predicted_total {generated}
llamacpp:tokens_predicted_seconds_total {gen_s}
llamacpp:spec_decode_num_draft_tokens_total 0
llamacpp:spec_decode_num_accepted_tokens_total 0
llamacpp:spec_decode_num_drafts_total 0
"""


def snap(body: str, status: int = 200) -> list[dict]:
    return [{"target": "server[0]@h", "url": "http://h:1/metrics", "status": status, "body": body}]


def test_sglang_counters_read_as_its_source_defines_them():
    t = totals("sglang", sglang_text(100, 20, 400, 4, 8.5, 50))
    expected = Totals(prompt=100, cached=20, generated=400, requests=4, server_s=8.5, verify_calls=50)
    assert t == replace(expected, ttft_s=0.0, first_tokens=0.0)  # no TTFT histogram in this text
    fresh = totals("sglang", SGLANG_FRESH)
    assert fresh is not None and fresh.generated == 0 and fresh.verify_calls == 0  # absent = 0
    assert totals("sglang", "<html>404</html>") is None and totals("llama.cpp", SGLANG_FRESH) is None


def test_sglang_acceptance_per_workload_is_the_counter_delta_not_the_gauge():
    """accept length = generated / verify calls over the phase (SGLang's own per-request formula,
    tokenizer_manager: completion_tokens / spec_verify_ct), not the since-start gauge (9.99)."""
    before = counters("sglang", sglang_text(1000, 0, 5000, 40, 50.0, 2000))  # earlier workloads
    after = counters("sglang", sglang_text(1100, 0, 5600, 44, 60.0, 2200))
    r = check_acceptance("chat-code", "code", "sglang", before, after, [], bound=2.5)
    assert r.passed and r.measured == 3.0  # 600 tokens in 200 verify calls
    assert r.details["drafts"] == 200 and r.details["draft_tokens"] == 600 and r.details["accepted"] == 400
    low = check_acceptance("chat-code", "code", "sglang", before, after, [], bound=3.5)
    assert not low.passed and "below 3.5" in low.message


def test_a_phase_delta_is_checked_against_its_records():
    records = [
        {"id": f"r{i}", "send": 0.0, "end": 2.0, "usage": {"prompt_tokens": 25, "completion_tokens": 100}}
        for i in range(4)
    ]
    answer = {"records": records}
    doc = {
        "before": snap(sglang_text(0, 0, 0, 0, 0.0, 0)),
        "after": snap(sglang_text(100, 0, 400, 4, 7.9, 0)),
    }
    server = phase_totals("sglang", doc)
    client, why = client_account(answer, "sglang")
    assert not why and disagreements("sglang", server, client) == []
    doc["after"] = snap(sglang_text(100, 0, 400, 3, 8.5, 0))  # one request fewer, more server time
    found = disagreements("sglang", phase_totals("sglang", doc), client)
    assert [f for f, _ in found] == ["3 requests finished", "8.500 s of server time for the phase's requests"]
    assert phase_totals("sglang", {"before": snap("", status=None), "after": doc["after"]}) is None


def test_unreadable_metrics_leave_a_not_measured_check_and_a_failed_acceptance():
    """SGLang without --enable-metrics (a 404 at /metrics): the phase is kept, but the cell gets
    `engine:metrics` not measured and its acceptance check fails; never a pass."""
    from dayzero.run import plan
    from dayzero.spec import card as model_card
    from dayzero.spec.matrix import Cell

    from .test_workloads import ROOT

    c = model_card.parse(
        ROOT / "m.yaml",
        {
            "model": "m",
            "engine": {"name": "sglang"},
            "modes": {"x": {"concurrency": 1}},
            "workloads": {"chat-code": {"max_tokens": 4}},
            "speculative": [{"workloads": ["chat-code"], "num_prompts": 1}],
        },
    )
    kept: dict = {}

    def client(spec, timeout):
        if spec["action"] == "get":
            return {"status": 404, "body": "not found"}
        return {"records": [{"id": r["id"], "error": None} for r in spec["requests"]]}

    ep = Endpoint(
        "http://h:1",
        client,
        keep=lambda phase, answer: phase,
        say=lambda m: None,
        meters=(("server[0]@h", "http://h:1/metrics"),),
        keep_metrics=lambda phase, doc: kept.setdefault(phase, doc) and phase,
        engine="sglang",
    )
    [check] = run_speculative(c, Cell("m", "cpu", "x", "s"), ep, ROOT / "suites")
    assert not check.passed and "could not be read" in check.message
    assert kept["spec-chat-code"]["before"][0]["status"] == 404
    unread = metrics_check(ep)
    assert unread.verdict == "not_measured" and "spec-chat-code" in unread.message
    assert list(plan.speculative(c, Cell("m", "cpu", "x", "s"), ROOT / "suites"))


def test_llama_metrics_of_a_phase_and_no_meter_is_unread():
    body = LLAMA.format(prompt=64, prompt_s=0.5, generated=32, gen_s=1.0)
    assert totals("llama.cpp", body) == Totals(prompt_evaluated=64, cached=0, generated=32, server_s=1.5)
    ep = Endpoint("http://h:1", lambda spec, timeout: {"records": []}, keep=lambda p, a: p)
    answer, doc = metered(ep, "probes", lambda: {"records": []})
    assert doc["before"] == [] and ep.unread == ["probes"]  # no launch serves /metrics: not read
    assert SpecCounters() == counters("llama.cpp", body)


def test_a_cell_whose_engine_serves_no_metrics_stays_pending_never_verified(tmp_path):
    """End to end with the stub engine: launched without --metrics nothing reads /metrics, so the
    cell gets `engine:metrics` not measured and the acceptance table keeps it Pending; the same
    cell launched with --metrics (as every shipped card is) is Verified."""
    from dayzero.report.acceptance import rows
    from dayzero.run.cell import RunContext, new_run_id, run_cell
    from dayzero.spec.inventory import load_inventory
    from dayzero.spec.matrix import load_matrix

    from .stub_cells import stub_card, stub_inventory, stub_matrix

    statuses = {}
    for flag in (True, False):
        root = tmp_path / str(flag)
        card = stub_card()
        if not flag:
            card["recipe"]["command"] = [a for a in card["recipe"]["command"] if a != "--metrics"]
        matrix = load_matrix(stub_matrix(root, card))
        inventory = load_inventory(stub_inventory(root, ttft=0.01), set(matrix.hardware))
        ctx = RunContext(
            matrix, inventory, root / "reports", root / "goldens", new_run_id(), say=lambda m: None
        )
        cell = matrix.cell("stubby/cpu/low_latency/baseline")
        try:
            outcome = run_cell(ctx, cell)
        finally:
            ctx.close()
        names = {c.name: c.verdict for c in outcome.checks}
        assert ("engine:metrics" in names) is not flag and outcome.verdict == "passed"
        statuses[flag] = next(r for r in rows(matrix, root / "reports") if r.cell.id == cell.id).status
    assert statuses == {True: "Verified", False: "Pending"}


def test_sglang_acceptance_over_http_from_the_stub_engines_counters():
    """The stub engine serving SGLang's /metrics: acceptance per workload is the counters'
    difference around each workload's own phase (earlier traffic excluded), and the kept
    snapshots agree with the records as the checker holds them (tokens, requests, time)."""
    from dayzero.spec import card as model_card
    from dayzero.spec.matrix import Cell
    from devlab.stub import StubConfig, StubServer

    from .test_measurement_client import client, reqs
    from .test_workloads import ROOT

    c = model_card.parse(
        ROOT / "m.yaml",
        {
            "model": "m",
            "engine": {"name": "sglang"},
            "modes": {"x": {"concurrency": 2}},
            "workloads": {"chat-code": {"max_tokens": 8}, "chat-prose": {"max_tokens": 8}},
            "speculative": [{"workloads": ["chat-code", "chat-prose"], "num_prompts": 3}],
        },
    )
    kept, snaps = {}, {}
    cfg = StubConfig(draft_per_token=0.5, accept_rate=0.5, metrics_format="sglang")
    with StubServer(cfg) as stub:
        client({"action": "load", "url": stub.url, "concurrency": 1, "requests": reqs(5, 16)})  # earlier
        ep = Endpoint(
            stub.url,
            client,
            keep=lambda phase, answer: kept.setdefault(phase, answer) and phase,
            say=lambda m: None,
            meters=(("server[0]@local", stub.url + "/metrics"),),
            keep_metrics=lambda phase, doc: snaps.setdefault(phase, doc) and phase,
            engine="sglang",
        )
        checks = list(run_speculative(c, Cell("m", "cpu", "x", "s"), ep, ROOT / "suites"))
    for check in checks:  # per request: 8 tokens, 4 drafted, 2 accepted -> 6 verify calls
        assert check.passed and check.measured == round(8 / 6, 4), check.message
        assert check.details["drafts"] == 18 and check.details["accepted"] == 6
    for phase, doc in snaps.items():
        server = phase_totals("sglang", doc)
        client_side, why = client_account(kept[phase], "sglang")
        assert not why and server.requests == 3 and server.generated == 24
        assert disagreements("sglang", server, client_side) == []
