"""Requests reconciled across the launches that served them (pure: logs' accounts in, a problem out).

A cell behind a router spreads its requests over several servers, each with its own log. A log
lists its server's requests in the order they finished, and the phases ran one after another,
so a log is its phases' requests in turn; where a phase ends in it is read from that launch's
own /metrics (the difference of its counters around the phase: SGLang's request counter, or
llama.cpp's generated tokens), never guessed, and the requests of that stretch must add up to
those counters (`cut`). Then, phase by phase (`split_problem`), every completed record is one
request of exactly one log (as multisets of token counts: a log names no request id the client
knows), the requests left over are the phase's warm-ups (as many, with the warm-up's token
totals), and a request's end-to-end time at the client is never shorter than the server's own.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from dayzero.engines.account import Served
from dayzero.engines.prometheus import Totals
from dayzero.submission.engine_account import (
    count_at,
    idle_problem,
    keyed,
    labelled,
    served_key,
    times_problem,
)
from dayzero.submission.findings import short


def _sums(segment: Sequence[Served], whole: bool) -> tuple[int, int]:
    prompt = sum((x.prompt or 0) if whole else x.prompt_evaluated for x in segment)
    return prompt, sum(x.generated for x in segment)


def cut(
    served: Sequence[Served], deltas: Sequence[Totals], names: Sequence[str], whole: bool
) -> list[tuple[Served, ...]] | str:
    """One launch's requests split into the phases that ran, by its own counters per phase; or
    why they cannot be (a stretch that does not add up to them, requests left after the last)."""
    out, at = [], 0
    for name, delta in zip(names, deltas, strict=True):
        if delta.requests is not None:  # SGLang counts its finished requests
            end = at + int(delta.requests)
        else:  # llama.cpp: as many requests as generated the counted tokens
            end, generated = at, 0
            while end < len(served) and generated < delta.generated:
                generated += served[end].generated
                end += 1
        segment = tuple(served[at:end])
        counted_prompt = delta.prompt if whole else delta.prompt_evaluated
        prompt, generated = _sums(segment, whole)
        if end > len(served) or generated != delta.generated or counted_prompt not in (None, prompt):
            counted = f"{counted_prompt:g} prompt + {delta.generated:g} generated tokens"
            if delta.requests is not None:
                counted = f"{delta.requests:g} requests, {counted}"
            return (
                f"phase {short(name, 80)}: {len(segment)} request(s) of the log, {prompt} prompt + "
                f"{generated} generated tokens; its /metrics counted {counted}"
            )
        out.append(segment)
        at = end
    if at != len(served):
        return f"{len(served) - at} request(s) in the log after the last phase its /metrics counted"
    return out


def _warm_totals(warm: dict, whole: bool) -> tuple[int, int] | None:
    prompt, cached = count_at(warm, "usage.prompt_tokens"), count_at(warm, "usage.cached_tokens")
    generated = count_at(warm, "usage.completion_tokens")
    if prompt is None or generated is None or (cached is None and not whole):
        return None
    return (prompt if whole else prompt - cached), generated


def split_problem(records: list[dict], warm: dict | None, warmups: int, union: list[Served]) -> str:
    """Why a phase's completed records and warm-ups are not the requests of the launches' logs
    for that phase, each record found once ('' when they are)."""
    if isinstance(found := keyed(records, union), str):
        return found
    whole, keys = found
    mine, theirs = Counter(keys), Counter(served_key(x, whole) for x in union)
    if missing := sorted((mine - theirs).elements()):
        shown = "; ".join(labelled(k, whole) for k in missing[:3])
        return f"{len(missing)} request(s) of the records in no log: {shown}"
    left = sorted((theirs - mine).elements())
    if len(left) != warmups:
        shown = "; ".join(labelled(k, whole) for k in left[:3]) or "none"
        return f"{len(left)} request(s) in the logs beyond the records ({shown}), {warmups} warm-up(s)"
    if left:
        want = _warm_totals(warm, whole) if isinstance(warm, dict) else None
        got = (sum(k[0] for k in left), sum(k[1] for k in left))
        if want != got:
            return (
                f"the logs' requests beyond the records total {labelled(got, whole)}, "
                f"the warm-up's {labelled(want, whole) if want else 'usage is not stated'}"
            )
    return idle_problem(union) or times_problem(records, keys, union, whole)
