"""Teacher forcing: the golden's own answer scored by the engine under test (pure).

The token-by-token comparison (`near_tie`) stops at a tolerated near-tie; scoring does not: the
engine is handed the probe's prompt with the golden's answer as the assistant's turn and says how
likely it finds each of the golden's tokens (vLLM's `prompt_logprobs`, SGLang's `/v1/completions`
with `echo`: each engine's `score_calls` and `scored`). A healthy engine on another machine ranks
the golden's tokens first, or second at a near-tie, and its mean log-probability a token stays
near the golden's own; a broken one (another RoPE base, a corrupted weight, a wrong template)
finds the golden unlikely. The bounds are the golden policy's `forced_max_rank` and
`forced_mean_nats`.

An entry is `[token, logprob, rank]` per prompt token (rank 1: the engine's own choice; a rank
past the top-k the engine returned is k + 1), as an engine's `scored` reads it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from dayzero.checks.near_tie import Step, spelled


@dataclass(frozen=True)
class Scored:
    token: str
    logprob: float
    rank: int


def entries(raw: object) -> tuple[Scored, ...] | None:
    """Entries from their JSON form; None where malformed."""
    if not isinstance(raw, list):
        return None
    out = []
    for item in raw:
        if not (isinstance(item, list | tuple) and len(item) == 3 and isinstance(item[0], str)):
            return None
        token, lp, rank = item
        if not (isinstance(lp, int | float) and not isinstance(lp, bool) and math.isfinite(lp) and lp <= 0):
            return None
        if not (isinstance(rank, int) and not isinstance(rank, bool) and rank >= 1):
            return None
        out.append(Scored(token, float(lp), rank))
    return tuple(out)


def continuation(scored: Sequence[Scored], text: str) -> tuple[Scored, ...] | None:
    """The last entries, the ones that spell `text` (the golden given as the assistant's answer
    ends the scored prompt); None where no run of last entries spells it."""
    spelled_so_far = ""
    for i in range(len(scored) - 1, -1, -1):
        spelled_so_far = scored[i].token + spelled_so_far
        if spelled_so_far == text:
            return tuple(scored[i:])
        if len(spelled_so_far) >= len(text):
            return None
    return None


def _golden_mean(golden: Sequence[Step] | None, text: str) -> float | None:
    """The golden's own mean log-probability a token over the tokens that spell its text (a last
    stop token it scored and did not print left out)."""
    if not golden:
        return None
    kept = golden if spelled(golden) == text else golden[:-1]
    if not kept or spelled(kept) != text:
        return None
    return sum(s.logprob for s in kept) / len(kept)


@dataclass(frozen=True)
class Forcing:
    """The verdict of a teacher-forced golden: `ok`, why, and what the evidence keeps."""

    ok: bool
    message: str
    details: Mapping


def judge(
    text: str,
    golden: Sequence[Step] | None,
    raw: object,
    *,
    max_rank: int,
    mean_nats: float,
) -> Forcing:
    """The golden `text` as the engine scored it (`raw`: its entries for the whole prompt): every
    token at rank <= `max_rank`, and the mean log-probability a token no more than `mean_nats`
    below the golden's own (where the golden has log-probabilities)."""
    scored = entries(raw)
    bounds = {"max_rank": max_rank, "mean_nats": mean_nats}
    if scored is None:
        return Forcing(False, "the engine's scores are malformed", bounds)
    tail = continuation(scored, text) if text else ()
    if tail is None:
        return Forcing(False, "the scored prompt does not end with the golden's text", bounds)
    if not tail:
        return Forcing(True, "nothing to score (an empty golden)", {**bounds, "tokens": 0})
    mean = sum(s.logprob for s in tail) / len(tail)
    worst_at = max(range(len(tail)), key=lambda i: (tail[i].rank, -tail[i].logprob))
    worst = tail[worst_at]
    own = _golden_mean(golden, text)
    details = {
        **bounds,
        "tokens": len(tail),
        "mean_logprob": round(mean, 4),
        "golden_mean_logprob": None if own is None else round(own, 4),
        "worst_rank": worst.rank,
        "worst_at": worst_at,
        "worst_token": worst.token,
    }
    problems = []
    if worst.rank > max_rank:
        problems.append(f"token {worst_at} ({worst.token!r}) ranks {worst.rank} > {max_rank}")
    if own is not None and own - mean > mean_nats:
        problems.append(
            f"mean log-probability {mean:.3f}, {own - mean:.3f} > {mean_nats} nats under the golden's"
            f" {own:.3f}"
        )
    said = f"golden scored by the engine: {len(tail)} tokens, worst rank {worst.rank}, mean {mean:.3f}"
    said += "" if own is None else f" (golden's own {own:.3f})"
    if problems:
        return Forcing(False, f"{said}: {'; '.join(problems)}", details)
    return Forcing(True, said, details)
