"""Timestamps as evidence, goldens and verdicts write them: UTC, RFC 3339 (ISO 8601's extended
format with its offset, `2026-12-04T11:29:43+00:00`). One format, read back as the time it means:
times are compared and ordered parsed, never as text (as text, a basic-format date sorts after
every extended one, and another offset sorts by its wall-clock digits)."""

from __future__ import annotations

import datetime as dt
import re

# The one format a bundle may state times in; JSON Schemas repeat it (evidence, submission).
RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?(Z|[+-]\d{2}:\d{2})$(?!\n)")
EARLIEST = dt.datetime.min.replace(tzinfo=dt.UTC)


def now_iso(timespec: str = "seconds") -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec=timespec)


def parse_iso(text) -> dt.datetime | None:
    """The time `text` states in the one format (an aware datetime), None for anything else."""
    if not isinstance(text, str) or not RFC3339.match(text):
        return None
    try:
        return dt.datetime.fromisoformat(text)
    except ValueError:  # e.g. month 13
        return None


def moment(text) -> dt.datetime:
    """An ordering key for a stated time: what it means; a text that is no time sorts first."""
    return parse_iso(text) or EARLIEST


def utc_day(text) -> str:
    """The UTC date of a stated time (`2026-12-04`), or its first ten characters if it is none."""
    parsed = parse_iso(text)
    return parsed.astimezone(dt.UTC).date().isoformat() if parsed else str(text)[:10]
