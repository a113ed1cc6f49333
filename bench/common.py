"""What every bench records next to its figures: when, on what machine, under what load."""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
from pathlib import Path


def load_average() -> list[float]:
    """`uptime`'s 1/5/15-minute load averages: a figure taken under load says so."""
    return [round(x, 2) for x in os.getloadavg()]


def machine() -> dict:
    return {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": f"{os.cpu_count()} cores, python {sys.version.split()[0]}",
    }


def write_result(path: Path, result: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2))
