"""Importers: hold an existing `sglang.bench_serving` or `vllm bench serve` run against our floors.

A lab that already ran a peer benchmark can ask whether that run meets a cell's floors without
running it again: `dayzero import results.json --cell smollm2-135m/cpu+llama.cpp/high_throughput/baseline`.
Peers' result files carry summaries in nearly our vocabulary (`median_ttft_ms`,
`output_throughput`); we map their names onto ours, recompute latency statistics from the
per-request arrays when the file has them (`--output-details` / `--save-detailed`) and say where
the two disagree, and compare only floors whose concurrency matches the run's.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from dayzero.checks import CheckResult
from dayzero.checks.measurement import Measurement
from dayzero.checks.metrics import run_summary
from dayzero.checks.performance import check_floor
from dayzero.errors import ConfigError
from dayzero.spec.card import Floor, ModelCard, floors_for
from dayzero.spec.matrix import Cell

SGLANG, VLLM = "sglang.bench_serving", "vllm bench serve"
ANCHOR = 1.0  # peers keep no send times: every imported request starts at the same instant
STAT = re.compile(r"^(mean|median|std|p\d+(?:\.\d+)?)_(ttft|tpot|itl|e2el|e2e_latency)_ms$")
# Our per-request latency statistics: send times do not enter them, so imported arrays give them.
LATENCY = re.compile(r"^(mean|median|std|p\d+)_(ttft|tpot|itl|e2e_latency)_ms$")
DIRECT = {
    "completed": "completed",
    "failed": "failed",
    "duration": "duration_s",
    "total_input_tokens": "input_tokens",
    "total_output_tokens": "output_tokens",
    "request_throughput": "request_throughput",
    "output_throughput": "output_throughput",
    "total_throughput": "total_token_throughput",  # sglang
    "total_token_throughput": "total_token_throughput",  # vllm
}


@dataclass(frozen=True)
class Imported:
    tool: str
    summary: dict
    concurrency: int | None
    workload: dict  # what the file says about its load: dataset, lengths, prompts, rate
    accept_length: float | None = None
    notes: tuple[str, ...] = ()


def read_runs(path: Path) -> list[dict]:
    """A JSON document, or JSON lines (sglang appends one run per line to --output-file)."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ConfigError(path, "", f"cannot read: {exc.strerror}") from None
    try:
        doc = json.loads(text)
        return doc if isinstance(doc, list) else [doc]
    except ValueError:
        pass
    try:
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    except ValueError as exc:
        raise ConfigError(path, "", f"neither JSON nor JSON lines: {exc}") from None


def detect(run: Mapping) -> str:
    if "total_token_throughput" in run or "mean_e2el_ms" in run or "model_id" in run:
        return VLLM
    if "total_throughput" in run or "mean_e2e_latency_ms" in run or "accept_length" in run:
        return SGLANG
    raise ValueError("not a sglang.bench_serving or vllm bench serve result (no known summary fields)")


def _records(run: Mapping) -> list[dict]:
    """Per-request arrays as raw records (times relative to each request's send; no start times)."""
    ttfts, itls = run.get("ttfts"), run.get("itls")
    if not ttfts or itls is None:
        return []
    outs = run.get("output_lens") or [None] * len(ttfts)
    ins = run.get("input_lens") or [None] * len(ttfts)
    errors = run.get("errors") or [""] * len(ttfts)
    records = []
    for i, (ttft, gaps) in enumerate(zip(ttfts, itls, strict=False)):
        error = errors[i] if i < len(errors) else ""
        offsets = [ttft]
        for gap in gaps or ():
            offsets.append(offsets[-1] + gap)
        records.append(
            {
                "id": f"imported-{i}",
                "send": ANCHOR,
                "first": ANCHOR + ttft if ttft else None,
                "end": ANCHOR + offsets[-1],
                "chunks": offsets,
                "usage": {"completion_tokens": outs[i], "prompt_tokens": ins[i]}
                if outs[i] is not None
                else None,
                "error": error or None,
            }
        )
    return records


def parse(run: Mapping, tool: str | None = None) -> Imported:
    tool = tool or detect(run)
    summary: dict = {}
    for theirs, ours in DIRECT.items():
        if run.get(theirs) is not None:
            summary[ours] = run[theirs]
    for key, value in run.items():
        match = STAT.match(key)
        if match and value is not None:
            stat, metric = match.groups()
            metric = "e2e_latency" if metric == "e2el" else metric
            summary[f"{'median' if stat == 'p50' else stat}_{metric}_ms"] = value
    summary.setdefault("failed", sum(1 for e in run.get("errors") or () if e))
    concurrency = run.get("max_concurrency")
    notes = []
    records = _records(run)
    if records:
        mine = run_summary(records)
        for key in ("median_ttft_ms", "median_tpot_ms", "median_itl_ms", "median_e2e_latency_ms"):
            theirs = summary.get(key)
            if theirs and mine.get(key) is not None and abs(mine[key] - theirs) > 0.02 * theirs + 0.01:
                notes.append(f"{key}: file says {theirs:.3f}, its per-request arrays give {mine[key]:.3f}")
        # A statistic the tool did not summarise is taken from its arrays: `vllm bench serve`
        # summarises only --percentile-metrics (default ttft,tpot,itl, at p99), so its file has no
        # e2e latency and no p90 unless asked, and a floor on them would read "not measured".
        filled = sorted(k for k in mine if LATENCY.match(k) and k not in summary and mine[k] is not None)
        if filled:
            summary.update({k: mine[k] for k in filled})
            notes.append(f"from the per-request arrays (not in the file's summary): {', '.join(filled)}")
    else:
        notes.append("no per-request arrays in the file: summaries taken as reported")
    if concurrency is None:
        notes.append("the run has no max_concurrency (rate-driven): floors at any concurrency are compared")
    accept = run.get("accept_length", run.get("spec_decode_acceptance_length"))
    workload = {
        k: run[k]
        for k in (
            "dataset_name",
            "num_prompts",
            "random_input_len",
            "random_output_len",
            "random_range_ratio",
            "request_rate",
            "backend",
            "model_id",
        )
        if k in run
    }
    return Imported(tool, summary, concurrency, workload, accept, tuple(notes))


def normalise(imported: Imported, accelerators: int) -> dict:
    summary = dict(imported.summary)
    for key in ("request_throughput", "output_throughput", "total_token_throughput"):
        if key in summary:
            summary[f"{key}_per_accelerator"] = round(summary[key] / max(accelerators, 1), 4)
            if imported.concurrency:
                summary[f"{key}_per_user"] = round(summary[key] / imported.concurrency, 4)
    return summary


def evaluate(card: ModelCard, cell: Cell, imported: Imported, accelerators: int) -> list[CheckResult]:
    """The cell's floors at the run's concurrency, on the imported summary (one run, no spread)."""
    summary = normalise(imported, accelerators)
    out = []
    floors: list[Floor] = [f for f in floors_for(card, cell) if imported.concurrency in (None, f.concurrency)]
    for floor in floors:
        result = check_floor(floor, Measurement(floor.workload, floor.concurrency, (summary,)))
        details = {**result.details, "imported": {"tool": imported.tool, "workload": imported.workload}}
        out.append(
            CheckResult(
                result.name,
                result.kind,
                result.verdict,
                f"{result.message} [{imported.tool}]",
                result.measured,
                result.bound,
                details,
            )
        )
    return out


def _lengths(run: Mapping) -> tuple[float | None, float | None]:
    """The tokens in and out a run sent: its random lengths, else the mean of its per-request ones."""
    out = []
    for fixed, arrays in (("random_input_len", "input_lens"), ("random_output_len", "output_lens")):
        values = [v for v in run.get(arrays) or () if v]
        out.append(run.get(fixed) or (sum(values) / len(values) if values else None))
    return out[0], out[1]


def _differs(got: float | None, want: float | None) -> bool:
    return got is not None and want is not None and abs(got - want) > 0.1 * want + 1


def mismatches(card: ModelCard, floors: list[Floor], run: Mapping, workloads: Path) -> list[str]:
    """Why a run cannot be held to these floors: another model than the card's (every word of its
    name missing from the file's `model_id`), or input/output lengths not the floor's workload's
    (random workloads, within 10%). Empty where nothing says so."""
    from dayzero.spec.workloads import resolve  # reads suites: the edge, not at import

    out = []
    model = str(run.get("model_id") or run.get("model") or "")
    words = [w for w in re.split(r"[^a-z0-9]+", card.model.lower()) if w]
    if model and not all(w in model.lower() for w in words):
        out.append(f"the run served {model!r}, not {card.model!r}")
    isl, osl = _lengths(run)
    for floor in floors:
        spec = resolve(card, floor.workload, workloads, floor.max_tokens).spec
        if spec.get("kind") != "random":
            continue
        want = (spec.get("isl"), spec.get("osl"))
        if _differs(isl, want[0]) or _differs(osl, want[1]):
            out.append(
                f"the run sent {isl:g} tokens in / {osl:g} out, floor {floor.name} is on workload "
                f"{floor.workload!r}: {want[0]} in / {want[1]} out"
            )
    return out
