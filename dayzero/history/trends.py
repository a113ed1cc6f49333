"""A cell's series from the store, their change points attributed, and what they mean tonight.

A change point is a **regression** when the new level is worse (lower throughput, higher
latency). For the night just ingested, each series' regressions are:
- **new**: found tonight and not in the series without tonight;
- **persists**: found before, and the series has not come back since;
- **recovered**: a later change point brought the series back at least half way, tonight
  (it is said once: the night the recovery is first found).
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

from dayzero.history import changes
from dayzero.history.points import UNNAMED_LAB, lab_of
from dayzero.history.store import SeriesPoint, Store


@dataclass(frozen=True)
class SeriesChange:
    cell: str
    series: str
    lab: str  # the lab whose series it is (store.ACROSS_LABS: every lab's runs in one series)
    run_id: str  # the first run at the new level
    finished: str
    before: float
    after: float
    change_pct: float
    t: float
    regression: bool
    changed: dict[str, tuple[str, str]]  # fact -> (before, after): what changed with it

    def describe(self) -> str:
        what = "; ".join(
            f"{k} {a or '-'} -> {b or '-'}" for k, a, b in ((k, *v) for k, v in self.changed.items())
        )
        return (
            f"{self.series} {'regressed' if self.regression else 'improved'} {self.change_pct:+.1f}% "
            f"({self.before:.4g} -> {self.after:.4g}, t {self.t:g}) "
            f"from {self.finished[:10]} (run {self.run_id}); "
            + (f"changed with it: {what}" if what else "nothing recorded changed with it")
        )

    def to_json(self) -> dict:
        return {
            **asdict(self),
            "changed": {k: list(v) for k, v in self.changed.items()},
            "message": self.describe(),
        }


def found(
    cell: str, series: str, higher: bool, points: list[SeriesPoint], lab: str = UNNAMED_LAB
) -> list[SeriesChange]:
    """The change points of one series (of one lab), attributed."""
    facts = [p.facts for p in points]
    changed = [i for i in range(1, len(facts)) if facts[i] != facts[i - 1]]
    out = []
    for cp in changes.detect([p.value for p in points], changed=changed):
        at = points[cp.index]
        out.append(
            SeriesChange(
                cell,
                series,
                lab,
                at.run_id,
                at.finished,
                round(cp.before, 6),
                round(cp.after, 6),
                round(cp.change_pct, 2),
                cp.t,
                cp.worse(higher),
                changes.attribute(facts, cp.index),
            )
        )
    return out


def cell_changes(
    store: Store, cell: str, since: str = "", vendor: bool = False, lab: str | None = None
) -> list[SeriesChange]:
    """Every change point of a cell's series whose night is on or after `since` (ISO date): each
    lab's series apart (`lab` None), one lab's, or every lab's runs as one (ACROSS_LABS)."""
    out = []
    for (run_lab, series), (higher, points) in store.cell_series(cell, vendor=vendor, lab=lab).items():
        out += [c for c in found(cell, series, higher, points, run_lab) if c.finished >= since]
    return out


def every_change(
    target, cells: Sequence[str], since: str = "", lab: str | None = None, jobs: int | None = None
) -> list[SeriesChange]:
    """`cell_changes` of many cells, shared among `jobs` processes (default: the cores), each
    with its own connection to the store at `target`: the search is ~3 ms a 365-night series,
    and a lab has thousands. In the cells' order."""
    jobs = min(jobs or os.cpu_count() or 1, max(len(cells) // 8, 1))
    parts = [(str(target), list(cells[i::jobs]), since, lab) for i in range(jobs)]
    if jobs < 2:
        return _changes_of(parts[0])
    changes.detect([1.0] * 20)  # numpy and ruptures imported once, before the workers fork
    with multiprocessing.get_context("fork").Pool(jobs) as pool:
        found = [c for part in pool.map(_changes_of, parts) for c in part]
    order = {cell: i for i, cell in enumerate(cells)}
    return sorted(found, key=lambda c: order[c.cell])  # stable: each cell's own order kept


def _changes_of(part: tuple[str, list[str], str, str | None]) -> list[SeriesChange]:
    from dayzero.history.store import open_store

    target, cells, since, lab = part
    with open_store(target) as store:
        return [c for cell in cells for c in cell_changes(store, cell, since, lab=lab)]


def tonight(store: Store, cell: str, lab: str | None = None) -> dict[str, list[SeriesChange]]:
    """The cell's regressions in one lab's series (None: the lab of its newest run) as of its
    newest run there: new, persisting, recovered (see the module)."""
    out: dict[str, list[SeriesChange]] = {"new": [], "persist": [], "recovered": []}
    lab = lab or store.latest_lab(cell)
    if lab is None:
        return out
    for (_, series), (higher, points) in store.cell_series(cell, lab=lab).items():
        now, before = found(cell, series, higher, points, lab), found(cell, series, higher, points[:-1], lab)
        yesterday = {_night(c.run_id, points): back for c, back in _regressions(before)}
        for change, back in _regressions(now):
            night = _night(change.run_id, points)
            was = [yesterday[n] for n in (night, night - 1, night + 1) if n in yesterday]
            if not back:
                out["persist" if was else "new"].append(change)
            elif not was or not was[0]:  # recovered since yesterday
                out["recovered"].append(change)
    return out


def _night(run_id: str, points: list[SeriesPoint]) -> int:
    return next(i for i, p in enumerate(points) if p.run_id == run_id)


def _regressions(found: list[SeriesChange]) -> list[tuple[SeriesChange, bool]]:
    """Each regression of a series and whether a later change point recovered it."""
    return [(c, any(recovers(c, r) for r in found[i + 1 :])) for i, c in enumerate(found) if c.regression]


def recovers(regression: SeriesChange, later: SeriesChange) -> bool:
    """A later improvement that takes back at least half of the regression's loss."""
    lost = regression.before - regression.after
    return not later.regression and abs(later.after - regression.after) >= abs(lost) / 2


def night(target, night_dir, cells) -> dict:
    """Ingest one night into the store and word its cells' regressions, each in its lab's series
    (`cells`: cell -> its evidence document tonight, or cell ids: the lab of each cell's newest
    run); what could not be done (no 'history' extra, a store that does not answer, a night with
    no evidence) is said in the result, never raised: the previous-night comparison still stands."""
    from dayzero.errors import DayzeroError
    from dayzero.history.store import open_store

    labs = {cell: lab_of(doc) for cell, doc in cells.items()} if isinstance(cells, Mapping) else {}
    try:
        with open_store(target) as store:
            store.ingest_folder(night_dir)
            words: dict[str, list] = {"new": [], "persist": [], "recovered": []}
            for cell in sorted(cells):
                for word, found in tonight(store, cell, labs.get(cell)).items():
                    words[word] += [c.to_json() for c in found]
            return {"store": store.where, **words}
    except DayzeroError as exc:
        return {"store": str(target).split("@")[-1], "not_available": str(exc)}
