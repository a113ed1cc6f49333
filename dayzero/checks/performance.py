"""Performance: summaries from raw per-request records, floors from the model card, anti-gaming.

Every number here is computed from the records the host client wrote (`dayzero.loadgen.client`),
so anyone holding the records can recompute it; the definitions travel with every summary.
A floor compares the median of N repetitions with its bound and shows margin and spread; a
measurement whose client saturated is *invalid* and never compared with a floor.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from dayzero.checks import FAILED, PASSED, CheckResult
from dayzero.spec.card import THROUGHPUTS, Compliance, Floor, SaturationLimits

INVALID = "invalid"  # the measurement cannot be trusted (client saturated): neither pass nor fail

DEFINITIONS = {
    "ttft_ms": "time to first token: request sent -> first streamed content chunk, ms",
    "tpot_ms": "time per output token after the first: (e2e - ttft) / (output tokens - 1), ms "
    "(MLPerf and vLLM definition; excludes the first token)",
    "itl_ms": "inter-token latency: gaps between consecutive content chunks of a request, pooled over "
    "requests, ms (a chunk holding several tokens counts once)",
    "e2e_latency_ms": "request sent -> response body fully read, ms",
    "interactivity": "tokens/s seen by one user: 1000 / tpot_ms, per request",
    "request_throughput": "completed requests / duration, req/s",
    "output_throughput": "output tokens of completed requests / duration, tok/s",
    "total_token_throughput": "(input + output tokens of completed requests) / duration, tok/s",
    "duration_s": "first request sent -> last response end, s",
    "output_tokens": "server-reported usage.completion_tokens, else the number of content chunks",
    "per_accelerator": "a throughput divided by the accelerators serving the cell",
    "per_user": "a throughput divided by the concurrency (requests in flight)",
    "stats": "mean, median, p90, p99 (linear interpolation between closest ranks, as numpy), std",
}
LATENCIES = ("ttft_ms", "tpot_ms", "itl_ms", "e2e_latency_ms", "interactivity")


# --- statistics ------------------------------------------------------------------------------


def percentile(values: Sequence[float], p: float) -> float:
    """Linear interpolation between closest ranks (numpy's default), so peers' p99 compare."""
    s = sorted(values)
    if not s:
        raise ValueError("percentile of no values")
    k = (len(s) - 1) * p / 100
    lo, hi = math.floor(k), math.ceil(k)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def describe(values: Sequence[float]) -> dict[str, float | None]:
    if not values:
        return {"mean": None, "median": None, "p90": None, "p99": None, "std": None}
    return {
        "mean": round(statistics.fmean(values), 3),
        "median": round(percentile(values, 50), 3),
        "p90": round(percentile(values, 90), 3),
        "p99": round(percentile(values, 99), 3),
        "std": round(statistics.pstdev(values), 3),
    }


# --- one run ---------------------------------------------------------------------------------


def output_tokens(record: Mapping) -> int:
    usage = record.get("usage") or {}
    return int(usage.get("completion_tokens") or len(record.get("chunks") or ()))


def input_tokens(record: Mapping) -> int:
    usage = record.get("usage") or {}
    return int(usage.get("prompt_tokens") or record.get("input_len") or 0)


def completed(records: Iterable[Mapping]) -> list[Mapping]:
    return [r for r in records if not r.get("error") and r.get("end") and r.get("send")]


def latencies(record: Mapping) -> dict[str, list[float]]:
    """One request's latency samples (ms), per metric; empty where undefined."""
    out: dict[str, list[float]] = {m: [] for m in LATENCIES}
    send, first, end = record.get("send"), record.get("first"), record.get("end")
    out["e2e_latency_ms"].append((end - send) * 1000)
    if first is None:
        return out
    out["ttft_ms"].append((first - send) * 1000)
    n = output_tokens(record)
    if n > 1:
        tpot = (end - first) * 1000 / (n - 1)
        out["tpot_ms"].append(tpot)
        if tpot > 0:
            out["interactivity"].append(1000 / tpot)
    chunks = record.get("chunks") or []
    out["itl_ms"] = [(b - a) * 1000 for a, b in zip(chunks, chunks[1:], strict=False)]
    return out


def summarize(records: Sequence[Mapping], accelerators: int = 1, concurrency: int = 1) -> dict:
    """Flat summary in the field's vocabulary (`median_ttft_ms`, `output_throughput`, ...)."""
    done = completed(records)
    out: dict = {"completed": len(done), "failed": len(records) - len(done)}
    sends = [r["send"] for r in records if r.get("send")]
    if not done or not sends:
        out.update({k: 0.0 for k in THROUGHPUTS})
        return out
    duration = max(max(r["end"] for r in done) - min(sends), 1e-9)
    n_in = sum(input_tokens(r) for r in done)
    n_out = sum(output_tokens(r) for r in done)
    out.update(
        {
            "duration_s": round(duration, 3),
            "input_tokens": n_in,
            "output_tokens": n_out,
            "mean_input_tokens": round(n_in / len(done), 2),
            "mean_output_tokens": round(n_out / len(done), 2),
            "request_throughput": round(len(done) / duration, 4),
            "output_throughput": round(n_out / duration, 3),
            "total_token_throughput": round((n_in + n_out) / duration, 3),
        }
    )
    for key in THROUGHPUTS:
        out[f"{key}_per_accelerator"] = round(out[key] / max(accelerators, 1), 4)
        out[f"{key}_per_user"] = round(out[key] / max(concurrency, 1), 4)
    pooled: dict[str, list[float]] = {m: [] for m in LATENCIES}
    for r in done:
        for metric, values in latencies(r).items():
            pooled[metric].extend(values)
    for metric, values in pooled.items():
        for stat, value in describe(values).items():
            out[f"{stat}_{metric}"] = value
    return out


# --- the client's own health --------------------------------------------------------------------


def saturation(answer: Mapping, limits: SaturationLimits | None = None) -> list[str]:
    """Findings that make a run invalid: one line per saturated client process."""
    limits = limits or SaturationLimits()
    findings = []
    for proc in answer.get("procs") or ():
        wall = max(proc.get("wall_s") or 0.0, 1e-9)
        cpu = (proc.get("cpu_s") or 0.0) / wall
        lag = (proc.get("lag_ms") or {}).get("p99")
        why = []
        if cpu >= limits.cpu_fraction:
            why.append(f"CPU {cpu:.0%} of a core >= {limits.cpu_fraction:.0%}")
        if lag is not None and lag >= limits.lag_p99_ms:
            why.append(f"event-loop lag p99 {lag:.1f} ms >= {limits.lag_p99_ms:g} ms")
        if why:
            findings.append(f"client process {proc.get('proc')} saturated: {', '.join(why)}")
    return findings


def client_stats(answer: Mapping) -> dict:
    procs = answer.get("procs") or ()
    return {
        "processes": len(procs),
        "cpu_fraction": [round((p["cpu_s"] or 0) / max(p["wall_s"] or 0, 1e-9), 3) for p in procs],
        "lag_p99_ms": [(p.get("lag_ms") or {}).get("p99") for p in procs],
        "python": (answer.get("client") or {}).get("python"),
    }


# --- anti-gaming --------------------------------------------------------------------------------


def trailing_eos(text: str, eos: Iterable[str]) -> int:
    """How many end-of-sequence markers the text ends with."""
    count, changed = 0, True
    while changed:
        changed = False
        for marker in eos:
            if marker and text.endswith(marker):
                text, count, changed = text[: -len(marker)].rstrip(), count + 1, True
    return count


def compliance_findings(records: Sequence[Mapping], exact_output: bool, rules: Compliance) -> list[str]:
    """What makes a run look faster than the server is: short outputs, inflated counts, EOS runs."""
    done = completed(records)
    if not done:
        return []
    findings = []
    if exact_output:
        requested = sum(r["max_tokens"] for r in done) / len(done)
        got = sum(output_tokens(r) for r in done) / len(done)
        if abs(got - requested) > rules.length_tolerance * requested:
            findings.append(
                f"mean output {got:.1f} tokens vs {requested:.1f} requested "
                f"({(got / requested - 1):+.0%}, tolerance +-{rules.length_tolerance:.0%})"
            )
    with_usage = [r for r in done if (r.get("usage") or {}).get("completion_tokens") is not None]
    if with_usage:
        reported = sum(r["usage"]["completion_tokens"] for r in with_usage)
        chunks = sum(len(r.get("chunks") or ()) for r in with_usage)
        ceiling = chunks * rules.tokens_per_chunk_max * (1 + rules.chunk_tolerance)
        if reported > ceiling + 1:
            findings.append(
                f"server reports {reported} output tokens but streamed only {chunks} content chunks "
                f"(at most {rules.tokens_per_chunk_max:g} token(s) per chunk allowed)"
            )
        elif chunks > reported * (1 + rules.chunk_tolerance) + 1:
            findings.append(f"streamed {chunks} content chunks but the server reports only {reported} tokens")
    sized = [r for r in done if r.get("input_len") and (r.get("usage") or {}).get("prompt_tokens")]
    off = [
        r for r in sized if abs(r["usage"]["prompt_tokens"] - r["input_len"]) > max(2, 0.01 * r["input_len"])
    ]
    if off:
        r = off[0]
        findings.append(
            f"{len(off)} request(s) with input length off the workload's "
            f"(e.g. {r['usage']['prompt_tokens']} tokens for {r['input_len']} requested)"
        )
    eos_runs = [r for r in done if trailing_eos(r.get("text") or "", rules.eos) > 1]
    if eos_runs:
        findings.append(
            f"{len(eos_runs)} output(s) end with more than one EOS marker (e.g. {eos_runs[0]['id']})"
        )
    return findings


# --- floors ------------------------------------------------------------------------------------


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


@dataclass(frozen=True)
class Measurement:
    """One workload at one concurrency, repeated: the summaries floors are evaluated on."""

    workload: str
    concurrency: int
    summaries: tuple[dict, ...]
    invalid: tuple[str, ...] = ()  # saturation findings: the numbers are the client's, not the server's
    compliance: tuple[str, ...] = ()  # anti-gaming findings: the numbers look faster than the server is
    records: tuple[str, ...] = ()  # raw record files
    client: dict = field(default_factory=dict)

    def values(self, key: str) -> list[float]:
        return [s[key] for s in self.summaries if s.get(key) is not None]

    @property
    def failed_requests(self) -> int:
        return sum(s.get("failed", 0) for s in self.summaries)


def phase_name(workload: str, concurrency: int, repetition: int) -> str:
    """Raw records of one repetition: records/<phase>.json next to the evidence."""
    return f"perf-{workload}-c{concurrency}-r{repetition}"


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
    problems = []
    if measurement.failed_requests:
        problems.append(f"{measurement.failed_requests} request(s) failed")
    if not ok:
        problems.append("bound not met")
    problems += [f"anti-gaming: {f}" for f in measurement.compliance]
    details["aggregate"] = agg
    details["margin_pct"] = round(margin, 1)
    return CheckResult(
        floor.name,
        "performance",
        FAILED if problems else PASSED,
        message + (f" -- {', '.join(problems)}" if problems else ""),
        measured=measured,
        bound=floor.bound,
        details=details,
    )
