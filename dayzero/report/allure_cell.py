"""One cell's story in Allure: labels, parameters, links, category and attachments.

The plugin calls `label_cell` when a cell starts and `label_failure` when it ends; `run.cell`
calls `attach_story` once the evidence is written, on every exit path. Everything attached is
derived from the evidence and the files it names (never from a lab host, never recomputed from
raw records), and passes through `dayzero.redact` first: the evidence is the record, the Allure
result is a view of it.

History: the lab host, the xdist worker, the run id and the engine version are parameters
marked `excluded`, so Allure's history id (and therefore its trends) follows the cell, not the
machine or the build that ran it.
"""

from __future__ import annotations

import difflib
import json
import logging
import os
import statistics
from collections.abc import Iterable
from pathlib import Path

import allure

from dayzero.checks import family_of
from dayzero.lab.preflight import UNKNOWN
from dayzero.redact import redact
from dayzero.report import allure_cards, plots
from dayzero.report import claims as claims_table
from dayzero.run import records
from dayzero.spec.card import ModelCard, published_word
from dayzero.spec.matrix import Cell

log = logging.getLogger(__name__)

# Label read by the categories of `allure_env.CATEGORIES`; one value per result.
CATEGORY_LABEL = "dayzero_category"
INFRASTRUCTURE, CORRECTNESS, PERFORMANCE, REGRESSION = (
    "infrastructure",
    "correctness",
    "performance_floor",
    "regression",
)
# Where `dayzero report` puts the HTML report: evidence links are relative to it.
REPORT_DIR = "allure-report"


def label_cell(cell: Cell, card: ModelCard) -> None:
    """epic/feature/story = model/hardware/mode; strategy+options as sub-suite (tags come from markers)."""
    allure.dynamic.epic(cell.model)
    allure.dynamic.feature(cell.hardware)
    allure.dynamic.story(cell.mode)
    allure.dynamic.parent_suite(cell.model)
    allure.dynamic.suite(f"{cell.hardware} / {cell.mode}")
    allure.dynamic.sub_suite("+".join((cell.strategy, *cell.options)))
    allure.dynamic.title(cell.id)
    allure.dynamic.parameter("cell", cell.id)
    allure.dynamic.label("published", published_word(cell))
    if card.source:
        allure.dynamic.link(card.source, name="recipe source")
    allure.dynamic.link(Path(card.path).resolve().as_uri(), name=f"model card {Path(card.path).name}")


def failure_category(checks: Iterable[dict], error: str = "", verdict: str = "failed") -> str:
    """The category of a failed or broken cell: lab fault, wrong answer, or missed floor."""
    if verdict == "broken":
        return INFRASTRUCTURE
    kinds = {c["kind"] for c in checks if c["verdict"] != "passed"}
    if "correctness" in kinds or (error and not kinds):
        return CORRECTNESS  # a recipe that does not come up serves nobody correctly
    return PERFORMANCE


def label_failure(category: str) -> None:
    allure.dynamic.label(CATEGORY_LABEL, category)


def environment_facts(ctx, doc: dict) -> dict:
    """Engine, hardware and hosts as the evidence recorded them; the driver version is the one
    preflight read (`unknown` in evidence written before preflight read it)."""
    hardware = ctx.matrix.hardware.get(doc["hardware"])
    tool = hardware.device_query if hardware else ""
    return {
        "engine": doc["engine"],
        "hardware": {
            "name": doc["hardware"],
            "vendor": hardware.vendor if hardware else "",
            "memory_gb": hardware.memory_gb if hardware else None,
            "device_tool": tool,
        },
        "hosts": [
            {**h, "driver": h["facts"].get("driver_version") or UNKNOWN} if h.get("facts") is not None else h
            for h in doc["hosts"]
        ],
        "controller": doc["run"]["controller"],
        "harness_version": doc["run"]["harness_version"],
    }


def metric_summary(doc: dict) -> list[dict]:
    return [
        {
            "check": c["name"],
            "verdict": c["verdict"],
            "measured": c.get("measured"),
            "bound": c.get("bound"),
            **{k: v for k, v in (c.get("details") or {}).items() if k != "records"},
        }
        for c in doc["checks"]
        if c["kind"] == "performance"
    ]


def intervals_text(doc: dict) -> str:
    """Each performance check's figure with its 95% interval and sample, its verdict, and a mark
    where a host was contended while it was measured (issue 41, items 1 and 4)."""
    lines = []
    for c in doc["checks"]:
        details = c.get("details") or {}
        iv = details.get("interval")
        contended = details.get("contended") or {}
        if c["kind"] != "performance" or (iv is None and not contended):
            continue
        if iv is None:
            span = "no interval"
        elif iv.get("lo") is None or iv.get("hi") is None:
            span = iv.get("why") or f"not supported by n={iv.get('n')}"
        else:
            span = (
                f"[{iv['lo']:g}, {iv['hi']:g}] {iv.get('method', '')} n={iv.get('n')} runs={iv.get('runs')}"
            )
        line = f"{c['name']}: {c.get('measured')} {span} -> {c['verdict'].upper()} (bound {c.get('bound')})"
        if contended:
            line += " CONTENDED: " + "; ".join(f"{p}: {why}" for p, why in contended.items())
        lines.append(line)
    return "\n".join(lines)


def golden_diff(doc: dict) -> str:
    """Every golden check: identical, or a unified diff of the golden against the answer."""
    out = []
    for c in doc["checks"]:
        if family_of(c) != "golden":
            continue
        expected = (c.get("details") or {}).get("golden")
        actual = c.get("measured") or ""
        head = f"== {c['name']} [{c['verdict']}] policy {c.get('bound')}: {c['message']}"
        if expected is None:
            out.append(f"{head}\n(no golden recorded)\n")
        elif expected == actual:
            out.append(f"{head}\n(identical)\n")
        else:
            diff = difflib.unified_diff(
                expected.splitlines(True) or [""],
                actual.splitlines(True) or [""],
                "golden",
                "answer",
            )
            out.append(head + "\n" + "".join(diff) + "\n")
    return "\n".join(out)


def throughput_points(doc: dict) -> list[tuple[str, float, float, tuple[float, float] | None]]:
    """(series, concurrency, measured, its interval or None) of each throughput floor."""
    points = []
    for c in doc["checks"]:
        details = c.get("details") or {}
        metric, _, where = c["name"].split(":", 1)[-1].partition("@")
        workload = details.get("workload") or (where.rsplit("/", 1)[0] if "/" in where else "")
        if family_of(c) == "floor" and "throughput" in metric and isinstance(c.get("measured"), int | float):
            name = f"{metric} {workload}".strip()
            if (details.get("contended") or None) is not None:
                name += " (contended)"  # never drawn as a clean number
            iv = details.get("interval") or {}
            bar = (iv["lo"], iv["hi"]) if iv.get("lo") is not None and iv.get("hi") is not None else None
            points.append((name, float(details.get("concurrency", 1)), float(c["measured"]), bar))
    return points


LATENCY_QUANTILES = (("median", 0.5), ("p90", 0.9), ("p99", 0.99))
LATENCY_KINDS = (("ttft", "ttft_ms"), ("e2e", "e2e_latency_ms"))


def _quantiles(summaries: list[dict], metric: str) -> list[tuple[float, float]]:
    """(ms, share of requests) per quantile: the median over repetitions of each."""
    out = []
    for stat, share in LATENCY_QUANTILES:
        values = [s[f"{stat}_{metric}"] for s in summaries if s.get(f"{stat}_{metric}") is not None]
        if values:
            out.append((statistics.median(values), share))
    return out


def latencies(doc: dict) -> dict[str, dict[str, list[tuple[float, float]]]]:
    """Load run -> TTFT and end-to-end latency quantiles, from the summaries `checks.performance`
    computed and the floor checks carry in their details."""
    out: dict[str, dict[str, list[tuple[float, float]]]] = {}
    for c in doc["checks"]:
        details = c.get("details") or {}
        summaries = details.get("summaries") or []
        if c["kind"] != "performance" or not summaries or "concurrency" not in details:
            continue
        label = records.load_label(Path(details["records"][0]).stem) if details.get("records") else None
        run = label or f"{details.get('workload', 'default')}-c{details['concurrency']}"
        if run not in out:  # floors on one measurement share its summaries
            out[run] = {kind: _quantiles(summaries, metric) for kind, metric in LATENCY_KINDS}
    return out


def _attach_text(path: Path, name: str, kind, secrets) -> None:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return
    allure.attach(redact(text, secrets), name, kind)


def attach_story(ctx, doc: dict, evidence_path: Path | None) -> None:
    """Parameters, links and attachments for one cell run; never raises (the run is the record)."""
    try:
        _attach_story(ctx, doc, evidence_path)
    except Exception as exc:  # noqa: BLE001 - a report glitch must not change a cell's verdict
        log.warning("dayzero: could not attach the story of %s: %s", doc.get("cell"), exc)


def _attach_story(ctx, doc: dict, evidence_path: Path | None) -> None:
    secrets = ctx.inventory.secrets
    reports_dir = Path(ctx.reports_dir)
    allure.dynamic.parameter("lab host", ", ".join(h["name"] for h in doc["hosts"]) or "-", excluded=True)
    allure.dynamic.parameter("worker", doc["run"]["worker"], excluded=True)
    allure.dynamic.parameter("run", doc["run"]["id"], excluded=True)
    allure.dynamic.parameter("engine version", doc["engine"]["version"], excluded=True)
    allure.dynamic.parameter("recipe digest", doc["recipe"]["digest"] or "-", excluded=True)
    if evidence_path is not None:
        rel = os.path.relpath(evidence_path, reports_dir / REPORT_DIR)
        allure.dynamic.link(rel, name=f"evidence {evidence_path.name}")
    if card := allure_cards.card_href(doc):  # written by `dayzero report`, next to the report
        allure.dynamic.link(card, name=f"benchmark card {doc['model']} on {doc['hardware']}")
    facts = redact(json.dumps(environment_facts(ctx, doc), indent=2, default=str), secrets)
    allure.attach(facts, "environment facts", allure.attachment_type.JSON)
    for rel in doc.get("logs", []):
        _attach_text(
            reports_dir / rel, f"server log (full): {Path(rel).name}", allure.attachment_type.TEXT, secrets
        )
    for rel in doc.get("records", []):
        _attach_text(
            reports_dir / rel, f"raw records: {Path(rel).name}", allure.attachment_type.JSON, secrets
        )
    if table := intervals_text(doc):
        allure.attach(redact(table, secrets), "intervals", allure.attachment_type.TEXT)
    summary = metric_summary(doc)
    if summary:
        allure.attach(
            redact(json.dumps(summary, indent=2, default=str), secrets),
            "metric summary",
            allure.attachment_type.JSON,
        )
    if answered := claims_table.rows_of(doc):
        allure.attach(redact(claims_table.as_text(answered), secrets), "claims", allure.attachment_type.TEXT)
    diff = golden_diff(doc)
    if diff:
        allure.attach(redact(diff, secrets), "golden diff", allure.attachment_type.TEXT)
    points = throughput_points(doc)
    if points:
        allure.attach(
            plots.throughput_chart(points), "throughput versus concurrency", allure.attachment_type.SVG
        )
    lat = latencies(doc)
    if any(v for kinds in lat.values() for v in kinds.values()):
        allure.attach(plots.latency_cdf_chart(lat), "latency CDF", allure.attachment_type.SVG)
