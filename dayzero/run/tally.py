"""What became of a run's selected cells, whether the run tested anything at all, and its exit status.

A nightly job that forgets its inventory (or names one without the hardware it selects) skips
every cell; pytest calls that a success. A scheduler must see it: a run in which no selected
cell ran is *empty*, and the plugin ends it non-zero with `why_empty`'s one line unless the
user asked for it (`--allow-empty`). A dry run is tallied from its plan: a cell it would run
counts as run, so a dry run is empty exactly when the real run would be.

A cell the lab broke (`BROKEN`: a host unreachable, an engine missing) is not a product failure:
the summary lists lab faults apart, grouped by cause, and a run whose only faults are the lab's
exits `exitcodes.LAB_FAULT` (`exit_status`).

Pure: outcomes in, counts, lines and a status out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from dayzero import exitcodes

PASSED, FAILED, ERROR = "passed", "failed", "error"  # cells that ran (error: broken in setup or teardown)
BROKEN = "broken"  # a lab fault (InfrastructureError): its reason is the fault's one line
INTERRUPTED = "interrupted"  # set up, its call never reported: the run ended (Ctrl-C) mid-cell
SKIPPED, UNSUPPORTED = "skipped", "unsupported"
RAN = (PASSED, FAILED, ERROR, BROKEN, INTERRUPTED)
LAB_FAULT_LINE = "broken: lab fault: "
INCONCLUSIVE_LINE = "inconclusive: "  # a cell whose only non-passed checks are inconclusive floors
CELLS_NAMED = 5  # cells named under each lab fault; the rest are counted
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
    lab_faults: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (why, the cells it broke), most first

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
        return lines + self.lab_fault_lines()

    def lab_fault_lines(self) -> list[str]:
        """Each lab fault once, with the cells it broke: a dead host breaks every cell of its
        hardware with the same line."""
        lines = []
        for why, cells in self.lab_faults:
            named = [c for c in cells if c]
            more = f" and {len(named) - CELLS_NAMED} more" if len(named) > CELLS_NAMED else ""
            names = f": {', '.join(named[:CELLS_NAMED])}{more}" if named else ""
            lines.append(LAB_FAULT_LINE + why)
            lines.append(f"  {len(cells)} cell(s){names}")
        return lines


def _most_first(item: tuple[str, int]) -> tuple[int, str]:
    return (-item[1], item[0])


def tally(
    outcomes: Iterable[tuple[str, str]],
    inventory: str,
    matrix: str,
    dry_run: bool = False,
    cells: Iterable[str] = (),
) -> Tally:
    """Count one (outcome, reason) per cell: an outcome of `RAN` (`BROKEN` with its lab fault),
    `WOULD_RUN`, `SKIPPED` (with its reason) or `UNSUPPORTED`. `cells`, where given, are the
    outcomes' cell ids, in the same order: the lab faults name them."""
    outcomes = list(outcomes)
    ids = list(cells) or [""] * len(outcomes)
    broken: dict[str, list[str]] = {}
    for (outcome, why), cell in zip(outcomes, ids, strict=True):
        if outcome == BROKEN:
            broken.setdefault(why or "no reason given", []).append(cell)
    faults = tuple(
        (why, tuple(sorted(cells_of)))
        for why, cells_of in sorted(broken.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    )
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
    return Tally(inventory, matrix, dict(ran), dict(skipped), unsupported, dry_run, faults)


def exit_status(status: int, product_failures: int, lab_faults: int, inconclusive: int = 0) -> int:
    """The run's exit status: pytest's `status`, except that a run whose failed reports are all
    inconclusive floors or lab faults exits `exitcodes.INCONCLUSIVE` (at least one inconclusive)
    or `exitcodes.LAB_FAULT`; a product failure anywhere keeps pytest's TESTS_FAILED."""
    if status == exitcodes.TESTS_FAILED and not product_failures and inconclusive:
        return exitcodes.INCONCLUSIVE
    if status == exitcodes.TESTS_FAILED and lab_faults and not product_failures:
        return exitcodes.LAB_FAULT
    return status


def cell_outcome(
    previous: tuple[str, str] | None, when: str, outcome: str, reason: str, lab_fault: str = ""
) -> tuple[str, str]:
    """A cell's outcome after one more of its test reports (setup, call, teardown): a skip or a
    failure is kept over the passes around it; an error in setup or teardown is an `ERROR`; a
    report that failed by a lab fault (`lab_fault`: its line) is `BROKEN`, unless the cell
    already failed or erred otherwise."""
    if outcome == "failed" and lab_fault:
        return previous if previous is not None and previous[0] in (FAILED, ERROR) else (BROKEN, lab_fault)
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
