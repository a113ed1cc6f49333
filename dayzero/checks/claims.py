"""Claims against evidence: was a published number reproduced by this cell's run? (pure)

A claim (`dayzero.spec.card.Claim`) is held against the measurement of its own workload at its
concurrency in the evidence's performance checks (the median over repetitions):

- per accelerator: the throughput divided by the accelerators the cell really used, summed over
  its hosts as preflight saw them (the inventory's count where preflight saw none);
- per user: each stream's own decode rate (`median_interactivity`, 1000 / TPOT per request);
- per node: the throughput divided by the hosts the cell held.

Reproduced: measured >= value x (1 - tolerance). A claim whose prerequisites name something the
pinned engine has no flag for, or whose workload was not measured validly, is not measured, with
why. A claim never changes a cell's verdict: floors are the lab's bars, claims what was told.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass

from dayzero.spec.card import Claim

REPRODUCED, NOT_REPRODUCED, NOT_MEASURED = "reproduced", "not_reproduced", "not_measured"
WORDS = {REPRODUCED: "reproduced", NOT_REPRODUCED: "not reproduced", NOT_MEASURED: "not measured"}


@dataclass(frozen=True)
class ClaimResult:
    """One claim as one cell's evidence answers it."""

    claim: str
    status: str  # reproduced | not_reproduced | not_measured
    published: float
    unit: str
    workload: str
    concurrency: int | None
    source: str
    measured: float | None = None
    ratio: float | None = None  # measured / published
    reason: str = ""

    def to_json(self) -> dict:
        return asdict(self)


def accelerators(hosts: Sequence[Mapping]) -> int:
    """What the cell ran on: each host's accelerators its lease claimed by index (a share of the
    host), else as preflight counted them."""
    return sum(
        len((h.get("lease") or {}).get("devices") or ())
        or (h.get("facts") or {}).get("accelerators_seen")
        or h.get("accelerators")
        or 0
        for h in hosts
    )


def _per_run(claim: Claim, summary: Mapping, hosts: Sequence[Mapping]) -> float | None:
    if claim.unit == "per_user":
        return summary.get("median_interactivity")
    value = summary.get(claim.metric)
    if value is None:
        return None
    divisor = accelerators(hosts) if claim.unit == "per_accelerator" else len(hosts)
    return value / divisor if divisor else None


def _measurements(claim: Claim, checks: Iterable[Mapping]) -> list[Mapping]:
    """The performance checks that measured the claim's workload at its concurrency."""
    return [
        c
        for c in checks
        if c.get("kind") == "performance"
        and (c.get("details") or {}).get("workload") == claim.workload
        and (claim.concurrency is None or c["details"].get("concurrency") == claim.concurrency)
    ]


def evaluate(claim: Claim, doc: Mapping) -> ClaimResult:
    """One claim against one evidence document."""
    base = dict(
        claim=claim.id,
        published=claim.value,
        unit=claim.unit,
        workload=claim.workload,
        concurrency=claim.concurrency,
        source=claim.source,
    )
    if claim.needs:
        return ClaimResult(**base, status=NOT_MEASURED, reason="needs data: " + "; ".join(claim.needs))
    at = f" at c{claim.concurrency}" if claim.concurrency else ""
    found = _measurements(claim, doc.get("checks") or ())
    if not found:
        why = f"no measurement of workload {claim.workload}{at} in this run"
        if doc.get("verdict") not in (None, "passed", "failed"):
            why += f" (run {doc['verdict']})"
        return ClaimResult(**base, status=NOT_MEASURED, reason=why)
    values = []
    for check in found:
        for summary in check["details"].get("summaries") or ():
            if (v := _per_run(claim, summary, doc.get("hosts") or ())) is not None:
                values.append(v)
    if not values or any(c["measured"] is None for c in found):
        invalid = "; ".join(c["message"] for c in found if c["measured"] is None)
        return ClaimResult(
            **base, status=NOT_MEASURED, reason=f"{claim.workload}{at}: {invalid or 'no value'}"
        )
    measured = round(statistics.median(values), 3)
    ratio = round(measured / claim.value, 3)
    ok = measured >= claim.value * (1 - claim.tolerance)
    bound = f"{claim.value * (1 - claim.tolerance):g} ({claim.value:g} - {claim.tolerance:.0%})"
    reason = f"median {measured:g} over {len(values)} run(s) {'>=' if ok else '<'} {bound}"
    return ClaimResult(
        **base,
        status=REPRODUCED if ok else NOT_REPRODUCED,
        measured=measured,
        ratio=ratio,
        reason=reason,
    )


def evaluate_all(claims: Iterable[Claim], doc: Mapping) -> list[dict]:
    """What evidence keeps under `claims`: one entry per claim the cell answers to."""
    return [evaluate(claim, doc).to_json() for claim in claims]


def summary_line(entries: Iterable[Mapping]) -> str:
    """The claims as the acceptance detail says them: `id reproduced (1.02x)` ..."""
    parts = []
    for e in entries:
        ratio = f" ({e['ratio']:g}x)" if e.get("ratio") is not None else ""
        parts.append(f"{e['claim']} {WORDS.get(e['status'], e['status'])}{ratio}")
    return "claims: " + ", ".join(parts) if parts else ""
