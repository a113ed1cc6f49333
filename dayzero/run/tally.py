"""What became of a run's selected cells, and whether the run tested anything at all.

A nightly job that forgets its inventory (or names one without the hardware it selects) skips
every cell; pytest calls that a success. A scheduler must see it: a run in which no selected
cell ran is *empty*, and the plugin ends it non-zero with `why_empty`'s one line unless the
user asked for it (`--allow-empty`). A dry run is tallied from its plan: a cell it would run
counts as run, so a dry run is empty exactly when the real run would be.

Pure: outcomes in, counts and lines out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

PASSED, FAILED, ERROR = "passed", "failed", "error"  # cells that ran (error: broken in setup or teardown)
INTERRUPTED = "interrupted"  # set up, its call never reported: the run ended (Ctrl-C) mid-cell
SKIPPED, UNSUPPORTED = "skipped", "unsupported"
RAN = (PASSED, FAILED, ERROR, INTERRUPTED)
WOULD_RUN = "would run"  # a dry run's cell with host(s) to run on


@dataclass(frozen=True)
class Tally:
    """Cells run (by pytest outcome), skipped (by reason) and unsupported, of one run."""

    inventory: str
    matrix: str
    ran: Mapping[str, int] = field(default_factory=dict)
    skipped: Mapping[str, int] = field(default_factory=dict)
    unsupported: int = 0
    dry_run: bool = False

    @property
    def cells_ran(self) -> int:
        return sum(self.ran.values())

    @property
    def selected(self) -> int:
        return self.cells_ran + sum(self.skipped.values()) + self.unsupported

    @property
    def empty(self) -> bool:
        return self.cells_ran == 0

    def why_empty(self) -> str:
        """One line: why no selected cell ran (or would run, in a dry run)."""
        verb = "would run" if self.dry_run else "ran"
        if not self.selected:
            return f"dayzero: no cell {verb}: no cell of matrix {self.matrix} matches the selection"
        parts = [f"{n} skipped: {reason}" for reason, n in sorted(self.skipped.items(), key=_most_first)]
        if self.unsupported:
            parts.append(f"{self.unsupported} unsupported")
        return f"dayzero: no cell {verb} of {self.selected} selected: " + "; ".join(parts)

    def summary(self) -> list[str]:
        """The terminal summary: counts, each skip reason, the inventory and matrix used."""
        verb = "would run" if self.dry_run else "ran"
        head = f"{self.cells_ran} of {self.selected} selected cells {verb}"
        if self.ran and not self.dry_run:
            head += (
                " (" + ", ".join(f"{n} {what}" for what, n in sorted(self.ran.items(), key=_most_first)) + ")"
            )
        lines = [
            head,
            *(f"{n} skipped: {reason}" for reason, n in sorted(self.skipped.items(), key=_most_first)),
        ]
        lines.append(f"{self.unsupported} unsupported")
        lines.append(f"inventory {self.inventory}; matrix {self.matrix}")
        return lines


def _most_first(item: tuple[str, int]) -> tuple[int, str]:
    return (-item[1], item[0])


def tally(outcomes: Iterable[tuple[str, str]], inventory: str, matrix: str, dry_run: bool = False) -> Tally:
    """Count one (outcome, skip reason) per cell: an outcome of `RAN`, `WOULD_RUN`, `SKIPPED`
    (with its reason) or `UNSUPPORTED`."""
    ran: Counter[str] = Counter()
    skipped: Counter[str] = Counter()
    unsupported = 0
    for outcome, reason in outcomes:
        if outcome == UNSUPPORTED:
            unsupported += 1
        elif outcome == SKIPPED:
            skipped[reason or "no reason given"] += 1
        else:
            ran[outcome] += 1
    return Tally(inventory, matrix, dict(ran), dict(skipped), unsupported, dry_run)


def cell_outcome(previous: tuple[str, str] | None, when: str, outcome: str, reason: str) -> tuple[str, str]:
    """A cell's outcome after one more of its test reports (setup, call, teardown): a skip or a
    failure is kept over the passes around it; an error in setup or teardown is an `ERROR`."""
    if outcome == "failed" and when != "call":
        return (ERROR, "")
    if previous is not None and previous[0] not in (PASSED, INTERRUPTED):
        return previous
    if outcome == "skipped":
        return (SKIPPED, reason)
    if when == "setup":
        return (INTERRUPTED, "")  # until its call reports, the cell has not finished
    if when == "teardown" and previous is not None and previous[0] == INTERRUPTED:
        return previous
    return (outcome, "")
