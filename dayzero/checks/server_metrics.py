"""The server's own account of a phase: its Prometheus `/metrics` counters, read before and after.

A phase's snapshots (`records/<phase>.metrics.json`, named by `dayzero.run.records`) hold the raw
text of every target's `/metrics` just before the phase's requests and just after them; the
difference of the counters is what the server says the phase cost it. Which series an engine
publishes, and what they mean, its module says (`dayzero.engines.<engine>`, `Engine.totals`);
here they are added up over targets and subtracted over a phase.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from dayzero import engines
from dayzero.engines.prometheus import Totals, readable


def totals(engine: str, text: str) -> Totals | None:
    """One target's counters, or None when the text is not that engine's /metrics."""
    found = engines.find(engine)
    return found.totals(text) if found is not None and isinstance(text, str) else None


def summed(engine: str, snapshots: Iterable[Mapping]) -> Totals | None:
    """Every target's counters added up; None when a target's snapshot could not be read."""
    out = Totals()
    snapshots = list(snapshots or ())
    if not snapshots:
        return None
    for snap in snapshots:
        t = totals(engine, snap["body"]) if readable(snap) else None
        if t is None:
            return None
        out = out + t
    return out


def phase_totals(engine: str, doc: Mapping) -> Totals | None:
    """What the server counted between a phase's two snapshots; None if either is unreadable."""
    before, after = summed(engine, doc.get("before")), summed(engine, doc.get("after"))
    if before is None or after is None:
        return None
    return after - before
