"""The client-versus-server TTFT gap against SGLang's own TTFT histogram, on hand-made snapshots
(the histogram's names as SGLang 0.5.23 prints them; a real run's are checked in the main job)."""

from __future__ import annotations

from dayzero.checks.server_latency import BOUND_MS, HISTOGRAM, histogram, phase_gap


def body(ttft_sum: float, count: int) -> str:
    return (
        "# TYPE sglang:time_to_first_token_seconds histogram\n"
        f'sglang:time_to_first_token_seconds_bucket{{le="0.1",model_name="m"}} 0.0\n'
        f'sglang:time_to_first_token_seconds_bucket{{le="+Inf",model_name="m"}} {count}\n'
        f'sglang:time_to_first_token_seconds_sum{{model_name="m"}} {ttft_sum}\n'
        f'sglang:time_to_first_token_seconds_count{{model_name="m"}} {count}\n'
        f'sglang:num_requests_total{{model_name="m"}} {count}\n'
    )


def doc(before: tuple[float, int], after: tuple[float, int]) -> dict:
    def snap(values):
        return [{"target": "server", "url": "http://h:1/metrics", "status": 200, "body": body(*values)}]

    return {"phase": "perf-w-c1-r0", "source": "sglang", "before": snap(before), "after": snap(after)}


def answer(ttfts: list[float], warm: tuple[float, int] | None = None, error_at: int = -1) -> dict:
    records = [
        {
            "send": 10.0 * i + 1,
            "first": 10.0 * i + 1 + t,
            "end": 10.0 * i + 5,
            "error": "x" * (i == error_at) or None,
        }
        for i, t in enumerate(ttfts)
    ]
    out = {"records": records}
    if warm is not None:
        out["warmup"] = {"requests": warm[1], "ttft_s": warm[0], "first_tokens": warm[1]}
    return out


def test_the_gap_is_the_client_mean_above_sglangs_own_mean_with_the_warmup_taken_out():
    # server: 4 requests (2 warm-up) took 2.0 s to first token in all; client: warm-up 1.1 s,
    # measured 0.55 + 0.55 s: the client is 200 ms above on the four, 50 ms each
    gap = phase_gap([answer([0.55, 0.55], warm=(1.1, 2))], [doc((3.0, 5), (5.0, 9))])
    assert gap.source == HISTOGRAM.format("SGLang") and gap.judged
    assert gap.gap_ms == 50.0 and gap.bound_ms == BOUND_MS and not gap.flagged


def test_a_client_far_above_the_server_is_flagged_at_any_load():
    """SGLang's TTFT starts at the request's arrival: a queue is in it, so the gap is judged."""
    gap = phase_gap([answer([0.9, 0.9])], [doc((0.0, 0), (1.0, 2))], queues=True)
    assert gap.judged and gap.gap_ms == 400.0 and gap.flagged


def test_repetitions_pool_their_phases():
    gap = phase_gap(
        [answer([0.2]), answer([0.4])],
        [doc((0.0, 0), (0.1, 1)), doc((0.1, 1), (0.4, 2))],
    )
    assert gap.gap_ms == 100.0  # (0.6 - 0.4) s over 2 requests


def test_counts_that_disagree_leave_the_gap_not_measured_with_why():
    gap = phase_gap([answer([0.2, 0.3, 0.4], error_at=2)], [doc((0.0, 0), (0.6, 3))])
    assert gap.gap_ms is None and not gap.flagged and "timed 3 first tokens, the client 2" in gap.reason


def test_a_warmup_without_its_own_ttfts_cannot_be_taken_out():
    older = answer([0.2])
    older["warmup"] = {"requests": 2, "e2e_s": 3.0}  # a client before warm-up TTFTs were kept
    gap = phase_gap([older], [doc((0.0, 0), (0.6, 3))])
    assert gap.gap_ms is None and "warm-up" in gap.reason


def test_no_histogram_source_no_gap():
    assert histogram([answer([0.2])], []) is None
    llama = doc((0.0, 0), (0.2, 1)) | {"source": "llama.cpp"}
    assert histogram([answer([0.2])], [llama]) is None
    gap = phase_gap([answer([0.2])], [llama])
    assert gap.gap_ms is None and gap.reason == "the engine gave no account of its TTFT"
