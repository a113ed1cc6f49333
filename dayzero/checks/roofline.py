"""The roofline: the fastest decode the hardware allows, and how fast a phase's records say it ran.

One decode step reads the active weights once, whatever the batch, and emits one token per
stream (more under speculative decoding: the tokens a step accepts). So one stream cannot beat
bandwidth / active-weight bytes, and B streams together cannot beat B times that; nor can all
streams together beat peak compute / (2 x active parameters) tokens per second. The ceiling is
deliberately generous, so that it never refuses a real run: KV-cache reads and the extra experts
a batch of MoE tokens touches are left out (both only lower the real bound), and the bandwidth
and compute are those of every accelerator serving the cell, as if one model instance spanned
them all. Pure: figures and records in, numbers out.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from dayzero.checks.metrics import output_tokens


@dataclass(frozen=True)
class Ceiling:
    """What the hardware allows a model: tok/s, before any margin."""

    bandwidth_gbs: float  # every accelerator serving the cell, GB/s (1e9 bytes)
    weights_bytes: float  # active weights read per decode step
    active_parameters: float
    compute_tflops: float | None = None  # every accelerator serving the cell; None: not known
    tokens_per_step: float = 1.0  # speculative decoding: at most this many tokens per step

    @property
    def memory_bound(self) -> float:
        """One stream's tok/s when every step streams the active weights once."""
        return self.bandwidth_gbs * 1e9 / self.weights_bytes * self.tokens_per_step

    @property
    def compute_bound(self) -> float | None:
        """All streams' tok/s together at 2 FLOPs per active parameter per token."""
        if self.compute_tflops is None:
            return None
        return self.compute_tflops * 1e12 / (2 * self.active_parameters)

    @property
    def per_stream(self) -> float:
        return min(self.memory_bound, self.compute_bound or float("inf"))

    def aggregate(self, batch: int) -> float:
        """All streams' tok/s at `batch` streams in flight."""
        return min(max(batch, 1) * self.memory_bound, self.compute_bound or float("inf"))


@dataclass(frozen=True)
class Speed:
    """How fast a phase's records say the server decoded."""

    batch: int  # most requests in flight at once
    tpot_ms: float | None  # median time per output token after the first, over requests
    aggregate: float | None  # output tokens / (first send -> last end), tok/s

    @property
    def per_stream(self) -> float | None:
        if self.tpot_ms is None:
            return None
        return 1000 / self.tpot_ms if self.tpot_ms > 0 else float("inf")


def batch(records: Sequence[Mapping]) -> int:
    """Most requests in flight at once ([send, end) intervals; one ending as another starts is one)."""
    events = sorted(e for r in records for e in ((r["send"], 1), (r["end"], -1)))
    most = now = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


def speed(records: Sequence[Mapping]) -> Speed:
    done = [
        r
        for r in records
        if not r.get("error") and all(isinstance(r.get(k), int | float) for k in ("send", "first", "end"))
    ]
    if not done:
        return Speed(0, None, None)
    tpots = [
        (r["end"] - r["first"]) * 1000 / (n - 1)
        for r in done
        if (n := output_tokens(r)) > 1 and r["end"] >= r["first"]
    ]
    span = max(r["end"] for r in done) - min(r["send"] for r in done)
    return Speed(
        batch(done),
        statistics.median(tpots) if tpots else None,
        sum(output_tokens(r) for r in done) / span if span > 0 else None,
    )


def above(measured: float, ceiling: float) -> float:
    """The share by which `measured` exceeds `ceiling` (negative: below it)."""
    return measured / ceiling - 1
