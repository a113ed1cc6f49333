"""Speculative acceptance length per workload, from the server's own counters diffed around a run.

Acceptance length is a health canary: a numerics bug in the target or the draft drops it sharply
while throughput may still pass a loose floor. Counters are cumulative since the server started,
so each workload runs alone between two reads of /metrics (the phase's snapshots, kept next to
its records) and only the difference is reported: accept length = 1 + accepted tokens / drafts
(verification steps). llama.cpp and vLLM publish draft and accepted-token counters; SGLang
publishes verification calls and generated tokens (`dayzero.checks.server_metrics`), whose ratio
is its own accept length. Counters that cannot be read fail the check: never a pass on no data.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from dayzero.checks import FAILED, PASSED, CheckResult
from dayzero.checks.server_metrics import parse_prometheus, readable, totals

PROMETHEUS = {
    # engine name in the model card -> (drafts, draft tokens, accepted tokens) counter names
    "llama.cpp": (
        "llamacpp:spec_decode_num_drafts_total",
        "llamacpp:spec_decode_num_draft_tokens_total",
        "llamacpp:spec_decode_num_accepted_tokens_total",
    ),
    "vllm": (
        "vllm:spec_decode_num_drafts_total",
        "vllm:spec_decode_num_draft_tokens_total",
        "vllm:spec_decode_num_accepted_tokens_total",
    ),
}


def source_for(engine: str) -> tuple[str, str]:
    """(kind, path) where the engine publishes speculative counters."""
    name = engine.lower()
    if name.startswith("sglang"):
        return "sglang", "/metrics"
    if name.startswith("vllm"):
        return "vllm", "/metrics"
    return "llama.cpp", "/metrics"


@dataclass(frozen=True)
class SpecCounters:
    drafts: float = 0.0
    draft_tokens: float = 0.0
    accepted: float = 0.0

    def __sub__(self, other: SpecCounters) -> SpecCounters:
        return SpecCounters(
            self.drafts - other.drafts, self.draft_tokens - other.draft_tokens, self.accepted - other.accepted
        )

    @property
    def accept_length(self) -> float | None:
        return round(1 + self.accepted / self.drafts, 4) if self.drafts > 0 else None

    @property
    def acceptance_rate(self) -> float | None:
        return round(self.accepted / self.draft_tokens, 4) if self.draft_tokens > 0 else None


def counters(kind: str, text: str) -> SpecCounters | None:
    if kind == "sglang":
        return _sglang_counters(text)
    names = PROMETHEUS.get(kind)
    if names is None:
        return None
    values = parse_prometheus(text)
    if not any(n in values for n in names):
        return None
    return SpecCounters(*(values.get(n, 0.0) for n in names))


def _sglang_counters(text: str) -> SpecCounters | None:
    """SGLang: verification calls are the drafts; generated tokens less one bonus token per call
    are the accepted ones, so 1 + accepted / drafts is SGLang's generated / verify calls."""
    t = totals("sglang", text)
    if t is None:
        return None
    steps = parse_prometheus(text).get("sglang:spec_num_draft_tokens")  # a gauge: tokens per step
    calls = t.verify_calls or 0.0
    return SpecCounters(calls, calls * (steps - 1) if steps else 0.0, t.generated - calls)


def from_snapshots(kind: str, snapshots) -> SpecCounters | None:
    """The counters of one /metrics snapshot of every target added up (every engine of a
    multi-role cell); None when there is none or one could not be read."""
    out = SpecCounters()
    snapshots = list(snapshots or ())
    for snap in snapshots:
        c = counters(kind, snap["body"]) if readable(snap) else None
        if c is None:
            return None
        out = SpecCounters(
            out.drafts + c.drafts, out.draft_tokens + c.draft_tokens, out.accepted + c.accepted
        )
    return out if snapshots else None


def from_timings(records: Sequence[Mapping]) -> dict:
    """llama.cpp's per-request `timings` (draft_n, draft_n_accepted): a cross-check of the counters."""
    drafted = sum((r.get("timings") or {}).get("draft_n", 0) for r in records)
    accepted = sum((r.get("timings") or {}).get("draft_n_accepted", 0) for r in records)
    return {
        "draft_tokens": drafted,
        "accepted": accepted,
        "acceptance_rate": round(accepted / drafted, 4) if drafted else None,
    }


def check_acceptance(
    workload: str,
    tag: str,
    kind: str,
    before: SpecCounters | None,
    after: SpecCounters | None,
    records: Sequence[Mapping],
    bound: float | None,
) -> CheckResult:
    """One workload's acceptance length from the counters' difference; fails below the card's
    bound, with request errors, or when the counters could not be read (never a pass on no data)."""
    name = f"speculative:accept_length@{workload}"
    errors = sum(1 for r in records if r.get("error"))
    details: dict = {"workload": workload, "tag": tag, "source": kind, "timings": from_timings(records)}
    length = None
    if isinstance(before, SpecCounters) and isinstance(after, SpecCounters):
        delta = after - before
        length = delta.accept_length
        details.update(
            {
                "drafts": delta.drafts,
                "draft_tokens": delta.draft_tokens,
                "accepted": delta.accepted,
                "acceptance_rate": delta.acceptance_rate,
            }
        )
    problems = []
    if errors:
        problems.append(f"{errors} request error(s)")
    if not isinstance(after, SpecCounters) or not isinstance(before, SpecCounters):
        problems.append("the server's speculative counters could not be read before and after")
    if bound is not None and (length or 1.0) < bound:
        problems.append(f"accept length {length or 1.0:.3f} below {bound:g}")
    if length is None and isinstance(after, SpecCounters) and isinstance(before, SpecCounters):
        shown = "no drafts made (accept length 1.0)"
    elif length is None:
        shown = "accept length unknown"
    else:
        shown = f"accept length {length:.3f}"
        if details.get("acceptance_rate") is not None:
            shown += (
                f" ({details['accepted']:g}/{details['draft_tokens']:g} draft tokens accepted"
                f" in {details['drafts']:g} drafts)"
            )
    return CheckResult(
        name,
        "health",
        FAILED if problems else PASSED,
        f"{tag}: {shown}" + (f" -- {'; '.join(problems)}" if problems else ""),
        measured=length if length is not None else (1.0 if isinstance(after, SpecCounters) else None),
        bound=bound,
        details=details,
    )
