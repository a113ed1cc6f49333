"""Change points: the nights where a series moved to a new level and stayed there.

A nightly series is noisy (other load, clocks, thermals), so a threshold set by hand either
misses a slow 3%-a-night drift or cries at every one-night blip. As in MongoDB's and Otava's
work on performance tests (ICPE 2020), a persistent shift is found by a change-point search
over the whole series, here `ruptures` on the series scaled by its own noise, so every series
gets a penalty tuned to how much it wobbles:

1. **noise**: sigma from the median absolute deviation of night-to-night differences, which a
   step moves only once and a blip twice, so neither inflates it (floor: 0.1% of the level);
2. **blips out**: a night further than `BLIP_SIGMAS` from both the two nights before it and the
   two after is replaced by the median of the five (a Hampel filter that spares a step's edge):
   one odd night is not a level;
3. **noise again**: re-measured as the spread around the levels of a looser search
   (`_fitted_noise`): the first estimate is robust but loose, and one too high hides a 3% step;
4. **search**: ruptures' binary segmentation (as good as its PELT on these series, with the
   checks below, at a 50th of the time) with an L2 cost, `MIN_NIGHTS` nights per level and a
   penalty of `THRESHOLD`**2 (the squared t a split must earn); then each change point is kept
   only while the t of the levels either side of it stays at least `THRESHOLD`, weakest first,
   and the shift is at least `MIN_CHANGE_PCT` of the level;
5. **settle**: each cut moves to the best split between its neighbours, and is kept once
   `MIN_NIGHTS` nights follow it (a recent shift is not pulled back onto old nights);
6. **to the night something changed**: told the nights where a recorded fact changed (recipe,
   engine, host, driver, weights), a cut moves to the nearest of them that the series cannot tell
   from its best split (`LOCATION_SLACK`).

Measured on synthetic 60-night series, Gaussian noise of sigma 2% (`bench/changepoints.py`: 8000
pure-noise series, 5000 per shift; tests/test_history_changes.py checks the same on fewer): 0.49%
of pure-noise series show a change point (0.35% of 365-night ones; 0.92% under heavy-tailed t(3)
noise of the same spread); 10% and 5% shifts are found in every series, 3% (1.5 sigma) in 98.3%.
Placed from the data alone, a shift is at its night as often as the maximum-likelihood split of
the same series is: 98.9% at 10%, 76.2% at 5%, 46.6% at 3% (70% within a night; the split: 99.0,
76.6, 48.0%), and a split told both levels exactly does little better (49.0% at 3%). With the
night of its recorded change: 100%, 99.2% and 96.8%. A one-night blip of 10-50% is flagged as
often as pure noise is. A shift is found once `MIN_NIGHTS` nights show its new level: until then
the previous-night comparison is the first signal.
"""

from __future__ import annotations

import functools
import itertools
import math
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from dayzero.errors import DayzeroError

THRESHOLD = 4.0
PRELIMINARY = 3.0  # the looser t of the search whose levels the noise is re-measured around
MIN_NIGHTS = 5
BLIP_SIGMAS = 3.5
MIN_CHANGE_PCT = 1.0
NOISE_FLOOR = 1e-3  # relative: a series quieter than 0.1% of its level is as quiet as that
# A change point may move to a night where something recorded changed (recipe, engine, host...)
# if that split explains the series almost as well as the best one: its squared t is at most this
# much lower. Within it, a two-sided random walk bound puts the true night at least 99% of the
# time whatever the step's size (P(drop > 2u) <= 2 exp(-u), u = ln 200), so the move is to a night
# the data cannot tell from the best, and a sure step (10%: a one-night set) never moves.
LOCATION_SLACK = 2 * math.log(200)
_MAD_TO_SIGMA = 1 / 0.6745 / math.sqrt(2)  # MAD of N(0, 2 sigma^2) differences -> sigma


def _libs():
    """numpy and ruptures, imported when first needed: the rest of dayzero runs without them."""
    try:
        import numpy
        import ruptures
    except ImportError as exc:
        raise DayzeroError(
            f"change points need the 'history' extra ({exc.name} is missing): "
            "pip install 'dayzero[history]' (tools/setup installs it)"
        ) from None
    return numpy, ruptures


@dataclass(frozen=True)
class ChangePoint:
    index: int  # the first night at the new level, a position in the series
    before: float  # mean level of the nights before (blips out), back to the previous change point
    after: float  # mean level from this night to the next change point
    t: float  # the shift over its standard error: how sure

    @property
    def change_pct(self) -> float:
        return (self.after - self.before) / abs(self.before) * 100 if self.before else 0.0

    def worse(self, higher_is_better: bool) -> bool:
        return self.after < self.before if higher_is_better else self.after > self.before


def noise(values: Sequence[float]) -> float:
    """A series' noise (one sigma), robust to steps and blips; never below the floor."""
    np, _ = _libs()
    x = np.asarray(values, dtype=float)
    level = abs(float(np.median(x))) if len(x) else 0.0
    floor = max(NOISE_FLOOR * level, 1e-12)
    if len(x) < 3:
        return floor
    d = np.diff(x)
    return max(float(np.median(np.abs(d - np.median(d)))) * _MAD_TO_SIGMA, floor)


@functools.cache
def _cost(rpt):
    """ruptures' L2 cost from cumulative sums: O(1) a segment where the stock one is O(length),
    which made a year of nights 0.3 s a series instead of under a millisecond."""
    np, _ = _libs()

    class CumulativeL2(rpt.base.BaseCost):
        model, min_size = "l2-cumulative", 2

        def fit(self, signal):
            x = np.asarray(signal, dtype=float).reshape(-1)
            self.signal = x.reshape(-1, 1)
            self.sums = np.concatenate([[0.0], np.cumsum(x)])
            self.squares = np.concatenate([[0.0], np.cumsum(x * x)])
            return self

        def error(self, start, end):
            total = self.sums[end] - self.sums[start]
            return float(self.squares[end] - self.squares[start] - total * total / (end - start))

    return CumulativeL2


def _without_blips(x, sigma: float):
    """A night far from both the two nights before it and the two after is a blip: it takes the
    median of the five. (Far from one side only is the edge of a step, and stays.)"""
    np, _ = _libs()
    padded = np.pad(x, 2, constant_values=np.nan)
    windows = np.lib.stride_tricks.sliding_window_view(padded, 5)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the series' ends have one side only
        left, right = np.nanmean(windows[:, :2], axis=1), np.nanmean(windows[:, 3:], axis=1)
        apart = np.fmin(np.abs(x - left), np.abs(x - right))
        return np.where(apart > BLIP_SIGMAS * sigma, np.nanmedian(windows, axis=1), x)


def _fitted_noise(x, sigma: float) -> float:
    """The noise re-measured around the levels of a looser search (`PRELIMINARY`): the MAD of
    differences is robust but loose (one estimate from 60 nights is off by 10-15%), and an
    estimate too high hides a real step; the spread around the levels is half as loose.
    Never below the floor; each level fitted costs a degree of freedom, so a spurious cut in
    pure noise lowers the estimate only a little (pure noise: 0.49% flagged, measured)."""
    np, rpt = _libs()
    z = (x - np.median(x)) / sigma
    search = rpt.Binseg(custom_cost=_cost(rpt)(), min_size=MIN_NIGHTS, jump=1)
    edges = [0, *search.fit(z).predict(pen=PRELIMINARY**2)]
    spread = sum(float(((x[a:b] - x[a:b].mean()) ** 2).sum()) for a, b in itertools.pairwise(edges))
    floor = max(NOISE_FLOOR * abs(float(np.median(x))), 1e-12)
    return max(math.sqrt(spread / max(len(x) - (len(edges) - 1), 1)), floor)


def _shift(x, lo: int, cut: int, hi: int, sigma: float) -> tuple[float, float, float]:
    """Mean levels either side of a cut (back to the neighbouring cuts) and the shift's t."""
    a, b = x[lo:cut], x[cut:hi]
    t = abs(b.mean() - a.mean()) / (sigma * math.sqrt(1 / len(a) + 1 / len(b)))
    return float(a.mean()), float(b.mean()), float(t)


def _split_scores(x, lo: int, hi: int):
    """For each night k in (lo, hi): how much splitting x[lo:hi] at k lowers its squared error
    (k'(n'-k')/n' times the squared gap of the two means), the search's own score."""
    np, _ = _libs()
    seg = x[lo:hi]
    k = np.arange(1, len(seg))
    sums = np.cumsum(seg)[:-1]
    left, right = sums / k, (seg.sum() - sums) / (len(seg) - k)
    return lo + k, k * (len(seg) - k) * (left - right) ** 2 / len(seg)


def _settled(x, cuts: list[int], min_nights: int) -> list[int]:
    """Each cut moved to the best split between its neighbours with no least length (the search's
    `min_nights` pulls a recent shift's cut back onto old nights, so that the new level is long
    enough), then kept only if `min_nights` nights follow it: a shift is persistent once it has
    lasted that long, and is then found at its own night."""
    out: list[int] = []
    for i in range(len(cuts)):
        lo, hi = out[-1] if out else 0, cuts[i + 1] if i + 1 < len(cuts) else len(x)
        nights, scores = _split_scores(x, lo, hi)
        best = int(nights[scores.argmax()])
        if hi - best >= min_nights:
            out.append(best)
    return out


def _to_recorded_change(x, lo: int, cut: int, hi: int, sigma: float, changed: frozenset[int]) -> int:
    """The cut moved to the nearest night where something recorded changed, if the series cannot
    tell that night from the cut (`LOCATION_SLACK`); else the cut. A step of 1.5 sigma is placed
    at its own night in fewer than half of the series by any method (the maximum-likelihood split
    is off by one or two nights as often), but a lab's shifts come with a change: a recipe, an
    engine, a driver. A shift whose night is sure (a large one) stays where the data put it."""
    nights, scores = _split_scores(x, lo, hi)
    best = float(scores.max())
    near = [
        int(k)
        for k, score in zip(nights, scores, strict=True)
        if int(k) in changed and (best - float(score)) / sigma**2 <= LOCATION_SLACK
    ]
    return min(near, key=lambda k: (abs(k - cut), k)) if near else cut


def _big(before: float, after: float) -> bool:
    return abs(after - before) >= MIN_CHANGE_PCT / 100 * abs(before)


def detect(
    values: Sequence[float],
    threshold: float = THRESHOLD,
    min_nights: int = MIN_NIGHTS,
    changed: Iterable[int] = (),
) -> list[ChangePoint]:
    """The change points of one series, in order (none in a series under two levels long).
    `changed`: the nights where something recorded changed since the night before; a change
    point the data cannot place to the night goes to one of them (`_to_recorded_change`)."""
    np, rpt = _libs()
    x = np.asarray(values, dtype=float)
    n = len(x)
    if n < 2 * min_nights:
        return []
    x = _without_blips(x, noise(x))
    sigma = _fitted_noise(x, noise(x))
    z = (x - np.median(x)) / sigma
    search = rpt.Binseg(custom_cost=_cost(rpt)(), min_size=min_nights, jump=1)
    cuts = list(search.fit(z).predict(pen=threshold**2)[:-1])
    while cuts:
        edges = [0, *cuts, n]
        scored = [(_shift(x, edges[i], cut, edges[i + 2], sigma), i) for i, cut in enumerate(cuts)]
        (before, after, t), weakest = min(scored, key=lambda s: s[0][2] if _big(*s[0][:2]) else 0.0)
        if t >= threshold and _big(before, after):
            break
        cuts.pop(weakest)
    cuts = _settled(x, cuts, min_nights)
    recorded = frozenset(changed)
    if recorded:
        for i, cut in enumerate(cuts):
            lo, hi = cuts[i - 1] if i else 0, cuts[i + 1] if i + 1 < len(cuts) else n
            cuts[i] = _to_recorded_change(x, lo, cut, hi, sigma, recorded)
    edges = [0, *cuts, n]
    out = []
    for i, cut in enumerate(cuts):
        before, after, t = _shift(x, edges[i], cut, edges[i + 2], sigma)
        out.append(ChangePoint(cut, before, after, round(t, 2)))
    return out


def attribute(facts: Sequence[Mapping[str, str]], index: int) -> dict[str, tuple[str, str]]:
    """What changed with a change point: the facts that differ between the night before it and
    its night, else (a shift found one night off) between the nights either side of those."""
    for before, after in ((index - 1, index), (index - 2, index - 1), (index, index + 1)):
        if before >= 0 and after < len(facts):
            a, b = facts[before], facts[after]
            diff = {
                k: (a.get(k, ""), b.get(k, "")) for k in sorted(a.keys() | b.keys()) if a.get(k) != b.get(k)
            }
            if diff:
                return diff
    return {}
