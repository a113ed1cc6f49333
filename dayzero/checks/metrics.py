"""Per-request metrics and one run's summary, from the raw records the host client wrote.

Every number here is computed from the records `dayzero.loadgen.client` writes, so anyone holding
the records can recompute it; the definitions travel with every summary. The client's own health
(saturation) is judged here too: a saturated client's numbers are its own, not the server's.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence

from dayzero.spec.card import THROUGHPUTS, SaturationLimits

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


def run_summary(records: Sequence[Mapping], accelerators: int = 1, concurrency: int = 1) -> dict:
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
