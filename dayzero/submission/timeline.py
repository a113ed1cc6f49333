"""Time: a run happened after the harness it ran was committed and before the bundle was checked.

Without these a bundle could be dated ahead (evidence from 2030 never goes Stale, and sorts as
the newest run of its hardware) or claim a run by a harness that did not exist yet. The commit
date comes from the maintainers' own checkout, the check time from the checker's clock.
"""

from __future__ import annotations

import datetime as dt

from dayzero.submission.bundle import SUBMISSION, Reference, Subject
from dayzero.submission.findings import Finding, short

CLOCK_SLACK_S = 300.0  # clocks of a vendor's lab and of the checker may differ a little


def when(text) -> float | None:
    """Epoch seconds of an ISO 8601 time (naive means UTC), None when it is not one."""
    try:
        moment = dt.datetime.fromisoformat(text)
    except (TypeError, ValueError):
        return None
    moment = moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)
    try:
        return moment.timestamp()
    except (OverflowError, ValueError):
        return None


def iso(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.UTC).isoformat(timespec="seconds")


def _dated(s: Subject) -> list[tuple[str, str, object]]:
    """(file, field, time text) of every date a bundle states."""
    out = [
        (name, f"run.{key}", doc["run"][key])
        for name, doc in sorted(s.evidence.items())
        for key in ("started", "finished")
    ]
    if s.submission is not None:
        out.append((SUBMISSION, "created", s.submission["created"]))
    return out


def check_not_in_future(s: Subject, ref: Reference) -> list[Finding]:
    now = ref.now()
    out = []
    for name, field, text in _dated(s):
        moment = when(text)
        if moment is None:
            out.append(Finding(name, "timeline.date", f"{field} {short(text)}", "an ISO 8601 time"))
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
