"""Throughput from raw per-request records, and floors from the model card.

Definitions (stated in every summary): output throughput = output tokens of completed requests
/ (last response end - first request send); TTFT = send -> first streamed content; TPOT =
(end - first) / (output tokens - 1).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from dayzero.checks import FAILED, PASSED, CheckResult
from dayzero.matrix import Cell, ModelCard, matches

DEFINITIONS = {
    "output_throughput": "output tokens of completed requests / (last end - first send), tok/s",
    "output_throughput_per_accelerator": "output_throughput / accelerators serving the cell",
    "ttft_ms": "request sent -> first streamed content, ms",
    "tpot_ms": "(end - first content) / (output tokens - 1), ms",
}


@dataclass(frozen=True)
class Floor:
    metric: str
    min: float
    concurrency: int
    max_tokens: int = 64
    num_prompts: int = 16

    @property
    def name(self) -> str:
        return f"floor:{self.metric}@c{self.concurrency}"


def floors_for(card: ModelCard, cell: Cell) -> list[Floor]:
    out = []
    for rule in card.data.get("floors", []):
        if not matches(rule.get("when", {}), cell):
            continue
        conc = rule["concurrency"]
        out.append(
            Floor(
                metric=rule["metric"],
                min=float(rule["min"]),
                concurrency=card.mode(cell.mode)["concurrency"] if conc == "mode" else int(conc),
                max_tokens=rule.get("max_tokens", 64),
                num_prompts=rule.get("num_prompts", 16),
            )
        )
    return out


def output_tokens(record: dict) -> int:
    usage = record.get("usage") or {}
    return int(usage.get("completion_tokens") or len(record.get("chunks") or ()))


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 3) if values else None


def summarize(records: list[dict], accelerators: int = 1) -> dict:
    done = [r for r in records if not r.get("error") and r.get("end")]
    failed = len(records) - len(done)
    if not done:
        return {"completed": 0, "failed": failed, "output_throughput": 0.0, "definitions": DEFINITIONS}
    start = min(r["send"] for r in records if r.get("send"))
    end = max(r["end"] for r in done)
    tokens = sum(output_tokens(r) for r in done)
    duration = max(end - start, 1e-9)
    ttft = [(r["first"] - r["send"]) * 1000 for r in done if r.get("first")]
    tpot = [
        (r["end"] - r["first"]) * 1000 / (output_tokens(r) - 1)
        for r in done
        if r.get("first") and output_tokens(r) > 1
    ]
    throughput = tokens / duration
    return {
        "completed": len(done),
        "failed": failed,
        "duration_s": round(duration, 3),
        "output_tokens": tokens,
        "output_throughput": round(throughput, 2),
        "output_throughput_per_accelerator": round(throughput / max(accelerators, 1), 2),
        "median_ttft_ms": _median(ttft),
        "median_tpot_ms": _median(tpot),
        "definitions": DEFINITIONS,
    }


def check_floor(floor: Floor, summary: dict) -> CheckResult:
    measured = summary.get(floor.metric, 0.0)
    margin = (measured - floor.min) / floor.min * 100
    problems = []
    if summary.get("failed"):
        problems.append(f"{summary['failed']} request(s) failed")
    if measured < floor.min:
        problems.append(f"{floor.metric} {measured:.1f} below floor {floor.min:g} ({margin:+.1f}%)")
    message = "; ".join(problems) or f"{floor.metric} {measured:.1f} >= floor {floor.min:g} ({margin:+.1f}%)"
    return CheckResult(
        floor.name,
        "performance",
        FAILED if problems else PASSED,
        message,
        measured=measured,
        bound=floor.min,
        details={"summary": summary, "concurrency": floor.concurrency},
    )
