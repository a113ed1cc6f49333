"""Confidence intervals of a measurement's figures, from its own raw records (pure, deterministic).

Two methods, both reproducible bit for bit so the submission checker recomputes the same bounds:

- **percentiles of pooled per-request latencies** (median, p90, p99 of TTFT, TPOT, ITL, e2e,
  interactivity): the distribution-free order-statistic interval (the binomial count of samples
  below the true quantile, as MLPerf LoadGen's early-stopping bound reasons). It needs no
  resampling, and it says when the sample cannot support the percentile at all: the p99 of 16
  requests has no upper bound at 95% (`Interval.supported` false, "not supported by n=16").
- **rates** (request, output and total-token throughput and their per-accelerator and per-user
  forms): a bootstrap over repetitions and, within each, over requests, with a fixed seed. Each
  resampled run's rate is the run's measured rate scaled by how the resampled requests' tokens per
  second of request time differ from the whole run's, and the median over the resampled runs is
  taken, as the floor compares the median of the repetitions.
"""

from __future__ import annotations

import functools
import math
import random
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

CONFIDENCE = 0.95
BOOTSTRAP_RESAMPLES = 1000
SEED = 41  # fixed: the same records give the same interval wherever they are recomputed

STATS = {"median": 50.0, "p90": 90.0, "p99": 99.0}


@dataclass(frozen=True)
class Interval:
    """A figure's two-sided interval at `confidence`, the method, and the sample it rests on.

    `lo`/`hi` are None where the sample cannot support the figure (`why` says so).
    """

    lo: float | None
    hi: float | None
    n: int  # requests (pooled over repetitions) or, for a rate, requests over `runs` repetitions
    runs: int
    method: str
    confidence: float = CONFIDENCE
    why: str = ""

    @property
    def supported(self) -> bool:
        return self.lo is not None and self.hi is not None

    def to_json(self) -> dict:
        out = {
            "lo": None if self.lo is None else round(self.lo, 4),
            "hi": None if self.hi is None else round(self.hi, 4),
            "n": self.n,
            "runs": self.runs,
            "method": self.method,
            "confidence": self.confidence,
        }
        if self.why:
            out["why"] = self.why
        return out

    def describe(self) -> str:
        if not self.supported:
            return self.why
        return f"[{self.lo:g}, {self.hi:g}] ({self.confidence:.0%}, n={self.n})"


@functools.lru_cache(maxsize=1024)
def _binom_cdfs(n: int, p: float) -> tuple[float, ...]:
    """P(Binomial(n, p) <= k) for k = 0..n, in log space (a pooled ITL sample has thousands);
    remembered: every percentile of every figure of a sample of size n asks again."""
    if p <= 0 or p >= 1:
        return (1.0 if p <= 0 else 0.0,) * n + (1.0,)
    lp, lq, total, out = math.log(p), math.log1p(-p), 0.0, []
    for k in range(n + 1):
        total += math.exp(
            math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1) + k * lp + (n - k) * lq
        )
        out.append(min(total, 1.0))
    return tuple(out)


def quantile_ranks(n: int, q: float, confidence: float = CONFIDENCE) -> tuple[int | None, int | None]:
    """1-based ranks (l, u) of the sorted sample bounding the q-quantile, each side at
    (1 - confidence)/2: X_(l) <= x_q with that confidence, and X_(u) >= x_q. None where even the
    extreme order statistic cannot bound it at this confidence (the sample is too small)."""
    tail = (1 - confidence) / 2
    cdf = _binom_cdfs(n, q)  # cdf[k] = P(B <= k), B the samples below x_q
    # X_(l) <= x_q  <=>  B >= l: P(B >= l) = 1 - cdf[l - 1] >= 1 - tail, the largest such l
    lo = next((rank for rank in range(n, 0, -1) if cdf[rank - 1] <= tail), None)
    # X_(u) >= x_q  <=>  B <= u - 1: cdf[u - 1] >= 1 - tail, the smallest such u
    hi = next((rank for rank in range(1, n + 1) if cdf[rank - 1] >= 1 - tail), None)
    return lo, hi


def percentile_interval(values: Sequence[float], pct: float, runs: int = 1) -> Interval:
    """The order-statistic interval of the `pct` percentile of pooled samples."""
    s = sorted(values)
    n = len(s)
    lo_rank, hi_rank = quantile_ranks(n, pct / 100) if n else (None, None)
    if lo_rank is None or hi_rank is None:
        return Interval(None, None, n, runs, "order-statistic", why=f"p{pct:g} not supported by n={n}")
    return Interval(s[lo_rank - 1], s[hi_rank - 1], n, runs, "order-statistic")


def _draws(getrandbits: Callable[[int], int], n: int, count: int) -> list[int]:
    """`count` draws of `rng.randrange(n)` (n > 0), the very same ones: CPython's randrange(n) is
    `_randbelow(n)`, getrandbits of n's bit length until one is below n. Without randrange's
    argument checks per draw: the bootstrap draws millions, which were most of the submission
    checker's time (tests/test_intervals.py holds this to randrange's stream)."""
    k = n.bit_length()
    out = []
    for _ in range(count):
        r = getrandbits(k)
        while r >= n:
            r = getrandbits(k)
        out.append(r)
    return out


def _median_bootstrap(
    sizes: Sequence[int], statistic: Callable[[int, list[int]], float | None], seed: int
) -> tuple[float, float] | None:
    """Percentile bootstrap of the median over repetitions of `statistic(run index, resampled
    item indices)`: runs resampled with replacement, then the items within each."""
    getrandbits = random.Random(seed).getrandbits
    tail = (1 - CONFIDENCE) / 2
    out = []
    for _ in range(BOOTSTRAP_RESAMPLES):
        values = []
        for i in _draws(getrandbits, len(sizes), len(sizes)):
            value = statistic(i, _draws(getrandbits, sizes[i], sizes[i]))
            if value is not None:
                values.append(value)
        if values:
            out.append(statistics.median(values))
    if not out:
        return None
    out.sort()
    return out[int(tail * (len(out) - 1))], out[math.ceil((1 - tail) * (len(out) - 1))]


def rate_interval(
    measured: Sequence[float], requests: Sequence[Sequence[tuple[float, float]]], seed: int = SEED
) -> Interval:
    """The interval of the median over repetitions of a rate (`measured`, one per run), each
    run's requests given as (count, seconds of request time): tokens or 1, and e2e seconds.

    A run's resampled rate is its measured rate times the resampled requests' count per second
    over the whole run's; a run without a completed request leaves the figure unsupported.
    Remembered per process (pure): the checker recomputes a bundle's unchanged phases more than once.
    """
    return _rate_interval(tuple(measured), tuple(tuple(map(tuple, r)) for r in requests), seed)


@functools.lru_cache(maxsize=4096)
def _rate_interval(
    measured: tuple[float, ...], requests: tuple[tuple[tuple[float, float], ...], ...], seed: int
) -> Interval:
    n = sum(len(r) for r in requests)
    if not requests or any(not r for r in requests) or len(measured) != len(requests):
        return Interval(None, None, n, len(requests), "bootstrap", why=f"not supported by n={n}")
    base = [sum(c for c, _ in r) / max(sum(t for _, t in r), 1e-12) for r in requests]
    counts = [[c for c, _ in r] for r in requests]
    seconds = [[t for _, t in r] for r in requests]

    def rate(i: int, picked: list[int]) -> float | None:
        if not base[i]:
            return measured[i]
        c, t = counts[i], seconds[i]
        return measured[i] * (sum([c[j] for j in picked]) / max(sum([t[j] for j in picked]), 1e-12)) / base[i]

    bounds = _median_bootstrap([len(r) for r in requests], rate, seed)
    if bounds is None:
        return Interval(None, None, n, len(requests), "bootstrap", why=f"not supported by n={n}")
    return Interval(bounds[0], bounds[1], n, len(requests), "bootstrap")


def proportion_interval(successes: int, n: int) -> Interval:
    """Wilson score interval of a proportion (an accuracy, an SLO attainment)."""
    if n <= 0:
        return Interval(None, None, 0, 1, "wilson", why="not supported by n=0")
    if not 0 <= successes <= n:
        return Interval(None, None, n, 1, "wilson", why=f"{successes} of {n} is no proportion")
    z = statistics.NormalDist().inv_cdf(1 - (1 - CONFIDENCE) / 2)
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return Interval(max(0.0, centre - half), min(1.0, centre + half), n, 1, "wilson")


def mean_interval(runs: Sequence[Sequence[float]], seed: int = SEED) -> Interval:
    """Bootstrap interval of the mean of per-item values pooled over runs (e.g. accepted tokens
    a step), runs then items resampled."""
    n = sum(len(r) for r in runs)
    if not runs or any(not r for r in runs):
        return Interval(None, None, n, len(runs), "bootstrap", why=f"not supported by n={n}")
    getrandbits = random.Random(seed).getrandbits
    tail = (1 - CONFIDENCE) / 2
    out = []
    for _ in range(BOOTSTRAP_RESAMPLES):
        pooled = []
        for _ in runs:
            items = runs[_draws(getrandbits, len(runs), 1)[0]]
            pooled += [items[j] for j in _draws(getrandbits, len(items), len(items))]
        out.append(statistics.fmean(pooled))
    out.sort()
    lo, hi = out[int(tail * (len(out) - 1))], out[math.ceil((1 - tail) * (len(out) - 1))]
    return Interval(lo, hi, n, len(runs), "bootstrap")


def judge(interval: Interval | None, bound: float, direction: str) -> str | None:
    """passed / failed / inconclusive of an interval against a floor's bound; None without one.

    min: passed where the whole interval is at or above the bound, failed where it is all below;
    max: the mirror. Unsupported: inconclusive (the sample says nothing either way).
    """
    if interval is None:
        return None
    if not interval.supported:
        return "inconclusive"
    if direction == "min":
        return "passed" if interval.lo >= bound else "failed" if interval.hi < bound else "inconclusive"
    return "passed" if interval.hi <= bound else "failed" if interval.lo > bound else "inconclusive"


def figure_intervals(
    runs: Sequence[Sequence[Mapping]],
    summaries: Sequence[Mapping],
    latencies: Callable[[Mapping], Mapping[str, list[float]]],
    counts: Mapping[str, Callable[[Mapping], float]],
    completed: Callable[[Sequence[Mapping]], list[Mapping]],
    seed: int = SEED,
) -> dict[str, Interval]:
    """Every summary key's interval: `runs` are the repetitions' raw records, `summaries` their
    run summaries; `latencies(record)` a request's samples per metric; `counts` per rate what one
    request counts (tokens, or 1 for requests). Keys as the summaries name them."""
    done = [completed(r) for r in runs]
    out: dict[str, Interval] = {}
    pooled: dict[str, list[float]] = {}
    for records in done:
        for r in records:
            for metric, values in latencies(r).items():
                pooled.setdefault(metric, []).extend(values)
    for metric, values in pooled.items():
        for stat, pct in STATS.items():
            out[f"{stat}_{metric}"] = percentile_interval(values, pct, len(runs))
    for key, count in counts.items():
        requests = [[(count(r), r["end"] - r["send"]) for r in records] for records in done]
        base = rate_interval([float(s.get(key) or 0.0) for s in summaries], requests, seed)
        out[key] = base
        for suffix in ("_per_accelerator", "_per_user"):  # the same rate divided by a constant
            scale = _scale(summaries, key, key + suffix)
            if scale is not None:
                out[key + suffix] = _scaled(base, scale)
    return out


def _scale(summaries: Sequence[Mapping], key: str, scaled: str) -> float | None:
    pairs = [(s.get(key), s.get(scaled)) for s in summaries]
    return next((b / a for a, b in pairs if a and b is not None), None)


def _scaled(interval: Interval, factor: float) -> Interval:
    if not interval.supported:
        return interval
    return Interval(
        interval.lo * factor,
        interval.hi * factor,
        interval.n,
        interval.runs,
        interval.method,
        interval.confidence,
    )
