"""The nightly's verdict on one series: an alarm raised once per change, kept until it recovers.

Searching the whole series again every night (`changes.detect`) gives every night a fresh chance
of a spurious change point and moves a real one from night to night: replayed night by night,
7.5% of pure-noise series were announced as a new regression at some point and a real step was
"new" again 15 times. Here each series carries a state from night to night (`State`: the night
of its last move and its open alarms), and each night asks only whether the newest nights left
the level held since that move:

1. **level**: the nights since the series' last move (its last change point, or the night of its
   newest alarm or recovery); at least `MIN_LEVEL` of them, one-night blips out. A series of
   fewer than `YOUNG` nights knows its noise poorly: it is scaled up by sqrt(YOUNG / nights), and
   only anchored tails (below) are tested, no free tails nor change points;
2. **tail tests**: the newest w nights (their median; w = 1..`TAIL`) against the level, in units
   of the series' own noise (`changes.noise`, robust to steps and blips). Where a recorded fact
   that does not rotate changed on the tail's first night (an engine, a recipe: where a change
   is expected) the bar is `ANCHORED_Z` for the tail's median, from one night on; elsewhere
   each of at least `FREE_FROM` nights must pass `FREE_Z`, so that one odd night, or two, never
   raise an alarm. A **weak** anchor (a change many cells shared that moved almost none of the
   others: a harness bump; the caller sees the other cells, `trends.judged`) is tested in every
   cell that shared it, where one heavy-tailed night past even 5 sigma is no rarity: it is no
   anchor, and its night is tested as any other, by free tails (`STRICT_Z` infinite);
3. **change points**: a regression `changes.detect` finds after the last move, within `RECENT`
   nights, with t at least `SEARCH_T` (slow steps and drifts the tails are too short for);
4. an alarm is **raised** once (its night becomes the last move), reported as **persisting**
   every night after, and **recovered** the night a better move takes back at least half of its
   loss; the recovery names the alarm it ends. A better move with no alarm open is an
   improvement: the level moves, nothing is raised.

A night the series has no point for (the run broke, the measurement was invalid or contended)
is a gap: nothing is tested, open alarms persist. The false-alarm rate per series per night and
the delay it costs are measured by `bench/history_nightly.py` (docs/reports.md).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace

from dayzero.history import causes, changes

TAIL = 4
MIN_LEVEL = 5
FREE_FROM = 3
ANCHORED_Z = 3.5
# a weak anchor's bar (a change many cells shared that moved almost none of them): none passes it.
# At 5 sigma, single heavy-tailed nights at the harness bump of bench/history_nightly.py raised 2-3
# false alarms per 800 series (seeds 42, 43), and no step was first announced by it.
STRICT_Z = math.inf
FREE_Z = 2.5  # each night of a free tail, in units of the series' noise
SEARCH_T = 6.0
RECENT = 15
YOUNG = 15  # nights: a shorter series' noise is scaled up by sqrt(YOUNG / nights), free tails wait
# variance of the median of w normal nights, in units of one night's (w = 1..4)
MEDIAN_VARIANCE = {1: 1.0, 2: 0.5, 3: 0.449, 4: 0.343}


@dataclass(frozen=True)
class Alarm:
    cell: str
    series: str
    lab: str
    run_id: str  # the first night at the new level
    finished: str
    raised: str  # the night it was raised (finished time)
    before: float
    after: float
    z: float  # the move over its standard error
    higher_is_better: bool
    how: str  # "recorded change" | "tail" | "change point"
    candidates: tuple[causes.Candidate, ...] = ()

    @property
    def change_pct(self) -> float:
        return (self.after - self.before) / abs(self.before) * 100 if self.before else 0.0

    def describe(self) -> str:
        named = "; ".join(f"{i}. {c.describe()}" for i, c in enumerate(self.candidates, 1))
        return (
            f"{self.series} regressed {self.change_pct:+.1f}% ({self.before:.4g} -> {self.after:.4g}, "
            f"z {self.z:.1f}, by {self.how}) from {self.finished[:10]} (run {self.run_id}), raised "
            f"{self.raised[:10]}; "
            + (f"candidates, ranked: {named}" if named else "nothing recorded changed near it")
        )

    def to_json(self) -> dict:
        out = asdict(self)
        out["candidates"] = [c.to_json() for c in self.candidates]
        return {**out, "change_pct": round(self.change_pct, 2), "message": self.describe()}

    @classmethod
    def from_json(cls, data: Mapping) -> Alarm:
        kept = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        kept["candidates"] = tuple(causes.Candidate.from_json(c) for c in data.get("candidates", ()))
        return cls(**kept)


@dataclass(frozen=True)
class Recovery:
    run_id: str  # the first night back
    finished: str
    level: float
    z: float
    ends: Alarm

    def describe(self) -> str:
        a = self.ends
        return (
            f"{a.series} recovered to {self.level:.4g} from {self.finished[:10]} (run {self.run_id}, "
            f"z {self.z:.1f}): ends the regression of {a.finished[:10]} ({a.before:.4g} -> {a.after:.4g}, "
            f"{a.change_pct:+.1f}%, run {a.run_id})"
        )

    def to_json(self) -> dict:
        return {
            "cell": self.ends.cell,
            "series": self.ends.series,
            "lab": self.ends.lab,
            "run_id": self.run_id,
            "finished": self.finished,
            "level": self.level,
            "z": self.z,
            "ends": self.ends.to_json(),
            "message": self.describe(),
        }


@dataclass(frozen=True)
class State:
    """What a series carries to the next night: the night of its last move and its open alarms."""

    since: str = ""  # finished time of the first night of the current level ("" : the first night)
    open: tuple[Alarm, ...] = ()

    def to_json(self) -> dict:
        return {"since": self.since, "open": [a.to_json() for a in self.open]}

    @classmethod
    def from_json(cls, data: Mapping) -> State:
        return cls(data.get("since", ""), tuple(Alarm.from_json(a) for a in data.get("open", ())))


@dataclass(frozen=True)
class Verdict:
    new: tuple[Alarm, ...] = ()
    persist: tuple[Alarm, ...] = ()
    recovered: tuple[Recovery, ...] = ()
    state: State = field(default_factory=State)


@dataclass(frozen=True)
class Move:
    night: int  # position of the first night at the new level
    level: float  # the level before
    now: float  # the tail's level
    z: float  # signed: positive when the value went up
    how: str


CLIP = 2.5  # night-to-night differences clipped at this many robust sigmas before their spread


def noise(values: Sequence[float]) -> float:
    """A series' noise for the tail tests: the spread of its night-to-night differences clipped at
    CLIP robust sigmas (`changes.noise`), which a step or a blip moves once or twice and no more.
    The MAD alone is loose (from 40 heavy-tailed nights it was off by +-30%, and both a missed
    step and a false alarm follow); the clipped spread uses every night."""
    base = changes.noise(values)
    if len(values) < 5:
        return base
    d = [b - a for a, b in zip(values, values[1:], strict=False)]
    bound = CLIP * math.sqrt(2) * base
    clipped = [max(-bound, min(bound, v)) for v in d]
    mean = sum(clipped) / len(clipped)
    spread = math.sqrt(sum((v - mean) ** 2 for v in clipped) / (len(clipped) - 1)) / math.sqrt(2)
    return max(spread / CLIPPED_NORMAL_SD, base * 0.5)


CLIPPED_NORMAL_SD = 0.9887  # the standard deviation of a normal clipped at +-2.5 sigma


def _tail(x: Sequence[float], w: int) -> float:
    return float(statistics.median(x[len(x) - w :]))


def _level(x: Sequence[float]) -> float:
    if len(x) < 5:
        return float(statistics.median(x))
    np, _ = changes._libs()
    return float(changes._without_blips(np.asarray(x, dtype=float), changes.noise(x)).mean())


def tail_moves(
    x: Sequence[float],
    lo: int,
    sigma: float,
    anchors: frozenset[int],
    min_level: int = MIN_LEVEL,
    free: bool = True,
    weak: frozenset[int] = frozenset(),
) -> list[Move]:
    """The tail tests of tonight (the last of x) against the level x[lo:tail]: each w whose move
    passes its bar, strongest first. Anchored (a recorded change on the tail's first night): the
    tail's median at least ANCHORED_Z from the level (STRICT_Z at a `weak` anchor). Free (also a
    weak anchor short of STRICT_Z): every night of the tail at least FREE_Z from it, the same way
    (two odd nights in a row never are three)."""
    n, out = len(x), []
    for w in range(1, TAIL + 1):
        a = n - w
        anchored, freed = a in anchors, w >= FREE_FROM and free
        if a - lo < min_level or not (anchored or freed):
            continue
        level, now = _level(x[lo:a]), _tail(x, w)
        how = ""
        if anchored:
            z = (now - level) / (sigma * math.sqrt(MEDIAN_VARIANCE[w] + 1 / (a - lo)))
            how = "recorded change" if abs(z) >= (STRICT_Z if a in weak else ANCHORED_Z) else ""
        if not how and freed and (not anchored or a in weak):
            each = [(v - level) / (sigma * math.sqrt(1 + 1 / (a - lo))) for v in x[a:]]
            z = min(each) if each[0] > 0 else max(each)
            passed = min(abs(e) for e in each) >= FREE_Z and all(e * each[0] > 0 for e in each)
            how = "tail" if passed else ""
        if how and abs(now - level) >= changes.MIN_CHANGE_PCT / 100 * abs(level):
            night = a if how == "recorded change" else _best_split(x, lo, a)
            out.append(Move(night, level, _tail(x, n - night), z, how))
    return sorted(out, key=lambda m: -abs(m.z))


def _best_split(x: Sequence[float], lo: int, a: int) -> int:
    """The night in the tail (from `a`) where x[lo:] splits best: a median passes its bar once
    most of the tail has moved, so the tail's first night may still be the old level."""
    fit = causes.deficits(x, lo, len(x), 1.0)
    return min(range(a, len(x)), key=lambda k: (fit.get(k, math.inf), k))


def _worse(move_z: float, higher: bool) -> bool:
    return move_z < 0 if higher else move_z > 0


def _index(finished: Sequence[str], since: str) -> int:
    return next((i for i, f in enumerate(finished) if f >= since), len(finished)) if since else 0


def judge(
    cell: str,
    series: str,
    lab: str,
    higher: bool,
    values: Sequence[float],
    finished: Sequence[str],
    run_ids: Sequence[str],
    facts: Sequence[Mapping[str, str]],
    state: State,
    tested: bool = True,
    weak: frozenset[int] = frozenset(),
) -> Verdict:
    """Tonight's verdict on a series (its clean nights, oldest first, tonight last) given the state
    it carried from last night. `tested` False: tonight has no point (a gap): open alarms persist.
    `weak`: the nights whose recorded change is a weak anchor (see the module's doc)."""
    if not tested or len(values) < MIN_LEVEL + 1:
        return Verdict(persist=state.open, state=state)
    n = len(values)
    anchors = causes.informative(facts)
    # a young series' noise rests on few nights: its bar is raised, and free tails wait for it
    sigma = noise(values) * math.sqrt(max(1.0, YOUNG / n))
    since = _index(finished, state.since)
    found = changes.detect(values, changed=anchors)
    # the level starts at the last move: a change point too old to raise, or an improvement (a
    # recent regression not yet sure enough to raise stays in the level until it is)
    settled = [c.index for c in found if n - c.index > RECENT or not c.worse(higher)]
    lo = max([since, *(i for i in settled if i <= n - MIN_LEVEL)])
    moves: list[Move] = []
    for c in found:
        fresh = n >= YOUNG and c.index > since + 2 and n - c.index <= RECENT and c.t >= SEARCH_T
        if fresh and all(abs(c.index - _index(finished, a.finished)) > 2 for a in state.open):
            moves.append(
                Move(c.index, c.before, c.after, c.t if c.after > c.before else -c.t, "change point")
            )
    if state.open:  # a recovery is measured from the newest alarm's level
        lo = max(lo, _index(finished, state.open[-1].finished))
    moves += tail_moves(
        values, lo, sigma, anchors, 2 if state.open else MIN_LEVEL, free=n >= YOUNG, weak=weak
    )
    if not moves:
        return Verdict(persist=state.open, state=state)
    move = max(moves, key=lambda m: (m.how == "change point", abs(m.z)))
    at = finished[move.night]
    if _worse(move.z, higher):
        found_causes = causes.candidates(facts, finished, values, move.night, since, sigma)
        alarm = Alarm(
            cell, series, lab, run_ids[move.night], at, finished[-1], round(move.level, 6),
            round(move.now, 6), round(abs(move.z), 2), higher, move.how, tuple(found_causes),
        )  # fmt: skip
        return Verdict(new=(alarm,), persist=state.open, state=State(at, (*state.open, alarm)))
    ended = [a for a in state.open if _recovers(a, move.now)]
    kept = tuple(a for a in state.open if a not in ended)
    back = tuple(
        Recovery(run_ids[move.night], at, round(move.now, 6), round(abs(move.z), 2), a) for a in ended
    )
    return Verdict(persist=kept, recovered=back, state=State(at, kept))


def _recovers(alarm: Alarm, level: float) -> bool:
    """Back at least half way from the alarm's level to the level it left."""
    lost = alarm.before - alarm.after
    return abs(level - alarm.after) >= abs(lost) / 2 and (level - alarm.after) * lost > 0


FLAT_Z = 2.0  # the halves of the nights before a change this far apart: the level was already moving
COMOVE_Z = 3.0  # a series moved with a change: its tail this far from its level before
BEFORE = 10  # nights before a change that say whether a series was flat


def moved_with(x: Sequence[float], at: int, direction: float) -> bool | None:
    """Whether a series (another cell's, up to tonight) moved the way `direction` says at night
    `at`: the median of up to three nights from it COMOVE_Z of its noise from the median of the
    nearer half of the BEFORE nights before. None (no witness) where it had fewer than MIN_LEVEL
    nights before, or its level was already moving (the halves' medians FLAT_Z apart: a drift,
    its own step): at a change every cell shares, such cells counted as moved with it, and a
    harness bump that moved nothing was never a weak anchor."""
    before = list(x[max(0, at - BEFORE) : at])
    if len(before) < MIN_LEVEL or at >= len(x):
        return None
    sigma, h = changes.noise(x), len(before) // 2
    older, near = before[:h], before[h:]
    spread = sigma * math.sqrt(_median_variance(len(older)) + _median_variance(len(near)))
    level = float(statistics.median(near))
    if abs(level - float(statistics.median(older))) >= FLAT_Z * spread:
        return None
    w = min(3, len(x) - at)
    now = _tail(x[: at + w], w)
    z = (now - level) / (sigma * math.sqrt(MEDIAN_VARIANCE[w] + _median_variance(len(near))))
    return abs(z) >= COMOVE_Z and (now - level) * direction > 0


def _median_variance(n: int) -> float:
    return MEDIAN_VARIANCE.get(n, math.pi / (2 * n))


def with_comovers(alarm: Alarm, moved: Mapping[str, int]) -> Alarm:
    """The alarm's candidates with their co-movers counted (`moved`: night's finished time ->
    other cells' series of the metric that moved the same way that night), ranked again."""
    counted = [replace(c, comoved=moved.get(c.finished, 0)) for c in alarm.candidates]
    return replace(alarm, candidates=tuple(causes.ranked(counted)))
