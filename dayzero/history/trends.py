"""A cell's series from the store, their change points attributed, and tonight's alarms.

A change point is a **regression** when the new level is worse (lower throughput, higher
latency). `cell_changes` searches whole series (the `dayzero history changes` view); the nightly
judges each series night by night (`judged`, `history.alarms`): an alarm raised once per change
(**new**), said every night after (**persist**), until a recovery that names it (**recovered**);
each alarm's candidate causes ranked with the cells that moved with them (`history.causes`).
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace

from dayzero.history import alarms, causes, changes
from dayzero.history.points import UNNAMED_LAB, lab_of
from dayzero.history.store import ACROSS_LABS, SeriesPoint, Store


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


BROKEN = "broken"  # a run's verdict: the run, not the product, failed; its numbers are no level


def clean_series(
    store: Store, cell: str, vendor: bool = False, lab: str | None = None
) -> dict[tuple[str, str], tuple[bool, list[SeriesPoint]]]:
    """`store.cell_series` without the nights judged broken: those are gaps, never product
    numbers (a contended host's -30% is not a regression). Invalid or contended measurements
    never become points (`points.points`)."""
    # by lab and run id: run ids repeat across labs (one cron second), and one lab's broken night
    # is not another's
    broken = {
        (r["lab"], r["run_id"])
        for r in store.runs(cell, ACROSS_LABS if lab is None else lab)
        if r["verdict"] == BROKEN
    }
    found = store.cell_series(cell, vendor=vendor, lab=lab)
    if not broken:
        return found
    return {
        k: (higher, [p for p in pts if (p.lab, p.run_id) not in broken]) for k, (higher, pts) in found.items()
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
    for (run_lab, series), (higher, points) in clean_series(store, cell, vendor=vendor, lab=lab).items():
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


def recovers(regression: SeriesChange, later: SeriesChange) -> bool:
    """A later improvement that takes back at least half of the regression's loss."""
    lost = regression.before - regression.after
    return not later.regression and abs(later.after - regression.after) >= abs(lost) / 2


def state_key(cell: str, lab: str, series: str) -> str:
    return f"{cell}|{lab}|{series}"


def judged(
    store: Store, cells: Mapping[str, dict], states: Mapping[str, alarms.State]
) -> tuple[dict[str, list], dict[str, alarms.State]]:
    """Tonight's alarms of each cell's series (in the lab of its evidence tonight; `cells`: cell
    -> its document tonight), given the states the series carried from last night: the words
    ("new", "persist", "recovered": JSON) and the states to carry to the next night. A series
    whose run tonight gave no point (broken, invalid, contended) is a gap: it persists, untested.
    A recorded change many other cells made that moved almost none of them is a weak anchor
    (`causes.weak_anchor`); new alarms' candidates are ranked with the cells that moved with them."""
    words: dict[str, list] = {"new": [], "persist": [], "recovered": []}
    out: dict[str, alarms.State] = dict(states)
    series_of: dict[str, list] = {}  # metric -> (cell, higher, points) of every series tonight
    tonight: list[tuple] = []
    for cell in sorted(cells):
        lab, run_id = lab_of(cells[cell]), cells[cell]["run"]["id"]
        for (_, series), (higher, points) in clean_series(store, cell, lab=lab).items():
            series_of.setdefault(series.split("@")[0], []).append((cell, higher, points))
            tonight.append((cell, series, lab, higher, points, bool(points) and points[-1].run_id == run_id))
    new: list[alarms.Alarm] = []
    for cell, series, lab, higher, points, tested in tonight:
        key = state_key(cell, lab, series)
        verdict = _gated(
            series_of, cell, series, lab, higher, points, states.get(key, alarms.State()), tested
        )
        out[key] = verdict.state
        new += verdict.new
        words["persist"] += [a.to_json() for a in verdict.persist]
        words["recovered"] += [r.to_json() for r in verdict.recovered]
    for alarm in new:
        others = [s for s in series_of.get(alarm.series.split("@")[0], ()) if s[0] != alarm.cell]
        moved = {
            c.finished: _comovers(others, c.finished[:10], alarm.after - alarm.before)
            for c in alarm.candidates
        }
        ranked = alarms.with_comovers(alarm, moved)
        words["new"].append(_joined(ranked.to_json(), _same_change(ranked, states)))
        key = state_key(alarm.cell, alarm.lab, alarm.series)
        out[key] = replace(out[key], open=tuple(ranked if a == alarm else a for a in out[key].open))
    return words, out


def _same_change(alarm: alarms.Alarm, states: Mapping[str, alarms.State]) -> dict:
    """Where another series of the cell, in the same lab, already carries an open alarm from the
    same first night (one change, seen in this series only tonight): that alarm's series and
    night; the night's failure counts a change once (`report.nightly`)."""
    for _, state in sorted(states.items()):
        for earlier in state.open:
            if (earlier.cell, earlier.lab, earlier.run_id) == (alarm.cell, alarm.lab, alarm.run_id) and (
                earlier.series != alarm.series
            ):
                return {"series": earlier.series, "raised": earlier.raised}
    return {}


def _joined(said: dict, same: dict) -> dict:
    """The alarm's words, with the change it joins named in them (every surface shows the message)."""
    if not same:
        return said
    also = f"; the change {same['series']} raised on {same['raised'][:10]}: one change, not failed again"
    return {**said, "same_change": same, "message": said["message"] + also}


def _gated(
    series_of: Mapping[str, list],
    cell: str,
    series: str,
    lab: str,
    higher: bool,
    points: Sequence[SeriesPoint],
    state: alarms.State,
    tested: bool,
) -> alarms.Verdict:
    """The series' verdict; while its new alarm rests on a weak anchor, judged again with that
    night's change held to the weak anchor's bar."""
    args = (cell, series, lab, higher, [p.value for p in points], [p.finished for p in points])
    args += ([p.run_id for p in points], [p.facts for p in points], state, tested)
    weak: frozenset[int] = frozenset()
    verdict = alarms.judge(*args)
    while verdict.new and verdict.new[0].how == "recorded change":
        alarm = verdict.new[0]
        night = next(i for i, p in enumerate(points) if p.finished == alarm.finished)
        others = [s for s in series_of.get(series.split("@")[0], ()) if s[0] != cell]
        if night in weak or not _weak(others, points, night, alarm.after - alarm.before):
            break
        weak |= {night}
        verdict = alarms.judge(*args, weak=weak)
    return verdict


def _weak(others: Sequence[tuple], points: Sequence[SeriesPoint], night: int, direction: float) -> bool:
    """Whether every recorded change (not rotating) of the series at `night` is a weak anchor:
    made the same night by at least `causes.SHARED_MIN` of the other cells' series that were flat
    before it, and moving (the way `direction` says) fewer than `causes.MOVED_SHARE` of them."""
    facts = [p.facts for p in points]
    spinning = causes.rotating(facts)
    changed = {k: v for k, v in causes.changed_nights(facts).get(night, {}).items() if k not in spinning}
    day = points[night].finished[:10]
    for fact, (before, after) in changed.items():
        made = [s for s in others if _made(s[2], day, fact, before, after)]
        if not causes.weak_anchor(*_witnesses(made, day, direction)):
            return False
    return bool(changed)


def _made(points: Sequence[SeriesPoint], day: str, fact: str, before: str, after: str) -> bool:
    """Whether the series was measured on `day` with `fact` changed from `before` to `after`."""
    at = next((i for i, p in enumerate(points) if p.finished[:10] >= day), None)
    if not at or points[at].finished[:10] != day:
        return False
    return points[at - 1].facts.get(fact, "") == before and points[at].facts.get(fact, "") == after


def _comovers(others: Sequence[tuple], day: str, direction: float) -> int:
    """How many of the other cells' series moved the way `direction` says on `day`."""
    return _witnesses(others, day, direction)[1]


def _witnesses(others: Sequence[tuple], day: str, direction: float) -> tuple[int, int]:
    """Of the other cells' series measured on `day`: how many were flat before it (can witness
    a move, `alarms.moved_with`) and how many of those moved the way `direction` says."""
    flat = moved = 0
    for _, _, points in others:
        at = next((i for i, p in enumerate(points) if p.finished[:10] >= day), None)
        if at is None or points[at].finished[:10] != day:
            continue
        said = alarms.moved_with([p.value for p in points], at, direction)
        flat += said is not None
        moved += bool(said)
    return flat, moved


def night(target, night_dir, cells, states: Mapping[str, dict] | None = None) -> dict:
    """Ingest one night into the store and judge its cells' series (`cells`: cell -> its evidence
    document tonight), each in its lab's series, from the states they carried (`states`: the
    previous night's result's "state"); the result holds tonight's words and the states to
    carry on. What could not be done (no 'history' extra, a store that does not answer, a night
    with no evidence) is said in the result, never raised; the states are then carried as they were."""
    from dayzero.errors import DayzeroError
    from dayzero.history.store import open_store

    before = {k: alarms.State.from_json(v) for k, v in (states or {}).items()}
    try:
        with open_store(target) as store:
            store.ingest_folder(night_dir)
            words, after = judged(store, cells, before)
            return {
                "store": store.where,
                **words,
                "state": {k: v.to_json() for k, v in sorted(after.items())},
            }
    except DayzeroError as exc:
        return {"store": str(target).split("@")[-1], "not_available": str(exc), "state": dict(states or {})}
