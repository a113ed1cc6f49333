"""Time: a run happened after the harness it ran was committed and before the bundle was checked.

Without these a bundle could be dated ahead (evidence from 2030 never goes Stale, and sorts as
the newest run of its hardware) or claim a run by a harness that did not exist yet. The commit
date comes from the maintainers' own checkout, the check time from the checker's clock.
"""

from __future__ import annotations

import datetime as dt

from dayzero.clock import parse_iso
from dayzero.submission.bundle import SUBMISSION, Reference, Subject
from dayzero.submission.findings import Finding, short

FORMAT = "an RFC 3339 time with its offset, as dayzero writes it (2026-12-04T11:29:43+00:00)"
CLOCK_SLACK_S = 300.0  # clocks of a vendor's lab and of the checker may differ a little


def when(text) -> float | None:
    """Epoch seconds of a time in the one format (`dayzero.clock`), None when it is not one."""
    moment = parse_iso(text)
    if moment is None:
        return None
    try:
        return moment.timestamp()
    except (OverflowError, ValueError):
        return None


def iso(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.UTC).isoformat(timespec="seconds")


def _dated(s: Subject) -> list[tuple[str, str, object]]:
    """(file, field, time text) of every date a bundle states: runs, leases, the bundle."""
    out = []
    for name, doc in sorted(s.evidence.items()):
        out += [(name, f"run.{key}", doc["run"][key]) for key in ("started", "finished")]
        for i, host in enumerate(doc["hosts"]):
            lease = host.get("lease") if isinstance(host, dict) else None
            for key in ("acquired", "released"):
                if isinstance(lease, dict) and key in lease:
                    out.append((name, f"hosts[{i}].lease.{key}", lease[key]))
    if s.submission is not None:
        out.append((SUBMISSION, "created", s.submission["created"]))
    return out


def check_not_in_future(s: Subject, ref: Reference) -> list[Finding]:
    now = ref.now()
    out = []
    for name, field, text in _dated(s):
        moment = when(text)
        if moment is None:
            out.append(Finding(name, "timeline.date", f"{field} {short(text)}", FORMAT))
        elif moment > now + CLOCK_SLACK_S:
            out.append(
                Finding(
                    name, "timeline.future", f"{field} {short(text)}", f"at most the check time {iso(now)}"
                )
            )
    return out


def check_after_harness_commit(s: Subject, ref: Reference) -> list[Finding]:
    """A run cannot predate the commit of the harness it says it ran (its clean-tree proof)."""
    commit = ((s.submission or {}).get("harness") or {}).get("commit")
    if not commit or ref.commit_time is None or (committed := ref.commit_time(commit)) is None:
        return []
    out = []
    for name, field, text in _dated(s):
        moment = when(text)
        if moment is not None and moment < committed - CLOCK_SLACK_S:
            out.append(
                Finding(
                    name,
                    "timeline.before-commit",
                    f"{field} {short(text)}",
                    f"after harness commit {commit[:12]} of {iso(committed)}",
                )
            )
    return out


CHECKS = (check_not_in_future, check_after_harness_commit)
