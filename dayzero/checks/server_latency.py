"""The server as the arbiter of latency: the client's TTFT held to the engine's own account (pure).

Independent clients at high concurrency disagree on TTFT by tens of percent (each adds its own
scheduling, parsing and network); the engine knows when it took each prompt and when it produced
the first token. A client TTFT above the engine's by more than `bound` is the client's or the
network's doing, not the server's latency. The engines' accounts:

- llama.cpp: each streamed answer's `timings.prompt_ms`, per request: from the slot taking the
  prompt to its first token. It leaves out a wait for a free slot, so the gap is judged only where
  no request could queue (at most one request per slot in flight, closed loop).
- SGLang and vLLM: their TTFT histogram (`sglang:time_to_first_token_seconds`,
  `vllm:time_to_first_token_seconds`: `_sum`, `_count`; `Engine.totals` reads it) between the
  phase's two /metrics snapshots: from the request's arrival (SGLang's tokenizer manager,
  `first_token_time - created_time`; vLLM's front end) to its first token, queue included, so it
  is judged at any load. The snapshots enclose the warm-up too; the client's own warm-up TTFTs
  (`warmup.ttft_s`, `warmup.first_tokens`) take it back out. One mean per phase, not per request.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from dayzero import engines
from dayzero.checks.server_metrics import phase_totals

# Client TTFT above the server's own account by more than 50 ms, or 5% of the server's TTFT where
# that is longer, is the client's or the network's doing (a 4000-token prompt's request body
# alone took ~60 ms more on the cpu cells, against 30 s of prompt time).
BOUND_MS = 50.0
BOUND_SHARE = 0.05
TIMINGS = "llama.cpp per-request timings (prompt_ms)"
HISTOGRAM = "{} TTFT histogram (/metrics)"  # the engine's display name


@dataclass(frozen=True)
class ServerGap:
    """Client TTFT minus the engine's, in ms, for one measured load (all its repetitions)."""

    gap_ms: float | None
    bound_ms: float = BOUND_MS
    judged: bool = False  # False: the engine's account leaves something out here (a queue)
    source: str = ""  # whose account; "" when the engine gave none
    reason: str = ""  # why there is no gap, or why it is not judged

    @property
    def flagged(self) -> bool:
        return self.judged and self.gap_ms is not None and self.gap_ms > self.bound_ms

    def to_json(self) -> dict:
        return {
            "gap_ms": self.gap_ms,
            "bound_ms": self.bound_ms,
            "judged": self.judged,
            "flagged": self.flagged,
            "source": self.source,
            "reason": self.reason,
        }

    def describe(self) -> str:
        """One phrase for progress lines and messages."""
        if self.gap_ms is None:
            return f"client-server TTFT gap not measured ({self.reason})"
        text = f"client TTFT {self.gap_ms:g} ms above the server's own ({self.source})"
        if self.flagged:
            return f"{text}, over the {self.bound_ms:g} ms bound: the client's or the network's latency"
        return text if self.judged else f"{text}; not judged: {self.reason}"


def bound(server_ms: float) -> float:
    return round(max(BOUND_MS, BOUND_SHARE * server_ms), 3)


def _client_ttft_ms(r: Mapping) -> float | None:
    if r.get("error") or not r.get("first") or not r.get("send"):
        return None
    return (r["first"] - r["send"]) * 1000


def prompt_times(records: Sequence[Mapping]) -> list[tuple[float, float]]:
    """(client TTFT, the engine's own prompt time) in ms, for requests whose answer carries the
    engine's per-request timings (llama-server's `timings.prompt_ms`)."""
    out = []
    for r in records:
        prompt_ms = (r.get("timings") or {}).get("prompt_ms")
        client = _client_ttft_ms(r)
        if prompt_ms is not None and client is not None:
            out.append((client, prompt_ms))
    return out


def _median(values: Sequence[float]) -> float | None:
    return round(statistics.median(values), 3) if values else None


def per_request(records: Sequence[Mapping], queues: bool) -> ServerGap | None:
    """Median of (client TTFT - the engine's prompt time); None without the engine's timings."""
    pairs = prompt_times(records)
    if not pairs:
        return None
    return ServerGap(
        _median([c - s for c, s in pairs]),
        bound(_median([s for _, s in pairs]) or 0.0),
        judged=not queues,
        source=TIMINGS,
        reason="requests could wait for a server slot, which the engine's prompt time leaves out"
        if queues
        else "",
    )


def _client_side(answer: Mapping) -> tuple[float, int] | str:
    """The client's TTFT sum (s) and count over what a phase's snapshots enclose: the warm-up and
    the measured requests; or why it cannot be told."""
    ttfts = [t for r in answer.get("records") or () if (t := _client_ttft_ms(r)) is not None]
    total, count = sum(ttfts) / 1000, len(ttfts)
    warm = answer.get("warmup")
    if isinstance(warm, Mapping) and warm.get("requests"):
        if not isinstance(warm.get("ttft_s"), int | float) or not isinstance(warm.get("first_tokens"), int):
            return "the warm-up inside the phase's /metrics window has no TTFT of its own on record"
        total, count = total + warm["ttft_s"], count + warm["first_tokens"]
    return total, count


def histogram(answers: Sequence[Mapping], metrics: Sequence[Mapping | None]) -> ServerGap | None:
    """Mean of (client TTFT - the engine's) over the phases' requests, from its TTFT histogram's
    deltas; None where the phases' engine publishes no such histogram."""
    if not answers or len(metrics) != len(answers):
        return None
    client_s = server_s = 0.0
    count = 0
    for answer, doc in zip(answers, metrics, strict=False):
        engine = engines.find(doc.get("source")) if isinstance(doc, Mapping) else None
        if engine is None or not engine.ttft_histogram:
            return None
        label = HISTOGRAM.format(engine.display)
        phase = phase_totals(engine.name, doc)
        if phase is None or phase.first_tokens is None:
            return ServerGap(None, reason="the server's /metrics carry no TTFT histogram for a phase")
        side = _client_side(answer)
        if isinstance(side, str):
            return ServerGap(None, source=label, reason=side)
        if round(phase.first_tokens) != side[1]:
            return ServerGap(
                None,
                source=label,
                reason=f"{doc.get('phase')}: the server timed {phase.first_tokens:g} first tokens, "
                f"the client {side[1]}",
            )
        client_s, server_s, count = client_s + side[0], server_s + phase.ttft_s, count + side[1]
    if not count:
        return ServerGap(None, source=label, reason="no first token in the phases")
    server_ms = server_s / count * 1000
    return ServerGap(
        round((client_s - server_s) / count * 1000, 3), bound(server_ms), judged=True, source=label
    )


def phase_gap(
    answers: Sequence[Mapping], metrics: Sequence[Mapping | None] = (), queues: bool = False
) -> ServerGap:
    """One load's gap over its repetitions' answers and their /metrics snapshots (aligned)."""
    records = [r for a in answers for r in a.get("records") or ()]
    found = per_request(records, queues) or histogram(answers, metrics)
    return found or ServerGap(None, reason="the engine gave no account of its TTFT")
