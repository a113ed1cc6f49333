"""A server's Prometheus `/metrics` text, and what every engine's counters come to.

Each engine module reads its own series names into these shapes (`Engine.totals`,
`Engine.spec_counters`); the checks (`dayzero.checks.server_metrics`, `.speculative`) and the
submission checker only ever see the shapes. A counter that a readable snapshot does not show
counts as 0: prometheus_client prints a labelled counter only once it has been incremented.
Samples are summed over label sets and targets.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, fields

SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{[^}]*\})?\s+(\S+)")


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


def readable(snapshot) -> bool:
    return (
        isinstance(snapshot, Mapping)
        and snapshot.get("status") == 200
        and isinstance(snapshot.get("body"), str)
    )


@dataclass(frozen=True)
class Totals:
    """Cumulative counters of one snapshot (or, subtracted, of one phase); None: not published."""

    prompt: float | None = None  # prompt tokens, cached included (SGLang, vLLM)
    prompt_evaluated: float | None = None  # prompt tokens computed, cached excluded (llama.cpp)
    cached: float | None = None
    generated: float = 0.0
    requests: float | None = None
    server_s: float = 0.0  # the server's own time for the requests, summed
    verify_calls: float | None = None
    ttft_s: float | None = None  # the server's own time to first token, summed (its histogram)
    first_tokens: float | None = None  # requests timed to their first token (its histogram)

    def __sub__(self, other: Totals) -> Totals:
        def minus(a, b):
            return None if a is None or b is None else a - b

        return Totals(*(minus(getattr(self, f.name), getattr(other, f.name)) for f in fields(self)))

    def __add__(self, other: Totals) -> Totals:
        def plus(a, b):
            return b if a is None else a if b is None else a + b

        return Totals(*(plus(getattr(self, f.name), getattr(other, f.name)) for f in fields(self)))


@dataclass(frozen=True)
class SpecCounters:
    """Speculative decoding's counters: drafts (verification steps), draft tokens, accepted ones."""

    drafts: float = 0.0
    draft_tokens: float = 0.0
    accepted: float = 0.0

    def __sub__(self, other: SpecCounters) -> SpecCounters:
        return SpecCounters(
            self.drafts - other.drafts, self.draft_tokens - other.draft_tokens, self.accepted - other.accepted
        )

    def __add__(self, other: SpecCounters) -> SpecCounters:
        return SpecCounters(
            self.drafts + other.drafts, self.draft_tokens + other.draft_tokens, self.accepted + other.accepted
        )

    @property
    def accept_length(self) -> float | None:
        return round(1 + self.accepted / self.drafts, 4) if self.drafts > 0 else None

    @property
    def acceptance_rate(self) -> float | None:
        return round(self.accepted / self.draft_tokens, 4) if self.draft_tokens > 0 else None


def draft_counters(text: str, names: tuple[str, str, str]) -> SpecCounters | None:
    """(drafts, draft tokens, accepted tokens) read from three counters, as llama.cpp and vLLM
    publish them; None when the text has none of them (speculative decoding off)."""
    values = parse_prometheus(text)
    if not any(n in values for n in names):
        return None
    return SpecCounters(*(values.get(n, 0.0) for n in names))
