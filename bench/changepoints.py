"""How often the change-point search is right, on synthetic nights: the table in docs/reports.md.

    .venv/bin/python bench/changepoints.py [--series 5000] [--noise-series 8000]

Series of 60 nights (`--nights`), Gaussian noise of sigma 2% of the level, a step of 3%, 5% or
10% at night 30; for each step size:

- **found**: the series has a change point at all (`history.changes.detect`);
- **at its night** / **within one**: one of its change points is at night 30 / at 29-31;
- **with its recorded change**: the same, told that something changed at nights 12 and 30
  (`detect(..., changed=...)`: a lab's record of recipe, engine, host...);
- two references on the same series, no detector: the maximum-likelihood split of a series known
  to hold one step (the best split over nights 5..55), and the same told both levels exactly
  (what no search from the data can beat by much: it knows more than the data).

And the false-positive rates: the share of pure-noise series with a change point, at 60 and 365
nights and under heavy-tailed noise (Student's t, 3 degrees of freedom, scaled to the same
sigma). Seeds are fixed: the same command gives the same table. Not a speed benchmark: rates.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

from bench.common import load_average, machine, write_result  # noqa: E402
from dayzero.history import changes  # noqa: E402

SIGMA, AT, MIN = 0.02, 30, changes.MIN_NIGHTS
COLUMNS = ("found", "at", "within_one", "recorded_at", "ml_at", "ml_within_one", "levels_at")
HEADINGS = ("found", "at", "±1", "recorded", "ML at", "ML ±1", "levels")


def noisy(seed: int, nights: int, tails: bool = False) -> np.ndarray:
    rng = np.random.default_rng(seed)
    noise = rng.standard_t(3, nights) / np.sqrt(3) if tails else rng.standard_normal(nights)
    return 100 * (1 + SIGMA * noise)


def best_split(x: np.ndarray) -> int:
    """The maximum-likelihood night of one step, levels unknown."""
    n, sums = len(x), np.cumsum(x)
    k = np.arange(MIN, n - MIN + 1)
    left, right = sums[k - 1] / k, (sums[-1] - sums[k - 1]) / (n - k)
    return int(k[np.argmax(k * (n - k) * (left - right) ** 2)])


def told_levels(x: np.ndarray, before: float, after: float) -> int:
    """The maximum-likelihood night of one step from `before` to `after`, both known."""
    gain = (x - before) ** 2 - (x - after) ** 2  # how much each night prefers the new level
    tail = np.cumsum(gain[::-1])[::-1]  # nights k.. at the new level
    k = np.arange(MIN, len(x) - MIN + 1)
    return int(k[np.argmax(tail[k])])


def shift_rates(shift: float, series: int, nights: int) -> dict:
    counts = dict.fromkeys(COLUMNS, 0)
    for seed in range(series):
        x = noisy(100_000 + seed, nights)
        x[AT:] *= 1 - shift
        cuts = [c.index for c in changes.detect(x)]
        recorded = [c.index for c in changes.detect(x, changed=[12, AT])]
        ml = best_split(x)
        counts["found"] += bool(cuts)
        counts["at"] += AT in cuts
        counts["within_one"] += any(abs(c - AT) <= 1 for c in cuts)
        counts["recorded_at"] += AT in recorded
        counts["ml_at"] += ml == AT
        counts["ml_within_one"] += abs(ml - AT) <= 1
        counts["levels_at"] += told_levels(x, 100.0, 100.0 * (1 - shift)) == AT
    return {k: round(v / series, 4) for k, v in counts.items()}


def false_positives(series: int, nights: int, tails: bool = False) -> float:
    return round(sum(bool(changes.detect(noisy(s, nights, tails))) for s in range(series)) / series, 4)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--series", type=int, default=5000, help="series per step size (default 5000)")
    parser.add_argument("--noise-series", type=int, default=8000, help="pure-noise series (default 8000)")
    parser.add_argument("--nights", type=int, default=60)
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "bench" / "changepoints.json")
    args = parser.parse_args()
    t0 = time.monotonic()
    shifts = {f"{int(s * 100)}%": shift_rates(s, args.series, args.nights) for s in (0.03, 0.05, 0.10)}
    noise = {
        f"{args.nights} nights": false_positives(args.noise_series, args.nights),
        "365 nights": false_positives(args.noise_series // 4, 365),
        f"{args.nights} nights, t(3) tails": false_positives(args.noise_series // 2, args.nights, tails=True),
    }
    print(f"pure noise, share of series with a change point: {noise}")
    print(f"{'step':>5} " + " ".join(f"{h:>8}" for h in HEADINGS))
    for name, r in shifts.items():
        print(f"{name:>5} " + " ".join(f"{r[c]:>8.1%}" for c in COLUMNS))
    result = {
        **machine(),
        "load": load_average(),
        "seconds": round(time.monotonic() - t0, 1),
        "series": args.series,
        "nights": args.nights,
        "sigma": SIGMA,
        "false_positive": noise,
        "shifts": shifts,
    }
    write_result(args.out, result)
    print(f"{args.out} ({result['seconds']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
