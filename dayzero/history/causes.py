"""Candidates for what caused a change: every recorded change near it, ranked.

A change is found a night or two off its true night as often as not (a 3-sigma step), and a lab
records several changes a week (a harness bump, a driver, the engine); naming the one fact that
changed on the found night blamed a harmless bump two nights early, and with a pool of hosts
that rotates every night it blamed "hosts X -> Y" every time. So every fact that changed within
`NEAR` nights of the change is a candidate, ranked by:

1. **rotating**: a fact that changed on more than `ROTATING` of the series' nights (a host pool)
   explains nothing and ranks last, whatever else;
2. **fit**: how much worse the series splits at the candidate's night than at its best night, in
   nats (the log-likelihood deficit of the two-level fit, in units of the series' noise): 0 at
   the best night, ~n*step^2/2 sigma^2 per night off;
3. **moved with it**: how many other cells' series of the same metric moved (the same way) at the
   candidate's night: an engine bump moves every cell that runs it; a harness bump moves none.
   Each co-mover is worth `COMOVE_NATS` nats of fit (capped at `COMOVE_MAX` cells).

Co-movement also gates: a recorded change that at least `SHARED_MIN` other cells made the same
night and were flat before it (`alarms.moved_with`), and that moved fewer than `MOVED_SHARE` of
them, is a **weak anchor** (`weak_anchor`):
tested in every cell that made it, a harmless harness or engine bump was where most false alarms
gathered (8 of 12 in the `--full` bench); `alarms` tests its night as if nothing changed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

NEAR = 3  # nights either side of the change's night whose recorded changes are candidates
ROTATING = 0.3  # a fact changing on more than this share of a series' nights rotates
COMOVE_NATS = 2.0
COMOVE_MAX = 5
SHARED_MIN = 3  # other cells that made the same recorded change the same night
MOVED_SHARE = 0.05  # of them moved (the same way): fewer, and the change is a weak anchor


@dataclass(frozen=True)
class Candidate:
    fact: str
    before: str
    after: str
    night: int  # position in the series of the first night with the new value
    finished: str
    deficit: float  # nats worse than the best split of the series (0: the best)
    rotating: bool  # changed on more than ROTATING of the nights: explains nothing
    comoved: int = 0  # other cells' series of the metric that moved the same way that night

    @property
    def score(self) -> float:
        """Lower ranks first."""
        return self.deficit - COMOVE_NATS * min(self.comoved, COMOVE_MAX)

    def describe(self) -> str:
        why = (
            "rotates: explains nothing"
            if self.rotating
            else f"fit -{self.deficit:.1f} nats, {self.comoved} other cell(s) moved with it"
        )
        return f"{self.fact} {self.before or '-'} -> {self.after or '-'} on {self.finished[:10]} ({why})"

    def to_json(self) -> dict:
        return {**asdict(self), "message": self.describe()}

    @classmethod
    def from_json(cls, data: Mapping) -> Candidate:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


def changed_nights(facts: Sequence[Mapping[str, str]]) -> dict[int, dict[str, tuple[str, str]]]:
    """night -> {fact: (before, after)} for each night where a recorded fact changed."""
    out: dict[int, dict[str, tuple[str, str]]] = {}
    for i in range(1, len(facts)):
        a, b = facts[i - 1], facts[i]
        diff = {k: (a.get(k, ""), b.get(k, "")) for k in sorted(a.keys() | b.keys()) if a.get(k) != b.get(k)}
        if diff:
            out[i] = diff
    return out


def rotating(facts: Sequence[Mapping[str, str]]) -> frozenset[str]:
    """The facts that changed on more than ROTATING of the nights (with at least 5 nights)."""
    if len(facts) < 5:
        return frozenset()
    counts: dict[str, int] = {}
    for diff in changed_nights(facts).values():
        for k in diff:
            counts[k] = counts.get(k, 0) + 1
    return frozenset(k for k, c in counts.items() if c > ROTATING * (len(facts) - 1))


def informative(facts: Sequence[Mapping[str, str]]) -> frozenset[int]:
    """The nights where a fact that does not rotate changed: where a change is expected."""
    spinning = rotating(facts)
    return frozenset(i for i, diff in changed_nights(facts).items() if set(diff) - spinning)


def deficits(values: Sequence[float], lo: int, hi: int, sigma: float) -> dict[int, float]:
    """For each night k in (lo, hi): how many nats worse a two-level fit of values[lo:hi] split
    at k is than the best split (the squared-error gain over 2 sigma^2)."""
    seg = list(values[lo:hi])
    n = len(seg)
    if n < 2:
        return {}
    total, run, gains = sum(seg), 0.0, {}
    for k in range(1, n):
        run += seg[k - 1]
        left, right = run / k, (total - run) / (n - k)
        gains[lo + k] = k * (n - k) * (left - right) ** 2 / n
    best = max(gains.values())
    return {k: (best - g) / (2 * sigma * sigma) for k, g in gains.items()}


def candidates(
    facts: Sequence[Mapping[str, str]],
    finished: Sequence[str],
    values: Sequence[float],
    night: int,
    lo: int,
    sigma: float,
) -> list[Candidate]:
    """Every recorded change within NEAR nights of `night` (a change found in values[lo:]), each
    with its fit deficit and whether it rotates; co-movers are counted by the caller, who sees
    the other cells (`with_comovers`)."""
    spinning = rotating(facts)
    fit = deficits(values, lo, len(values), sigma)
    out = []
    for k, diff in sorted(changed_nights(facts).items()):
        if abs(k - night) > NEAR or k <= lo:
            continue
        for fact, (a, b) in diff.items():
            deficit = fit.get(k, math.inf)
            out.append(Candidate(fact, a, b, k, finished[k], round(deficit, 2), fact in spinning))
    return ranked(out)


def ranked(found: Sequence[Candidate]) -> list[Candidate]:
    """Rotating facts last; then by score (fit deficit less the co-movers' worth); then nearest."""
    return sorted(found, key=lambda c: (c.rotating, c.score, c.fact))


def weak_anchor(shared: int, moved: int) -> bool:
    """A change `shared` other cells made the same night that moved `moved` of them: weak
    evidence for any one cell's move when many made it and almost none moved."""
    return shared >= SHARED_MIN and moved < MOVED_SHARE * shared
