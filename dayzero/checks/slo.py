"""SLO attainment and goodput from raw records (pure).

A request meets the SLO when it completed without error and every bound the card gives holds
(TTFT, TPOT, tokens/s per user); an errored or unfinished request is a miss. Attainment is the
share of requests that met it; goodput is what those requests delivered per second of the run
(DistServe's definition: requests/s, and output tokens/s, of requests within SLO).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from dayzero.checks.intervals import proportion_interval, rate_interval
from dayzero.checks.metrics import completed, latencies, output_tokens
from dayzero.spec.sweeps import Slo


def meets(record: Mapping, slo: Slo) -> bool:
    if record.get("error") or not record.get("end") or not record.get("send"):
        return False
    lat = latencies(record)
    ttft, tpot = lat["ttft_ms"], lat["tpot_ms"]
    if slo.ttft_ms is not None and (not ttft or ttft[0] > slo.ttft_ms):
        return False
    # TPOT is undefined for a one-token answer: nothing to exceed
    if slo.tpot_ms is not None and tpot and tpot[0] > slo.tpot_ms:
        return False
    return not (slo.user_tok_s is not None and tpot and 1000 / max(tpot[0], 1e-9) < slo.user_tok_s)


def duration_s(records: Sequence[Mapping]) -> float:
    """First request sent -> last answer ended, over every request (a miss still took the time)."""
    sends = [r["send"] for r in records if r.get("send")]
    ends = [r["end"] for r in records if r.get("end")]
    return max(max(ends) - min(sends), 1e-9) if sends and ends else 0.0


def goodput(records: Sequence[Mapping], slo: Slo) -> dict:
    """Attainment and goodput of one run's records under `slo`."""
    met = [r for r in records if meets(r, slo)]
    seconds = duration_s(records)
    return {
        "requests": len(records),
        "completed": len(completed(records)),
        "met": len(met),
        "attainment": round(len(met) / len(records), 4) if records else None,
        "goodput_rps": round(len(met) / seconds, 4) if seconds else 0.0,
        "goodput_tok_s": round(sum(output_tokens(r) for r in met) / seconds, 3) if seconds else 0.0,
    }


def pooled(runs: Sequence[Sequence[Mapping]], slo: Slo) -> dict:
    """Several repetitions: attainment over every request, goodput the median run's."""
    each = [goodput(r, slo) for r in runs]
    requests = sum(g["requests"] for g in each)
    met = sum(g["met"] for g in each)
    by_goodput = sorted(each, key=lambda g: g["goodput_tok_s"])
    mid = by_goodput[(len(by_goodput) - 1) // 2] if by_goodput else {}
    # each request's output tokens if it met the SLO (else 0) over its own time: the bootstrap's
    # units for goodput (`checks.intervals.rate_interval`)
    timed = [
        [(output_tokens(r) if meets(r, slo) else 0, r["end"] - r["send"]) for r in completed(run)]
        for run in runs
    ]
    return {
        "requests": requests,
        "met": met,
        "attainment": round(met / requests, 4) if requests else None,
        "goodput_rps": mid.get("goodput_rps", 0.0),
        "goodput_tok_s": mid.get("goodput_tok_s", 0.0),
        "target": slo.target,
        "slo": slo.to_json(),
        "slo_intervals": {  # beside a sweep point's own `intervals`
            "attainment": proportion_interval(met, requests).to_json(),
            "goodput_tok_s": rate_interval([g["goodput_tok_s"] for g in each], timed).to_json(),
        },
    }
