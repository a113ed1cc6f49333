"""Keep a single-file Allure report within what Allure 3 and a browser can handle.

The single-file report inlines every attachment (base64, a third larger). Per cell of the
embedded default a run attaches about 175 KiB: raw records 75, the full server log 46, the
evidence 29, the metric summary 16, the rest (charts, golden diff, facts, log tail) 8. A 1k-cell
run made a 250 MiB report; 10k cells would be 2.4 GB, past what Node.js holds in one string.
Every one of the big four is a file in the reports folder (the evidence is linked from each
cell's entry and lists the records and logs; the summary is computed from the evidence), so
above a budget the report is built from a copy of the results in which the biggest kinds are
replaced by a note saying where they are, in that order, until it fits; charts, the golden
diff, facts and the log tail stay inline. A run under the budget is reported exactly as written.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

BUDGET_BYTES = 128 * 2**20  # attachments inlined at most: a report of about 175 MiB
# Attachment names (from report.allure_cell), biggest kinds first: dropped in this order.
BULKY = ("raw records: ", "server log (full): ", "evidence", "metric summary")


@dataclass(frozen=True)
class Trimmed:
    """What a budgeted copy left out: how many attachments of each kind, and their bytes."""

    results: Path  # the folder to build from (the original when nothing was left out)
    dropped: dict[str, int]
    dropped_bytes: int
    total_bytes: int

    def describe(self) -> str:
        kinds = ", ".join(f"{n} {kind.rstrip(': ')}" for kind, n in self.dropped.items() if n)
        return (
            f"{kinds} attachments ({self.dropped_bytes / 2**20:.0f} of {self.total_bytes / 2**20:.0f} MiB) "
            "left out of the single-file report: they stay in the reports folder, listed in each "
            "cell's evidence"
        )


def _attachments(results: Path) -> tuple[dict[str, list[str]], dict[str, int]]:
    """Attachment file names per bulky kind, and every attachment's size."""
    by_kind: dict[str, list[str]] = {kind: [] for kind in BULKY}
    sizes = {p.name: p.stat().st_size for p in results.iterdir() if "-attachment" in p.name and p.is_file()}
    for path in results.glob("*-result.json"):
        try:
            doc = json.loads(path.read_text())
        except ValueError:
            continue
        stack = [doc]
        while stack:  # attachments of the test and of its (nested) steps
            node = stack.pop()
            stack.extend(node.get("steps") or ())
            for att in node.get("attachments") or ():
                kind = next((k for k in BULKY if str(att.get("name", "")).startswith(k)), None)
                if kind and att.get("source") in sizes:
                    by_kind[kind].append(att["source"])
    return by_kind, sizes


def _note(kind: str, source: str) -> str:
    what = kind.rstrip(": ")
    text = (
        f"{what} left out of this single-file report to keep it within what Allure and a browser "
        "can load; the file stays in the run's reports folder, listed in this cell's evidence"
    )
    return json.dumps({"omitted": text}) if source.endswith(".json") else text + "\n"


def within_budget(results: Path, staging: Path, budget: int = BUDGET_BYTES) -> Trimmed:
    """`results` itself when its attachments fit the budget; else a copy in `staging` (hard links
    where the file is kept) with the bulkiest kinds replaced by a note until they fit."""
    results = Path(results)
    by_kind, sizes = _attachments(results)
    total = sum(sizes.values())
    dropped: dict[str, int] = {kind: 0 for kind in BULKY}
    if total <= budget:
        return Trimmed(results, dropped, 0, total)
    left_out: dict[str, str] = {}
    size = total
    for kind in BULKY:
        if size <= budget:
            break
        for source in by_kind[kind]:
            if source not in left_out:
                left_out[source] = kind
                size -= sizes[source]
                dropped[kind] += 1
    staging = Path(staging)
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    for path in results.iterdir():
        if not path.is_file():
            continue
        target = staging / path.name
        if path.name in left_out:
            target.write_text(_note(left_out[path.name], path.name))
            continue
        try:
            os.link(path, target)
        except OSError:  # another file system
            shutil.copy2(path, target)
    return Trimmed(staging, dropped, total - size, total)
