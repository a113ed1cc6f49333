"""Goldens by log-probabilities: numeric noise told apart from a wrong answer (pure).

Greedy output is not bitwise portable: a different CPU kernel, thread count, batch or accelerator
turns a near-tie (SmolLM2 after "The rainbow": ` consists` -0.849, ` is` -0.974). The engines' own
model tests compare the way this module does (vLLM `tests/models/utils.py: check_logprobs_close`):
walk the golden and the output token by token; at the first divergence each side's token must be
among the other side's top-k, and here also within `near_tie_nats` of the chosen one on *both*
sides, so the reference (the maintainers' recording, which a bundle cannot edit) must itself call
it a near-tie. After a tolerated divergence the rest is not compared token by token. While the
tokens agree their log-probabilities must too (`drift_nats`): a broken engine that happens to
pick the same greedy tokens moves them.

A step is `[token, logprob, [[alternative, logprob], ...]]` (the top-k, best first), as the
loadgen client keeps it from the OpenAI-compatible `logprobs.content` of every engine.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from dayzero.spec.card import DRIFT_NATS, NEAR_TIE_NATS


@dataclass(frozen=True)
class Step:
    token: str
    logprob: float
    top: tuple[tuple[str, float], ...]

    def alternative(self, token: str) -> float | None:
        """The log-probability this step gave `token` (its own, or among its top-k)."""
        if token == self.token:
            return self.logprob
        return next((lp for t, lp in self.top if t == token), None)


def steps(raw: object) -> tuple[Step, ...] | None:
    """Steps from their JSON form (an empty answer's are none: `()`); None where absent or
    malformed (nothing to compare by)."""
    if not isinstance(raw, list):
        return None
    out = []
    for item in raw:
        if not (isinstance(item, list) and len(item) == 3 and isinstance(item[0], str)):
            return None
        token, lp, top = item
        if not _number(lp) or not isinstance(top, list):
            return None
        alts = []
        for alt in top:
            if not (isinstance(alt, list) and len(alt) == 2 and isinstance(alt[0], str) and _number(alt[1])):
                return None
            alts.append((alt[0], float(alt[1])))
        out.append(Step(token, float(lp), tuple(alts)))
    return tuple(out)


def _number(x: object) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) and x <= 0.0


def rounded(raw: list, digits: int = 4) -> list:
    """Steps as a golden file keeps them: log-probabilities to `digits` decimals (a ten-thousandth
    of a nat is far below any bound; full floats made goldens unreadable)."""
    return [[t, round(lp, digits), [[a, round(alp, digits)] for a, alp in top]] for t, lp, top in raw]


def spelled(raw_steps: Sequence[Step]) -> str:
    return "".join(s.token for s in raw_steps)


def spells(raw_steps: Sequence[Step], text: str) -> bool:
    """The steps are the text's tokens; a last one beyond it is the stop token that the engine
    scores and does not print (vLLM's `<|im_end|>`), compared like any other."""
    return spelled(raw_steps) == text or (len(raw_steps) > 1 and spelled(raw_steps[:-1]) == text)


def printed(raw_steps: Sequence[Step], text: str) -> Sequence[Step]:
    """The steps without a last one the text does not print (the stop token), where there is one."""
    # the rest spelling the text leaves the last step unprinted (its token, if any, is past it)
    return raw_steps[:-1] if len(raw_steps) > 1 and spelled(raw_steps[:-1]) == text else raw_steps


def unpaired_stop(
    golden: Sequence[Step], expected: str, output: Sequence[Step], actual: str
) -> tuple[Sequence[Step], Sequence[Step]]:
    """Both sides' steps, a stop token only one side scored left out: whether an engine streams
    the stop token's log-probability is its path's habit, not its answer (SGLang's one server
    does not, the same engine behind its prefill/decode router does on some runs, vLLM does);
    where both scored it, it is compared like any other."""
    g, o = printed(golden, expected), printed(output, actual)
    if (len(g) < len(golden)) == (len(o) < len(output)):
        return golden, output
    return g, o


@dataclass(frozen=True)
class Comparison:
    """How an output met its golden token by token: `ok`, why, and what the evidence keeps."""

    ok: bool
    message: str
    details: Mapping

    @property
    def tolerated(self) -> bool:
        return self.ok and "divergence" in self.details


def compare_steps(
    golden: Sequence[Step],
    output: Sequence[Step],
    *,
    near_tie_nats: float = NEAR_TIE_NATS,
    drift_nats: float = DRIFT_NATS,
    limit: int | None = None,
) -> Comparison:
    """Tokens equal (up to `limit` tokens, or the shorter side), or a near-tie at the first
    divergence; and, while equal, log-probabilities within `drift_nats` of the golden's."""
    target = len(golden) if limit is None else min(limit, len(golden))
    n = min(target, len(output))
    drift, at = 0.0, -1
    for i in range(n):
        g, o = golden[i], output[i]
        if g.token != o.token:
            return _diverged(i, g, o, drift, near_tie_nats, drift_nats)
        if abs(g.logprob - o.logprob) > drift:
            drift, at = abs(g.logprob - o.logprob), i
    details = {"compared_tokens": n, "max_drift_nats": round(drift, 4)}
    if drift > drift_nats:
        return Comparison(
            False,
            f"same tokens, but token {at} ({golden[at].token!r}) has log-probability "
            f"{output[at].logprob:.3f} against the golden's {golden[at].logprob:.3f} "
            f"(drift {drift:.3f} > {drift_nats} nats)",
            {**details, "drift_at": at},
        )
    if len(output) < target or (limit is None and len(output) > len(golden)):
        # One side stopped earlier: a length the golden did not have is a divergence at `n` (an
        # end of sequence against a token), not a near-tie anyone recorded.
        return Comparison(
            False,
            f"the output has {len(output)} tokens, the golden {len(golden)}; the first {n} are the same",
            details,
        )
    return Comparison(True, f"{n} tokens identical (max drift {drift:.3f} nats)", details)


def _diverged(i: int, g: Step, o: Step, drift: float, near_tie_nats: float, drift_nats: float) -> Comparison:
    ref_alt = g.alternative(o.token)  # the golden's (reference's) log-probability of the output's token
    out_alt = o.alternative(g.token)  # the output's log-probability of the golden's token
    divergence = {
        "position": i,
        "golden_token": g.token,
        "output_token": o.token,
        "golden": {"chosen": round(g.logprob, 4), "other": None if ref_alt is None else round(ref_alt, 4)},
        "output": {"chosen": round(o.logprob, 4), "other": None if out_alt is None else round(out_alt, 4)},
        "near_tie_nats": near_tie_nats,
    }
    details = {"compared_tokens": i, "max_drift_nats": round(drift, 4), "divergence": divergence}
    where = f"at token {i} golden {g.token!r} ({g.logprob:.3f}), output {o.token!r} ({o.logprob:.3f})"
    problems = []
    if ref_alt is None:
        problems.append(f"the golden's top-{len(g.top)} does not hold {o.token!r}")
    elif g.logprob - ref_alt > near_tie_nats:
        problems.append(
            f"the golden gives {o.token!r} {ref_alt:.3f}, {g.logprob - ref_alt:.3f} nats below its choice"
        )
    if out_alt is None:
        problems.append(f"the output's top-{len(o.top)} does not hold {g.token!r}")
    elif o.logprob - out_alt > near_tie_nats:
        problems.append(
            f"the output gives {g.token!r} {out_alt:.3f}, {o.logprob - out_alt:.3f} nats below its choice"
        )
    if drift > drift_nats:
        problems.append(f"before it the log-probabilities drifted {drift:.3f} > {drift_nats} nats")
    if problems:
        return Comparison(False, f"diverges {where}: not a near-tie ({'; '.join(problems)})", details)
    gap = max(g.logprob - ref_alt, o.logprob - out_alt)
    return Comparison(
        True,
        f"near-tie tolerated {where}, within {gap:.3f} <= {near_tie_nats} nats on both sides; "
        "the rest is not compared",
        details,
    )


def flip_tolerated_share(golden: Sequence[Step], near_tie_nats: float = NEAR_TIE_NATS) -> tuple[int, int]:
    """(positions where a flip to the runner-up would be tolerated, positions with a runner-up):
    how much of a golden is a near-tie, i.e. how many single-token flips the comparison would let
    through if the output also called them near-ties."""
    tolerated = flips = 0
    for step in golden:
        others = [lp for t, lp in step.top if t != step.token]
        if not others:
            continue
        flips += 1
        tolerated += step.logprob - max(others) <= near_tie_nats
    return tolerated, flips
