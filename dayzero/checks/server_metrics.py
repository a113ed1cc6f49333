"""The server's own account of a phase: its Prometheus `/metrics` counters, read before and after.

A phase's snapshots (`records/<phase>.metrics.json`, named by `dayzero.run.records`) hold the raw
text of every target's `/metrics` just before the phase's requests and just after them; the
difference of the counters is what the server says the phase cost it. Counters per engine:

llama.cpp (llama-server `--metrics`; names as its /metrics prints them, seen on the lab's build):
    llamacpp:prompt_tokens_total            prompt tokens evaluated (cached ones excluded)
    llamacpp:tokens_predicted_total         generated tokens
    llamacpp:prompt_seconds_total           + llamacpp:tokens_predicted_seconds_total: its time
    (no request counter: requests are counted from its log)

SGLang (`--enable-metrics`; names from sglang 0.5.23, sglang/srt/observability/metrics_collector.py,
`TokenizerMetricsCollector.observe_one_finished_request`, incremented once per finished request):
    sglang:prompt_tokens_total              prompt tokens, cached ones included
    sglang:cached_tokens_total              cached prompt tokens
    sglang:generation_tokens_total          generated tokens
    sglang:num_requests_total               finished requests
    sglang:e2e_request_latency_seconds_sum  its own end-to-end time, summed over requests
    sglang:spec_verify_calls_total          speculative verification calls (accept length =
                                            generated tokens / verify calls, as SGLang computes it)
    sglang:time_to_first_token_seconds      histogram (_sum, _count): its own TTFT per request,
                                            from arrival to first token (`checks.server_latency`)

A counter that a readable snapshot does not show counts as 0: prometheus_client prints a labelled
counter only once it has been incremented. Samples are summed over label sets and targets.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields

SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{[^}]*\})?\s+(\S+)")
PREFIX = {"llama.cpp": "llamacpp:", "sglang": "sglang:"}


def parse_prometheus(text: str) -> dict[str, float]:
    """Sample values summed over label sets (several engines or ranks report one series each)."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        match = SAMPLE.match(line.strip())
        if not match or line.startswith("#"):
            continue
        try:
            out[match.group(1)] = out.get(match.group(1), 0.0) + float(match.group(3))
        except ValueError:
            continue
    return out


@dataclass(frozen=True)
class Totals:
    """Cumulative counters of one snapshot (or, subtracted, of one phase); None: not published."""

    prompt: float | None = None  # prompt tokens, cached included (SGLang)
    prompt_evaluated: float | None = None  # prompt tokens computed, cached excluded (llama.cpp)
    cached: float | None = None
    generated: float = 0.0
    requests: float | None = None
    server_s: float = 0.0  # the server's own time for the requests, summed
    verify_calls: float | None = None
    ttft_s: float | None = None  # the server's own time to first token, summed (SGLang)
    first_tokens: float | None = None  # requests timed to their first token (SGLang)

    def __sub__(self, other: Totals) -> Totals:
        def minus(a, b):
            return None if a is None or b is None else a - b

        return Totals(*(minus(getattr(self, f.name), getattr(other, f.name)) for f in fields(self)))

    def __add__(self, other: Totals) -> Totals:
        def plus(a, b):
            return b if a is None else a if b is None else a + b

        return Totals(*(plus(getattr(self, f.name), getattr(other, f.name)) for f in fields(self)))


def totals(kind: str, text: str) -> Totals | None:
    """One target's counters, or None when the text is not that engine's /metrics."""
    prefix = PREFIX.get(kind)
    if prefix is None or not isinstance(text, str) or prefix not in text:
        return None
    v = parse_prometheus(text)
    if kind == "llama.cpp":
        if "llamacpp:tokens_predicted_total" not in v:
            return None
        return Totals(
            prompt_evaluated=v.get("llamacpp:prompt_tokens_total", 0.0),
            cached=v.get("llamacpp:prompt_tokens_cached_total"),
            generated=v["llamacpp:tokens_predicted_total"],
            server_s=v.get("llamacpp:prompt_seconds_total", 0.0)
            + v.get("llamacpp:tokens_predicted_seconds_total", 0.0),
        )
    return Totals(
        prompt=v.get("sglang:prompt_tokens_total", 0.0),
        cached=v.get("sglang:cached_tokens_total", 0.0),
        generated=v.get("sglang:generation_tokens_total", 0.0),
        requests=v.get("sglang:num_requests_total", 0.0),
        server_s=v.get("sglang:e2e_request_latency_seconds_sum", 0.0),
        verify_calls=v.get("sglang:spec_verify_calls_total", 0.0),
        ttft_s=v.get("sglang:time_to_first_token_seconds_sum", 0.0),
        first_tokens=v.get("sglang:time_to_first_token_seconds_count", 0.0),
    )


def readable(snapshot) -> bool:
    return (
        isinstance(snapshot, Mapping)
        and snapshot.get("status") == 200
        and isinstance(snapshot.get("body"), str)
    )


def summed(kind: str, snapshots: Iterable[Mapping]) -> Totals | None:
    """Every target's counters added up; None when a target's snapshot could not be read."""
    out = Totals()
    snapshots = list(snapshots or ())
    if not snapshots:
        return None
    for snap in snapshots:
        t = totals(kind, snap["body"]) if readable(snap) else None
        if t is None:
            return None
        out = out + t
    return out


def phase_totals(kind: str, doc: Mapping) -> Totals | None:
    """What the server counted between a phase's two snapshots; None if either is unreadable."""
    before, after = summed(kind, doc.get("before")), summed(kind, doc.get("after"))
    if before is None or after is None:
        return None
    return after - before
