"""Speculative acceptance length per workload, from the server's own counters diffed around a run.

Acceptance length is a health canary: a numerics bug in the target or the draft drops it sharply
while throughput may still pass a loose floor. Counters are cumulative since the server started,
so each workload runs alone between two reads and only the difference is reported:
accept length = 1 + accepted tokens / drafts (verification steps). llama.cpp and vLLM expose
Prometheus counters at /metrics; SGLang reports a cumulative average in /server_info, which can
only be read as-is (stated in the result).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from dayzero.checks import FAILED, PASSED, CheckResult

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
SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{[^}]*\})?\s+(\S+)")


def source_for(engine: str) -> tuple[str, str]:
    """(kind, path) where the engine publishes speculative counters."""
    name = engine.lower()
    if name.startswith("sglang"):
        return "sglang", "/server_info"
    if name.startswith("vllm"):
        return "vllm", "/metrics"
    return "llama.cpp", "/metrics"


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
    names = PROMETHEUS.get(kind)
    if names is None:
        return None
    values = parse_prometheus(text)
    if not any(n in values for n in names):
        return None
    return SpecCounters(*(values.get(n, 0.0) for n in names))


def sglang_accept_length(server_info: Mapping) -> float | None:
    """SGLang's cumulative `avg_spec_accept_length` (behind a PD router: under decode[0])."""
    info = server_info
    if "decode" in info and info["decode"]:
        info = info["decode"][0]
    states = info.get("internal_states") or [{}]
    value = states[0].get("avg_spec_accept_length")
    return float(value) if value is not None else None


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
    before: SpecCounters | float | None,
    after: SpecCounters | float | None,
    records: Sequence[Mapping],
    bound: float | None,
) -> CheckResult:
    """One workload's acceptance length; fails below the card's bound or with request errors."""
    name = f"speculative:accept_length@{workload}"
    errors = sum(1 for r in records if r.get("error"))
    details: dict = {"workload": workload, "tag": tag, "source": kind, "timings": from_timings(records)}
    if kind == "sglang":
        length = after if isinstance(after, float) else None
        details["note"] = "SGLang avg_spec_accept_length is cumulative since server start"
    elif isinstance(before, SpecCounters) and isinstance(after, SpecCounters):
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
    else:
        length = None
    problems = []
    if errors:
        problems.append(f"{errors} request error(s)")
    if length is None and kind != "sglang" and not isinstance(after, SpecCounters):
        problems.append("the server publishes no speculative counters")
    if bound is not None and (length or 1.0) < bound:
        problems.append(f"accept length {length or 1.0:.3f} below {bound:g}")
    if length is None and isinstance(after, SpecCounters):
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
