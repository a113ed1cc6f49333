"""Timestamps as evidence, goldens and verdicts write them: UTC, ISO 8601."""

from __future__ import annotations

import datetime as dt


def now_iso(timespec: str = "seconds") -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec=timespec)
