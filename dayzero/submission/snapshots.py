"""The /metrics snapshots themselves, before their counters are compared with the records.

A difference of two snapshots is only an account of a phase if each snapshot could be one: it was
read from one of the recipe's own launches (its `role[rank]@host` target and that launch's port),
once per launch and the same launches before and after, and every counter in it is a count a
server could have reached (a finite number, not negative, at most 2^53: past it a float no longer
counts in ones) that never runs backwards between the two reads. Without these a NaN, an infinite
or a negative counter, one that ran backwards or a target the recipe never launched read as
agreement (`engine_metrics` compares differences only).
"""

from __future__ import annotations

import math
from urllib.parse import urlsplit

from dayzero import engines
from dayzero.engines.prometheus import SAMPLE, readable
from dayzero.run.records import metrics_for
from dayzero.submission.bundle import Reference, Subject
from dayzero.submission.findings import Finding, short

MAX_COUNT = float(2**53)
COUNTER_SUFFIXES = ("_total", "_sum", "_count", "_bucket")  # Prometheus counters and histograms
PLAUSIBLE = "a finite count from 0 to 2^53"


def target_of(launch: dict) -> str:
    """How the run names a launch's /metrics target (`run.cell.endpoint`)."""
    return f"{launch.get('role')}[{launch.get('rank')}]@{launch.get('host')}"


def _port(url) -> int | None:
    try:
        return urlsplit(url).port if isinstance(url, str) else None
    except ValueError:
        return None


def counters(prefix: str, body: str) -> list[tuple[str, str]]:
    """(series, value as printed) of every counter sample of the engine in one /metrics text."""
    out = []
    for line in body.splitlines():
        m = SAMPLE.match(line.strip())
        if (
            m
            and not line.startswith("#")
            and m.group(1).startswith(prefix)
            and m.group(1).endswith(COUNTER_SUFFIXES)
        ):
            out.append((m.group(1) + (m.group(2) or ""), m.group(3)))
    return out


def _value(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return math.nan


def snapshot_problems(prefix: str, doc: dict, launches: list[dict]) -> list[tuple[str, str]]:
    """(what was found, what was expected) for every snapshot of a phase that cannot be an account."""
    known = {target_of(x): x for x in launches}
    launched = ", ".join(f"{t} (port {x.get('port')})" for t, x in known.items())
    out: list[tuple[str, str]] = []
    totals: dict[str, dict[str, dict[str, float]]] = {"before": {}, "after": {}}
    for when in ("before", "after"):
        for i, snap in enumerate(doc[when]):
            target, url = snap["target"], snap.get("url")
            launch = known.get(target)
            if launch is None or _port(url) != launch.get("port"):
                found = f"{when}[{i}]: target {short(target, 60)} at {short(url, 80)}"
                out.append((found, f"a launch of the recipe: {short(launched, 200)}"))
                continue
            if target in totals[when]:
                out.append((f"{when}[{i}]: target {short(target, 60)} read twice", "one read per launch"))
                continue
            series = totals[when][target] = {}
            for name, text in counters(prefix, snap["body"]) if readable(snap) else ():
                value = _value(text)
                if not 0 <= value <= MAX_COUNT:
                    out.append(
                        (
                            f"{when}[{i}] {short(target, 60)}: "
                            f"counter {short(name, 120)} = {short(text, 40)}",
                            PLAUSIBLE,
                        )
                    )
                    continue
                series[name] = series.get(name, 0.0) + value
    if set(totals["before"]) != set(totals["after"]):
        out.append(
            (
                f"targets before {sorted(totals['before'])}, after {sorted(totals['after'])}",
                "the same launches read before and after the phase",
            )
        )
    for target, before in totals["before"].items():
        after = totals["after"].get(target, {})
        for name in sorted(before):
            if after.get(name, 0.0) < before[name]:
                out.append(
                    (
                        f"{short(target, 60)}: counter {short(name, 120)} ran backwards, "
                        f"{before[name]:g} before the phase, {after.get(name, 0.0):g} after",
                        "counters that never decrease between the two reads",
                    )
                )
    return out


def check_snapshots(s: Subject, ref: Reference) -> list[Finding]:
    out = []
    for _, doc in sorted(s.evidence.items()):
        engine = engines.find(doc["engine"]["name"])
        if engine is None or not engine.accounted:
            continue  # an engine whose counters the checker cannot read: engine_account rejects it
        prefix = engine.metrics_prefix
        launches = doc["recipe"]["launches"]
        for rel in doc.get("records", []):
            mrel = metrics_for(rel)
            if rel in s.records and mrel in s.metrics:
                out += [
                    Finding(mrel, "engine.metrics", found, expected)
                    for found, expected in snapshot_problems(prefix, s.metrics[mrel], launches)
                ]
    return out


CHECKS = (check_snapshots,)
