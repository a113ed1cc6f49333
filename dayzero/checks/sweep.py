"""A sweep's points and its check (pure): what the run and the submission checker both compute.

`point` turns one measured load (a `Measurement`, its repetitions' raw records) into the row the
benchmark card prints; `next_load` is the bounded search for the max load at SLO between the
points already measured; `context_fit` says how TTFT and decode time grow with the input length;
`sweep_check` is the sweep's one check, whose details hold every point; `sweep_floor_check`
holds what it found (the max load at SLO, the decode-time ratio) to the card's floor, if any, on
the interval of its points' own data as every floor is (`checks.intervals`): passed where the
interval clears the bound, failed where it misses it, inconclusive in between, with the loads it
hinges on (`unsettled`) for the walk to measure again (`run.sweeps.walk`).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence

from dayzero.checks import FAILED, INCONCLUSIVE, NOT_MEASURED, PASSED, CheckResult
from dayzero.checks.energy import from_hosts, from_power
from dayzero.checks.intervals import Interval, judge
from dayzero.checks.measurement import Measurement
from dayzero.checks.metrics import DEFINITIONS, completed, output_tokens
from dayzero.checks.performance import INVALID
from dayzero.checks.slo import pooled
from dayzero.spec.sweeps import Sweep

# the summary keys a point keeps (median over repetitions)
KEPT = (
    "output_throughput",
    "output_throughput_per_accelerator",
    "request_throughput",
    "median_interactivity",
    "median_ttft_ms",
    "p99_ttft_ms",
    "median_itl_ms",
    "p99_itl_ms",
    "median_tpot_ms",
    "p99_tpot_ms",
    "mean_input_tokens",
)


def _median(values: Sequence[float]) -> float | None:
    return round(statistics.median(values), 3) if values else None


def point(
    sweep: Sweep,
    load: float,
    m: Measurement,
    answers: Sequence[Mapping],
    accelerators: int = 1,
) -> dict:
    """One measured load: medians of the repetitions' summaries, SLO attainment and goodput, and
    the client-versus-server TTFT gap the measurement found (`checks.server_latency`)."""
    row: dict = {"load": load, "label": sweep.label(load), "records": list(m.records)}
    for key in KEPT:
        row[key] = _median(m.values(key))
    row["intervals"] = {k: m.intervals[k].to_json() for k in KEPT if k in m.intervals}
    row["failed_requests"] = m.failed_requests
    runs = [a["records"] for a in answers]
    gap = m.server_gap
    row["server_ttft_gap_ms"] = gap.gap_ms
    row["gap_judged"] = gap.judged
    row["client_flagged"] = gap.flagged
    row["server_gap"] = gap.to_json()
    if sweep.slo is not None:
        row.update(pooled(runs, sweep.slo))
    row["energy"] = energy(answers, accelerators)
    if m.invalid:
        row["invalid"] = list(m.invalid)
    if m.compliance:
        row["compliance"] = list(m.compliance)
    return row


def _run_energy(answer: Mapping, accelerators: int) -> dict:
    """One repetition's energy: every host of the cell where the run named them (`power_host`,
    the client's, and `power_hosts`, the others'), else the client's host alone (older records)."""
    tokens = sum(output_tokens(r) for r in completed(answer["records"]))
    power = answer.get("power")
    if "power_host" not in answer:
        return from_power(power, tokens, accelerators)
    seconds = float(power["t1"]) - float(power["t0"]) if power else 0.0
    hosts = {answer["power_host"]: power, **(answer.get("power_hosts") or {})}
    return from_hosts(hosts, tokens, seconds, accelerators)


def energy(answers: Sequence[Mapping], accelerators: int) -> dict:
    """Joules per output token over the point's repetitions, from each run's power samples."""
    runs = [_run_energy(a, accelerators) for a in answers]
    measured = [r for r in runs if "joules" in r]
    if not measured:
        return runs[0] if runs else {"not_measured": "no run"}
    tokens = sum(output_tokens(r) for a in answers for r in completed(a["records"]))
    total = sum(r["joules"] for r in measured)
    out = {
        "source": measured[0]["source"],
        "joules": round(total, 3),
        "joules_per_token": round(total / tokens, 6) if tokens and len(measured) == len(runs) else None,
        "watts_per_accelerator": measured[0]["watts_per_accelerator"],
    }
    return out | ({"hosts": measured[0]["hosts"]} if "hosts" in measured[0] else {})


def _interval(js: Mapping | None) -> Interval | None:
    """An interval as the evidence keeps it (`Interval.to_json`); None where a row has none."""
    if not js:
        return None
    return Interval(js.get("lo"), js.get("hi"), js.get("n", 0), js.get("runs", 1), js.get("method", ""))


def at_slo(p: Mapping, target: float) -> str:
    """A point against the SLO's target on its attainment's interval: passed (met), failed
    (missed) or inconclusive; a row without one (older evidence) on its attainment alone."""
    iv = _interval((p.get("slo_intervals") or {}).get("attainment"))
    if iv is None:
        return PASSED if p["attainment"] >= target else FAILED
    return judge(iv, target, "min")


def max_load(points: Sequence[Mapping], target: float, met=None) -> dict:
    """The highest load whose attainment holds `target`, below the first load that does not.

    `bounded`: a load above it missed the target (else the sweep never reached its limit).
    `met(point)`: whether a point counts as at SLO (default: its attainment)."""
    met = met or (lambda p: p["attainment"] >= target)
    ordered = sorted((p for p in points if p.get("attainment") is not None), key=lambda p: p["load"])
    best, bounded = None, False
    for p in ordered:
        if met(p):
            best = p["load"]
        else:
            bounded = True
            break
    return {"load": best, "bounded": bounded, "target": target}


def next_load(sweep: Sweep, points: Sequence[Mapping]) -> float | None:
    """The load to measure next in the bisection between the last load at SLO and the first one
    above it that missed; None when they are adjacent (concurrency) or the sweep has no SLO."""
    if sweep.slo is None or sweep.kind == "context":
        return None
    found = max_load(points, sweep.slo.target)
    if not found["bounded"] or found["load"] is None:
        return None
    lo = found["load"]
    hi = min(p["load"] for p in points if p["load"] > lo and p.get("attainment", 1) < sweep.slo.target)
    if sweep.kind == "concurrency":
        mid = float((int(lo) + int(hi)) // 2)
        return mid if lo < mid < hi else None
    mid = round((lo + hi) / 2, 3)
    return mid if lo < mid < hi else None


# --- the context sweep --------------------------------------------------------------------------


def _solve(a: list[list[float]], b: list[float]) -> list[float] | None:
    """Gaussian elimination with partial pivoting; None when singular."""
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for c in range(n):
        pivot = max(range(c, n), key=lambda r: abs(m[r][c]))
        if abs(m[pivot][c]) < 1e-12:
            return None
        m[c], m[pivot] = m[pivot], m[c]
        for r in range(n):
            if r != c:
                f = m[r][c] / m[c][c]
                m[r] = [x - f * y for x, y in zip(m[r], m[c], strict=True)]
    return [m[i][n] / m[i][i] for i in range(n)]


def polyfit(xs: Sequence[float], ys: Sequence[float], degree: int) -> list[float] | None:
    """Least-squares coefficients [c0, c1, ...] of y = c0 + c1 x + ...; None if underdetermined."""
    if len(xs) <= degree:
        return None
    scale = max(xs) or 1.0  # conditioning: fit on x / scale, then rescale
    u = [x / scale for x in xs]
    k = degree + 1
    a = [[sum(ui ** (i + j) for ui in u) for j in range(k)] for i in range(k)]
    b = [sum(y * ui**i for ui, y in zip(u, ys, strict=True)) for i in range(k)]
    coef = _solve(a, b)
    return None if coef is None else [c / scale**i for i, c in enumerate(coef)]


def growth(xs: Sequence[float], ys: Sequence[float]) -> dict:
    """How y grows with x: the linear and quadratic fits, and which term dominates at the longest
    x (quadratic when its x^2 term is over 25% of the fitted value there, linear when the x term
    is over 10%, else flat)."""
    pairs = [(x, y) for x, y in zip(xs, ys, strict=True) if y is not None]
    if len(pairs) < 2:
        return {"growth": None, "points": len(pairs)}
    px, py = [p[0] for p in pairs], [p[1] for p in pairs]
    lin = polyfit(px, py, 1)
    quad = polyfit(px, py, 2) if len(pairs) >= 4 else None  # three points fit any parabola
    top = max(px)
    label = "flat"
    if quad is not None:
        fitted = quad[0] + quad[1] * top + quad[2] * top**2
        if fitted > 0 and quad[2] * top**2 / fitted > 0.25:
            label = "quadratic"
    if label == "flat" and lin is not None:
        fitted = lin[0] + lin[1] * top
        if fitted > 0 and lin[1] * top / fitted > 0.10:
            label = "linear"
    return {
        "growth": label,
        "linear": [round(c, 9) for c in lin] if lin else None,
        "quadratic": [round(c, 12) for c in quad] if quad else None,
        "points": len(pairs),
    }


def context_fit(points: Sequence[Mapping]) -> dict:
    """TTFT, ITL and decode time per token against input length; the decode-time ratio between the
    longest and the shortest input (the "is attention over a long context the main cost" figure)."""
    ordered = sorted(points, key=lambda p: p["load"])
    xs = [p["load"] for p in ordered]
    out = {
        metric: growth(xs, [p.get(metric) for p in ordered])
        for metric in ("median_ttft_ms", "median_itl_ms", "median_tpot_ms")
    }
    first, last = ordered[0].get("median_tpot_ms"), ordered[-1].get("median_tpot_ms")
    out["decode_ratio"] = round(last / first, 3) if first and last and len(ordered) > 1 else None
    return out


# --- the sweep's check --------------------------------------------------------------------------


def check_name(sweep: Sweep) -> str:
    return f"sweep:{sweep.name}@{sweep.workload}"


def sweep_check(sweep: Sweep, points: Sequence[Mapping], skipped: Sequence[float]) -> CheckResult:
    """Every point in the details; invalid when a point's client saturated, failed when a point's
    records show gaming (anti-gaming findings). Not reaching every point in the budget is said."""
    details: dict = {
        "sweep": sweep.name,
        "kind": sweep.kind,
        "workload": sweep.workload,
        "points": list(points),
        "skipped": list(skipped),
        "budget_s": sweep.budget_s,
        "definitions": {
            **DEFINITIONS,
            "attainment": "share of requests that completed and met every SLO bound",
            "goodput": "requests/s and output tokens/s of requests that met the SLO",
            "server_ttft_gap_ms": "client TTFT minus the engine's own: the median per request "
            "against llama.cpp's prompt time (the client, the network and, where requests "
            "outnumber the server's slots, its queue), the mean against SGLang's TTFT histogram",
        },
    }
    if sweep.slo is not None:
        details["slo"] = sweep.slo.to_json()
        if sweep.kind != "context":
            details["max_load_at_slo"] = max_load(points, sweep.slo.target)
    if sweep.kind == "context" and points:
        details["fit"] = context_fit(points)
    name = check_name(sweep)
    loads = ", ".join(p["label"] for p in points) or "none"
    message = f"{sweep.kind} sweep of {sweep.workload}: {len(points)} point(s) measured ({loads})"
    if skipped:
        message += f"; {len(skipped)} not reached within the {sweep.budget_s:g} s budget"
    if "max_load_at_slo" in details:
        found = details["max_load_at_slo"]
        at = "none" if found["load"] is None else f"{found['load']:g}"
        message += f"; max load at SLO ({sweep.slo.describe()}, {sweep.slo.target:.0%}): {at}"
        if found["load"] is not None and not found["bounded"]:
            message += " (not bounded: every load met it)"
    invalid = [f"{p['label']}: {p['invalid'][0]}" for p in points if p.get("invalid")]
    gamed = [f"{p['label']}: {p['compliance'][0]}" for p in points if p.get("compliance")]
    verdict = FAILED if gamed else INVALID if invalid else PASSED
    if gamed:
        message += "; anti-gaming: " + "; ".join(gamed)
    elif invalid:
        message += "; invalid: " + "; ".join(invalid)
    return CheckResult(name, "performance", verdict, message, measured=len(points), details=details)


# --- the sweep's floor, on intervals ---------------------------------------------------------------


def load_interval(points: Sequence[Mapping], target: float) -> Interval | None:
    """The max load at SLO read both ways from the points' attainment intervals (Wilson, 95% per
    point): `lo` with every inconclusive point counted as missed, `hi` as met (0: no load); None
    where a point has no interval (older evidence)."""
    counted = [p for p in points if p.get("attainment") is not None]
    if any(not (p.get("slo_intervals") or {}).get("attainment") for p in counted):
        return None
    low = max_load(counted, target, lambda p: at_slo(p, target) == PASSED)["load"]
    high = max_load(counted, target, lambda p: at_slo(p, target) != FAILED)["load"]
    n = sum(int(p.get("requests") or 0) for p in counted)
    runs = sum(len(p.get("records") or ()) for p in counted)
    return Interval(float(low or 0.0), float(high or 0.0), n, runs, "wilson per point")


def ratio_interval(first: Mapping, last: Mapping) -> Interval | None:
    """The decode-time ratio's interval from its two ends' median TPOT intervals (95% each, so
    both hold at once at 90% at least: Bonferroni); None where an end has none (older evidence)."""
    a, b = (_interval((p.get("intervals") or {}).get("median_tpot_ms")) for p in (first, last))
    if a is None or b is None:
        return None
    n, runs, method, confidence = a.n + b.n, a.runs + b.runs, "ratio of order-statistic intervals", 0.9
    for p, iv in ((first, a), (last, b)):
        if not iv.supported or iv.lo <= 0:
            why = f"decode time per token at {p.get('label', p['load'])} not supported by n={iv.n}"
            return Interval(None, None, n, runs, method, confidence, why)
    return Interval(b.lo / a.hi, b.hi / a.lo, n, runs, method, confidence)


def sweep_floor_check(sweep: Sweep, result: CheckResult) -> CheckResult | None:
    """The sweep's floor against what its check found, judged on its interval; None without a
    floor. A sweep that is invalid or gamed is not compared; a bound the points cannot settle (the
    budget ran out before a load at the floor, or before the longest input) is not measured, never
    failed; an interval that straddles the bound is inconclusive, with the loads it hinges on
    (`details.unsettled`: one more repetition of each may settle it)."""
    floor = sweep.floor
    if floor is None:
        return None
    d = result.details

    def out(verdict: str, message: str, measured=None, **details) -> CheckResult:
        return CheckResult(
            sweep.floor_name,
            "performance",
            verdict,
            f"{sweep.kind} sweep {sweep.name} of {sweep.workload}: {message}",
            measured=measured,
            bound=floor.bound,
            details={"sweep": result.name, "metric": floor.metric, "direction": floor.direction, **details},
        )

    def on(interval: Interval | None, value_verdict: str, said: str, hinges, measured, **details):
        """The verdict on the interval where there is one (on the value in older evidence)."""
        verdict = judge(interval, floor.bound, floor.direction) or value_verdict
        if interval is None:
            return out(verdict, said, measured, **details)
        if verdict != value_verdict and interval.supported:  # said where it decides otherwise, as floors do
            said += f", interval {interval.describe()}"
        details["interval"] = interval.to_json()
        if verdict == INCONCLUSIVE:
            said += f" -- inconclusive: {hinges[0]}"
            details["unsettled"] = list(hinges[1])
        return out(verdict, said, measured, **details)

    if result.verdict != PASSED:
        return out(result.verdict, f"{floor.describe()} not compared: the sweep is {result.verdict}")
    skipped = [f"{sweep.label(x)}" for x in d.get("skipped", [])]
    points = sorted(d.get("points") or [], key=lambda p: p["load"])
    if floor.metric == "decode_ratio":
        fit = d.get("fit")
        ratio = (fit or {}).get("decode_ratio")
        if skipped:
            return out(NOT_MEASURED, f"{floor.describe()}: the longest input ({skipped[-1]}) was not reached")
        if ratio is None:
            return out(NOT_MEASURED, f"{floor.describe()}: decode time not measured at two input lengths")
        ok = ratio <= floor.bound
        said = f"decode_ratio {ratio:g} {'<=' if ok else '>'} {floor.bound:g}"
        interval = ratio_interval(points[0], points[-1])
        why = interval.why if interval and not interval.supported else "the interval straddles the bound"
        ends = (points[0]["load"], points[-1]["load"])
        return on(interval, PASSED if ok else FAILED, said, (why, ends), ratio, fit=fit)
    found = d.get("max_load_at_slo") or {}
    load, target = found.get("load"), found.get("target", 0)
    interval = load_interval(points, target)
    # the optimistic reading (an inconclusive point counted as met) decides "not reached"
    high = max_load(points, target, lambda p: at_slo(p, target) != FAILED) if interval else found
    if load is not None and load >= floor.bound:
        note = "" if found.get("bounded") else " (every load measured met it)"
        said = f"max load at SLO {load:g} >= {floor.bound:g}{note}"
    elif not high["bounded"] and (skipped or not points) and (high["load"] or 0) < floor.bound:
        why = f"{floor.describe()}: not reached within the {sweep.budget_s:g} s budget"
        return out(NOT_MEASURED, why + f" (not measured: {', '.join(skipped) or 'every load'})", load)
    else:
        missed = next((p["label"] for p in points if p.get("attainment", 1) < target), "")
        at = "no load met the SLO" if load is None else f"max load at SLO {load:g} < {floor.bound:g}"
        said = f"{at} ({missed} missed the target)"
    value_verdict = PASSED if load is not None and load >= floor.bound else FAILED
    top = high["load"] if high["load"] is not None else float("-inf")
    counted = [p for p in points if p.get("attainment") is not None]
    unsure = [p for p in counted if at_slo(p, target) == INCONCLUSIVE and p["load"] <= top]
    why = f"attainment at {', '.join(p['label'] for p in unsure)} straddles the {target:.0%} target"
    hinges = (why, [p["load"] for p in unsure])
    return on(interval, value_verdict, said, hinges, load, max_load_at_slo=found)


def unsettled(sweep: Sweep, points: Sequence[Mapping], skipped: Sequence[float]) -> list[float]:
    """The loads the sweep's floor hinges on while it is inconclusive; none once it is settled
    (or where the sweep has no floor)."""
    floor = sweep_floor_check(sweep, sweep_check(sweep, points, skipped))
    if floor is None or floor.verdict != INCONCLUSIVE:
        return []
    return list(floor.details.get("unsettled", ()))
