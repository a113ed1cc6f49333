"""Performance floors: a card's bound (`spec.card.Floor`) against the median of a measurement's runs.

A floor compares the median of N repetitions with its bound and shows margin and spread, and is
judged on the median's interval (`checks.intervals`): passed where the interval clears the bound,
failed where it misses it, *inconclusive* in between (never green: more repetitions, or a floor
calibrated further from the quiet lower bound, turn it into one or the other); a
measurement whose client saturated is *invalid* and never compared with a floor, and so is a TTFT
floor's where the client's TTFT is above the engine's own by more than the gap bound (the client's
or the network's latency, not the server's: `checks.server_latency`). The summaries
come from `dayzero.checks.metrics`, the measurement from `dayzero.checks.measurement`.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence

from dayzero.checks import FAILED, INCONCLUSIVE, PASSED, CheckResult
from dayzero.checks.intervals import judge
from dayzero.checks.measurement import Measurement
from dayzero.checks.metrics import DEFINITIONS
from dayzero.spec.card import Floor

INVALID = "invalid"  # the measurement cannot be trusted (client saturated): neither pass nor fail


def spread(values: Sequence[float]) -> dict:
    """Median of repetitions with min, max and relative spread kept (identical runs differ)."""
    med = statistics.median(values)
    lo, hi = min(values), max(values)
    return {
        "median": round(med, 3),
        "min": round(lo, 3),
        "max": round(hi, 3),
        "spread_pct": round((hi - lo) / med * 100, 1) if med else None,
        "values": [round(v, 3) for v in values],
    }


def check_floor(floor: Floor, measurement: Measurement | Mapping) -> CheckResult:
    """Median over repetitions against the bound; the message carries margin and spread.

    A plain summary (one run) is accepted too, for callers that recompute from one records file.
    """
    if not isinstance(measurement, Measurement):
        measurement = Measurement(floor.workload, floor.concurrency, (dict(measurement),))
    details = {
        "workload": floor.workload,
        "concurrency": floor.concurrency,
        "direction": floor.direction,
        "summaries": list(measurement.summaries),
        "records": list(measurement.records),
        "client": measurement.client,
        "compliance": list(measurement.compliance),
        "definitions": DEFINITIONS,
        "server_gap": measurement.server_gap.to_json(),
        "intervals": {k: v.to_json() for k, v in sorted(measurement.intervals.items())},
    }
    if measurement.invalid and measurement.compliance:
        # What the server returned (short outputs, inflated counts, EOS runs) is counted from the
        # records, not timed: it fails the cell even when the client was too busy to time it.
        return CheckResult(
            floor.name,
            "performance",
            FAILED,
            "; ".join(f"anti-gaming: {f}" for f in measurement.compliance)
            + f" (timings not compared: {'; '.join(measurement.invalid)})",
            measured=None,
            bound=floor.bound,
            details=details,
        )
    if measurement.invalid:
        return CheckResult(
            floor.name,
            "performance",
            INVALID,
            "invalid measurement, not compared with the floor: " + "; ".join(measurement.invalid),
            measured=None,
            bound=floor.bound,
            details=details,
        )
    if "ttft" in floor.key and measurement.server_gap.flagged:
        return CheckResult(
            floor.name,
            "performance",
            INVALID,
            f"invalid measurement, not compared with the floor: {measurement.server_gap.describe()}",
            measured=None,
            bound=floor.bound,
            details=details,
        )
    values = measurement.values(floor.key)
    if not values:
        return CheckResult(
            floor.name,
            "performance",
            FAILED,
            f"{floor.key} not measured ({measurement.failed_requests} request(s) failed)",
            measured=None,
            bound=floor.bound,
            details=details,
        )
    agg = spread(values)
    measured = agg["median"]
    ok = measured >= floor.bound if floor.direction == "min" else measured <= floor.bound
    interval = measurement.intervals.get(floor.key)
    on_interval = judge(interval, floor.bound, floor.direction)
    margin = (measured - floor.bound) / floor.bound * 100
    if floor.direction == "max":
        margin = -margin
    op = (">=" if ok else "<") if floor.direction == "min" else ("<=" if ok else ">")
    runs = len(values)
    shape = (
        f"over {runs} runs (spread {agg['min']:g}..{agg['max']:g}, {agg['spread_pct']:g}%)"
        if runs > 1
        else "in 1 run"
    )
    message = (
        f"{floor.key} median {measured:g} {shape} {op} {floor.direction} {floor.bound:g} "
        f"(margin {margin:+.1f}%)"
    )
    point = PASSED if ok else FAILED
    if on_interval is not None and on_interval != point:
        # said only where the interval decides otherwise than the median: a message is compared
        # by the submission checker, and older bundles' messages stay as they were
        message += f", interval {interval.describe()}"
    problems = []
    if measurement.failed_requests:
        problems.append(f"{measurement.failed_requests} request(s) failed")
    if on_interval == FAILED or (on_interval is None and not ok):
        problems.append("bound not met")
    problems += [f"anti-gaming: {f}" for f in measurement.compliance]
    details["aggregate"] = agg
    details["margin_pct"] = round(margin, 1)
    if interval is not None:
        details["interval"] = interval.to_json()
    verdict = FAILED if problems else INCONCLUSIVE if on_interval == INCONCLUSIVE else PASSED
    if verdict == INCONCLUSIVE:
        why = "the interval straddles the bound" if interval.supported else "the sample cannot support it"
        message += f" -- inconclusive: {why}"
    return CheckResult(
        floor.name,
        "performance",
        verdict,
        message + (f" -- {', '.join(problems)}" if problems else ""),
        measured=measured,
        bound=floor.bound,
        details=details,
    )
