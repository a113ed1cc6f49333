"""The levels a performance check measured: which metrics are levels, which way is better, and
each one's median over the repetitions. Read alike by the history's series (`points`) and the
previous-night comparison (`dayzero.report.nightly`, whose docstring says which metrics).
"""

from __future__ import annotations

import functools
import statistics
from collections.abc import Collection

LATENCY_STATS = ("mean", "median", "p90", "p99")


@functools.cache  # a pure function of a name, asked 10^6 times by an ingest
def direction(metric: str) -> bool | None:
    """True: higher is better; False: lower is better; None: not a level we compare."""
    if metric.startswith("std_"):
        return None  # a dispersion, not a level
    if "throughput" in metric or metric.endswith("interactivity"):
        return True
    if metric.endswith("_ms") and metric.split("_", 1)[0] in LATENCY_STATS:
        return False
    return None


def summaries(check: dict) -> list[dict]:
    """Per-repetition summaries of a performance check (one when the run was not repeated)."""
    details = check.get("details") or {}
    if details.get("summaries"):
        return [s for s in details["summaries"] if isinstance(s, dict)]
    if isinstance(details.get("summary"), dict):
        return [details["summary"]]
    return []


def levels(check: dict, only: Collection[str] = ()) -> dict[str, tuple[float, float | None]]:
    """metric -> (median over repetitions, range over repetitions or None when run once); `only`:
    just these metrics (the history follows 8 of a summary's ~25: a store ingests 10^5 checks)."""
    out: dict[str, tuple[float, float | None]] = {}
    reps = summaries(check)
    keys = {k for s in reps for k in s}
    if only:
        keys &= set(only)
    for key in sorted(keys):
        if direction(key) is None:
            continue
        values = [float(s[key]) for s in reps if isinstance(s.get(key), int | float)]
        if values:
            out[key] = (statistics.median(values), (max(values) - min(values)) if len(values) > 1 else None)
    if not out and isinstance(check.get("measured"), int | float):
        metric = check["name"].split(":", 1)[-1].split("@", 1)[0]
        if direction(metric) is not None:
            agg = (check.get("details") or {}).get("aggregate") or {}
            rng = agg["max"] - agg["min"] if len(agg.get("values") or ()) > 1 else None
            out[metric] = (float(check["measured"]), rng)
    return out
