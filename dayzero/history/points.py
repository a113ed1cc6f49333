"""What the history keeps of one evidence document: its points (series -> value) and its facts.

A **series** is one metric of one cell, named `metric@workload` (`output_throughput@chat/c4`,
`median_ttft_ms@chat/c4`, `accuracy:gsm8k-mini`, `speculative:accept_length@chat`,
`joules_per_token@chat/c4`). The **facts** are what a change point is attributed to: what the
run ran (engine version, recipe digest, harness) and where (hosts, driver, weights checksums).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from dayzero.clock import parse_iso
from dayzero.history.levels import direction, levels

# the levels a history follows: throughputs, TTFT, inter-token latency (tails included)
FOLLOWED = (
    "output_throughput",
    "total_token_throughput",
    "request_throughput",
    "median_ttft_ms",
    "p90_ttft_ms",
    "median_itl_ms",
    "p90_itl_ms",
    "median_tpot_ms",
)
FACTS = ("engine", "recipe", "harness", "hosts", "driver", "weights")
UNNAMED_LAB = "unnamed"  # the lab of evidence from an inventory that names none (and of older evidence)


@dataclass(frozen=True)
class Point:
    series: str
    value: float
    higher_is_better: bool
    lo: float | None = None  # the figure's interval where the evidence gives one (details.intervals)
    hi: float | None = None


@dataclass(frozen=True)
class Run:
    """One evidence document as the store indexes it."""

    cell: str
    run_id: str
    lab: str  # the inventory's `lab:`, else UNNAMED_LAB: a series is per lab
    controller: str
    finished: str  # ISO time the run ended: the order of a series
    source: str
    vendor: str | None  # the vendor of accepted submission evidence, else None
    verdict: str
    facts: dict[str, str]
    points: tuple[Point, ...]

    @property
    def uid(self) -> str:
        """Globally unique with the cell: the controller that ran it and its run id there (two
        labs' nights of one cell in the same second are two runs), and a vendor's its origin
        first (a vendor's run under a lab's controller and run id is another run)."""
        return uid(self.controller, self.run_id, self.vendor)


def uid(controller: str, run_id: str, vendor: str | None = None) -> str:
    return f"{VENDOR_ORIGIN}{vendor}:{controller}/{run_id}" if vendor else f"{controller}/{run_id}"


VENDOR_ORIGIN = "vendor:"  # a vendor's runs: uid and lab begin with it (no host name holds ':')


def vendor_lab(vendor: str) -> str:
    """The lab a vendor's runs belong to: its own series, never a lab's it names."""
    return f"{VENDOR_ORIGIN}{vendor}"


def _workload(check_name: str) -> str:
    return check_name.split("@", 1)[1] if "@" in check_name else ""


def clean(check: dict) -> bool:
    """A measurement that is a product number: not judged invalid, not measured while a host was
    contended (`details.contended`, phase -> what contended it). The others are gaps in a series,
    never a level: a contended night's -30% is no regression."""
    return check.get("verdict") != "invalid" and not (check.get("details") or {}).get("contended")


def points(doc: dict) -> list[Point]:
    """The followed metrics of a document's clean checks (none of a broken run); a metric seen
    twice (two floors on one workload carry the same summaries) is kept once, first wins."""
    out: dict[str, Point] = {}
    if doc.get("verdict") == "broken":
        return []  # the run broke: its numbers are no level of the product (a gap in its series)
    for check in doc.get("checks") or ():
        if not clean(check):
            continue
        name, kind, measured = check["name"], check["kind"], check.get("measured")
        details = check.get("details") or {}
        if kind == "performance":
            where = _workload(name)
            intervals = details.get("intervals") or {}
            for metric, (value, _) in levels(check, FOLLOWED).items():
                if metric in FOLLOWED:
                    series = f"{metric}@{where}" if where else metric
                    lo, hi = _interval(intervals.get(metric))
                    out.setdefault(series, Point(series, value, bool(direction(metric)), lo, hi))
            joules = (details.get("energy") or {}).get("joules_per_token")
            if isinstance(joules, int | float):
                series = f"joules_per_token@{where}"
                out.setdefault(series, Point(series, float(joules), False))
        elif isinstance(measured, int | float) and name.startswith(("accuracy:", "speculative:")):
            out.setdefault(name, Point(name, float(measured), True))
    return sorted(out.values(), key=lambda p: p.series)


def _interval(found) -> tuple[float | None, float | None]:
    """A figure's (lo, hi) from `checks.intervals`' JSON; (None, None) where it has none."""
    if not isinstance(found, dict):
        return None, None
    lo, hi = found.get("lo"), found.get("hi")
    if isinstance(lo, int | float) and isinstance(hi, int | float):
        return float(lo), float(hi)
    return None, None


def facts(doc: dict) -> dict[str, str]:
    """What the run ran and where, each as one comparable string."""
    hosts = doc.get("hosts") or []
    seen = [h.get("facts") or {} for h in hosts]
    weights = sorted(
        {
            f"{m.get('path', '?')}={m['sha256'][:16]}"
            for f in seen
            for m in f.get("model_files") or ()
            if m.get("sha256")
        }
    )
    engine = doc.get("engine") or {}
    return {
        "engine": f"{engine.get('name', '?')} {engine.get('version', '?')}",
        "recipe": (doc.get("recipe") or {}).get("digest", "?"),
        "harness": doc["run"].get("harness_version", "?"),
        "hosts": ",".join(sorted(h["name"] for h in hosts)),
        "driver": ",".join(sorted({str(f.get("driver_version")) for f in seen if f.get("driver_version")})),
        "weights": ",".join(weights),
    }


def lab_of(doc: dict) -> str:
    return doc["run"].get("lab") or UNNAMED_LAB


def utc(text: str) -> str:
    """A stated time in UTC, as the lab writes it (`+00:00`): the store orders runs as text, and
    `+02:00` or `Z` text sorts otherwise than the instants it names."""
    parsed = parse_iso(text)
    if parsed is None or text.endswith("+00:00"):
        return text
    return parsed.astimezone(dt.UTC).isoformat()


def vendor_of(doc: dict) -> str | None:
    """Whose run it is when not the lab's: accepted vendor evidence names its vendor."""
    sub = doc.get("submission") or {}
    if sub.get("vendor"):
        return sub["vendor"]
    source = doc.get("source", "dayzero")
    return None if source == "dayzero" else source


def read(doc: dict, vendor: str | None = None) -> Run:
    """One document as the store keeps it; `vendor`: whose it is, whatever it says (a bundle's
    kept copy, `sources`). A vendor's run is keyed and filed under its origin (`vendor_lab`)."""
    vendor = vendor or vendor_of(doc)
    return Run(
        cell=doc["cell"],
        run_id=doc["run"]["id"],
        lab=vendor_lab(vendor) if vendor else lab_of(doc),
        controller=doc["run"]["controller"],
        finished=utc(doc["run"]["finished"]),
        source=vendor or doc.get("source", "dayzero"),
        vendor=vendor,
        verdict=doc["verdict"],
        facts=facts(doc),
        points=tuple(points(doc)),
    )
