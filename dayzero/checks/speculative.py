"""Speculative acceptance length per workload, from the server's own counters diffed around a run.

Acceptance length is a health canary: a numerics bug in the target or the draft drops it sharply
while throughput may still pass a loose floor. Counters are cumulative since the server started,
so each workload runs alone between two reads of /metrics (the phase's snapshots, kept next to
its records) and only the difference is reported: accept length = 1 + accepted tokens / drafts
(verification steps). Each engine reads its own counters into these (`Engine.spec_counters`:
llama.cpp and vLLM publish draft and accepted-token counters; SGLang verification calls and
generated tokens, whose ratio is its own accept length). Counters that cannot be read fail the
check: never a pass on no data.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from dayzero import engines
from dayzero.checks import FAILED, PASSED, CheckResult
from dayzero.checks.intervals import proportion_interval
from dayzero.engines.prometheus import SpecCounters, readable


def counters(engine: str, text: str) -> SpecCounters | None:
    """One snapshot's speculative counters as that engine publishes them (`Engine.spec_counters`)."""
    found = engines.find(engine)
    return found.spec_counters(text) if found is not None and isinstance(text, str) else None


def from_snapshots(kind: str, snapshots) -> SpecCounters | None:
    """The counters of one /metrics snapshot of every target added up (every engine of a
    multi-role cell); None when there is none or one could not be read."""
    out = SpecCounters()
    snapshots = list(snapshots or ())
    for snap in snapshots:
        c = counters(kind, snap["body"]) if readable(snap) else None
        if c is None:
            return None
        out = out + c
    return out if snapshots else None


def from_timings(records: Sequence[Mapping]) -> dict:
    """llama.cpp's per-request `timings` (draft_n, draft_n_accepted): a cross-check of the counters."""
    drafted = sum((r.get("timings") or {}).get("draft_n", 0) for r in records)
    accepted = sum((r.get("timings") or {}).get("draft_n_accepted", 0) for r in records)
    return {
        "draft_tokens": drafted,
        "accepted": accepted,
        "acceptance_rate": round(accepted / drafted, 4) if drafted else None,
    }


def check_name(workload: str) -> str:
    return f"speculative:accept_length@{workload}"


def check_acceptance(
    workload: str,
    tag: str,
    kind: str,
    before: SpecCounters | None,
    after: SpecCounters | None,
    records: Sequence[Mapping],
    bound: float | None,
) -> CheckResult:
    """One workload's acceptance length from the counters' difference; fails below the card's
    bound, with request errors, or when the counters could not be read (never a pass on no data)."""
    name = check_name(workload)
    errors = sum(1 for r in records if r.get("error"))
    details: dict = {"workload": workload, "tag": tag, "source": kind, "timings": from_timings(records)}
    length = None
    if isinstance(before, SpecCounters) and isinstance(after, SpecCounters):
        delta = after - before
        length = delta.accept_length
        details.update(
            {
                "drafts": delta.drafts,
                "draft_tokens": delta.draft_tokens,
                "accepted": delta.accepted,
                "acceptance_rate": delta.acceptance_rate,
                # draft tokens accepted as a proportion (Wilson; tokens of one draft are not
                # independent, so the interval is a narrow reading); no per-request sample exists
                # for the accept length: the counters give one total per phase
                "intervals": {
                    "acceptance_rate": proportion_interval(
                        int(delta.accepted), int(delta.draft_tokens)
                    ).to_json()
                },
            }
        )
    problems = []
    if errors:
        problems.append(f"{errors} request error(s)")
    if not isinstance(after, SpecCounters) or not isinstance(before, SpecCounters):
        problems.append("the server's speculative counters could not be read before and after")
    if bound is not None and (length or 1.0) < bound:
        problems.append(f"accept length {length or 1.0:.3f} below {bound:g}")
    if length is None and isinstance(after, SpecCounters) and isinstance(before, SpecCounters):
        shown = "no drafts made (accept length 1.0)"
    elif length is None:
        shown = "accept length unknown"
    else:
        shown = f"accept length {length:.3f}"
        if details.get("acceptance_rate") is not None:
            shown += (
                f" ({details['accepted']:g}/{details['draft_tokens']:g} draft tokens accepted"
                f" in {details['drafts']:g} drafts)"
            )
    return CheckResult(
        name,
        "health",
        FAILED if problems else PASSED,
        f"{tag}: {shown}" + (f" -- {'; '.join(problems)}" if problems else ""),
        measured=length if length is not None else (1.0 if isinstance(after, SpecCounters) else None),
        bound=bound,
        details=details,
    )


def _rate_interval(accepted: float, proposed: float) -> dict:
    return proportion_interval(int(accepted), int(proposed)).to_json()
