"""Nightly runs: the matrix on an inventory, each night judged by its history.

Layout under the nightly root (default `reports/nightly`):

    nights/<UTC stamp>/           one night: evidence/, runs/, allure-results/, acceptance.*,
                                  regressions.json, allure-report/index.html
    allure-history.jsonl          Allure 3's history, appended by every night's report (trends)
    history.sqlite                the results store every night is ingested into (dayzero.history;
                                  or the PostgreSQL DSN of --store)
    latest                        symlink to the newest night

A night's **regressions** (and its exit status 1) are the alarms its history raises tonight
(`judge_night`, `dayzero.history.alarms`): each series against the level it held since its last
move, in units of its own noise, an alarm raised once per change, then persisting (said, not
failed again) until a recovery names it; a change another series of the cell raised on an
earlier night, seen in this series only now, is said with that alarm ("same_change") and not
failed again; broken nights and invalid or contended measurements are
gaps. regressions.json holds them ("regressions", and "history": new, persist, recovered, and
the state carried to the next night).

The previous night's values are still compared, for display only ("previous_night"), and
`pytest --baseline` compares a run with a chosen one and fails what got worse beyond the band:
a metric of a cell that got worse than the baseline's value by more than the noise band. The
band of a metric is, in order of preference:

1. the *recorded spread*: when both nights repeated the measurement, the larger of the two
   ranges (max - min over repetitions) -- the run's own evidence of how much it wobbles;
2. otherwise a default relative band: `DEFAULT_BAND_PCT` (10%) of the previous value for
   throughputs, means and medians, `TAIL_BAND_PCT` (25%) for p90/p99 latencies, which rest on a
   handful of requests;

and never less than `MIN_BAND_PCT` (5%) of the previous value -- repetitions inside one run do
not see what drifts between nights (other load, clocks, thermals) -- nor `MIN_BAND_MS` (2 ms)
for a latency (timer and scheduler granularity on a busy host); for interactivity (1000 / TPOT)
the floor is what a 2 ms move of TPOT is worth, so sub-millisecond TPOTs never raise alarms.

Compared metrics: every throughput and interactivity (higher is better) and the mean, median,
p90 and p99 of every latency in ms (lower is better) in the checks' summaries; counts, durations
and standard deviations are not levels and are not compared. Cells and checks present in only
one of the two nights are reported as such, never as regressions.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import secrets
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from dayzero import atomic, evidence, exitcodes
from dayzero.clock import moment
from dayzero.history import trends
from dayzero.history.levels import direction, levels
from dayzero.history.points import lab_of
from dayzero.history.store import open_store
from dayzero.report import allure_build
from dayzero.report.acceptance import write_acceptance
from dayzero.report.benchcard import write_cards
from dayzero.report.pictures import sparklines
from dayzero.spec.matrix import load_matrix

DEFAULT_BAND_PCT = 10.0
TAIL_BAND_PCT = 25.0
MIN_BAND_PCT = 5.0
MIN_BAND_MS = 2.0
NIGHTS = "nights"
HISTORY = "allure-history.jsonl"
REGRESSIONS = "regressions.json"
STORE = "history.sqlite"  # the results store (dayzero.history), under the nightly root by default
HISTORY_WORDS = {"new": "NEW REGRESSION", "persist": "regression persists", "recovered": "RECOVERED"}


@dataclass(frozen=True)
class Comparison:
    cell: str
    check: str
    metric: str
    previous: float
    current: float
    band: float  # absolute: how far the value may move the wrong way and still be noise
    band_source: str  # "recorded spread" | "default 10%" | a minimum that applied
    higher_is_better: bool

    @property
    def change_pct(self) -> float:
        return (self.current - self.previous) / self.previous * 100 if self.previous else 0.0

    @property
    def regressed(self) -> bool:
        worse = self.previous - self.current if self.higher_is_better else self.current - self.previous
        return worse > self.band

    def describe(self) -> str:
        arrow = "dropped" if self.current < self.previous else "rose"
        return (
            f"{self.check} {self.metric} {arrow} from {self.previous:g} to {self.current:g} "
            f"({self.change_pct:+.1f}%; noise band +-{self.band:.3g} from {self.band_source})"
        )

    def to_json(self) -> dict:
        return {**asdict(self), "change_pct": round(self.change_pct, 2)}


def noise_band(
    metric: str, previous: float, spreads: Sequence[float | None], default_pct: float
) -> tuple[float, str]:
    known = [s for s in spreads if s is not None]
    if len(known) == len(spreads) and known:
        band, source = max(known), "recorded spread"
    else:
        tail = metric.startswith(("p90_", "p99_"))
        pct = max(default_pct, TAIL_BAND_PCT) if tail else default_pct
        band, source = abs(previous) * pct / 100, f"default {pct:g}%"
    floors = [(abs(previous) * MIN_BAND_PCT / 100, f"minimum {MIN_BAND_PCT:g}%")]
    if metric.endswith("_ms"):
        floors.append((MIN_BAND_MS, f"minimum {MIN_BAND_MS:g} ms"))
    elif metric.endswith("interactivity") and previous > 0:
        floors.append((previous - 1000 / (1000 / previous + MIN_BAND_MS), f"TPOT {MIN_BAND_MS:g} ms"))
    floor, why = max(floors)
    return (band, source) if band >= floor else (floor, why)


def compare_docs(previous: dict, current: dict, default_pct: float = DEFAULT_BAND_PCT) -> list[Comparison]:
    """Every comparable metric of every performance check the two evidence documents share."""
    before = {c["name"]: c for c in previous["checks"] if c["kind"] == "performance"}
    out = []
    for check in current["checks"]:
        if check["kind"] != "performance" or check["name"] not in before:
            continue
        old = levels(before[check["name"]])
        for metric, (value, rng) in levels(check).items():
            if metric not in old:
                continue
            prev, prev_rng = old[metric]
            band, source = noise_band(metric, prev, [prev_rng, rng], default_pct)
            out.append(
                Comparison(
                    current["cell"], check["name"], metric, prev, value, band, source, bool(direction(metric))
                )
            )
    return out


def regressions(comparisons: Iterable[Comparison]) -> list[Comparison]:
    return [c for c in comparisons if c.regressed]


def latest_by_cell(reports_dir: Path) -> dict[str, dict]:
    """The newest evidence document of each cell in a reports dir (a night)."""
    latest: dict[str, dict] = {}
    if not (Path(reports_dir) / evidence.EVIDENCE_DIR).is_dir():
        return latest
    for _, doc in evidence.iter_evidence(reports_dir):
        seen = latest.get(doc["cell"])
        if seen is None or moment(doc["run"]["finished"]) > moment(seen["run"]["finished"]):
            latest[doc["cell"]] = doc
    return latest


@dataclass(frozen=True)
class BaselineVerdict:
    """One cell of this run against the same cell of a baseline run (`pytest --baseline`)."""

    cell: str
    baseline_run: str
    comparisons: tuple[Comparison, ...]

    @property
    def regressions(self) -> list[Comparison]:
        return regressions(self.comparisons)

    def rows(self) -> list[dict]:
        return [{**c.to_json(), "regressed": c.regressed} for c in self.comparisons]

    def failure(self, shown: int = 8) -> str:
        """Why the cell fails as a regression: the first `shown` metrics that got worse."""
        found = self.regressions
        lines = [c.describe() for c in found[:shown]]
        if len(found) > shown:
            lines.append(f"... and {len(found) - shown} more (see the comparison attachment)")
        return (
            f"{self.cell}: regression against run {self.baseline_run}: {len(found)} metric(s) "
            "worse beyond the noise band\n  " + "\n  ".join(lines)
        )


class Baseline:
    """A previous run's reports dir, read once, that each cell of this run is compared with."""

    def __init__(self, reports_dir: Path, default_pct: float = DEFAULT_BAND_PCT):
        self.reports_dir, self.default_pct = Path(reports_dir), default_pct
        self._latest: dict[str, dict] | None = None

    def compare(self, current: dict) -> BaselineVerdict | None:
        """None when the baseline holds no evidence of the cell."""
        if self._latest is None:
            self._latest = latest_by_cell(self.reports_dir)
        previous = self._latest.get(current["cell"])
        if previous is None:
            return None
        comparisons = compare_docs(previous, current, self.default_pct)
        return BaselineVerdict(current["cell"], previous["run"]["id"], tuple(comparisons))


def compare_nights(
    previous_dir: Path | None, current_dir: Path, default_pct: float = DEFAULT_BAND_PCT
) -> dict:
    """The night's comparison report: regressions, every comparison, cells new or gone."""
    before = latest_by_cell(previous_dir) if previous_dir else {}
    now = latest_by_cell(current_dir)
    comparisons = []
    for cell, doc in sorted(now.items()):
        if cell in before and doc["verdict"] != "broken" and before[cell]["verdict"] != "broken":
            comparisons.extend(compare_docs(before[cell], doc, default_pct))
    found = regressions(comparisons)
    return {
        "previous": str(previous_dir) if previous_dir else None,
        "current": str(current_dir),
        "default_band_pct": default_pct,
        "regressions": [{**c.to_json(), "message": c.describe()} for c in found],
        "compared": [c.to_json() for c in comparisons],
        "new_cells": sorted(set(now) - set(before)),
        "missing_cells": sorted(set(before) - set(now)),
    }


# --- the nightly run ------------------------------------------------------------------------


def night_stamp(now: dt.datetime | None = None) -> str:
    return (now or dt.datetime.now(dt.UTC)).strftime("%Y%m%dT%H%M%SZ")


def previous_night(root: Path, current: str | None = None) -> Path | None:
    """The newest night before `current` that holds evidence."""
    nights = sorted(p for p in (Path(root) / NIGHTS).glob("*") if p.is_dir() and p.name != current)
    nights = [p for p in nights if current is None or p.name < current]
    for night in reversed(nights):
        if any((night / evidence.EVIDENCE_DIR).glob("*.json")):
            return night
    return None


def pytest_command(args, night: Path) -> list[str]:
    """Options in `--name=value` form: a bare path argument would move pytest's rootdir. No
    `--baseline`: a night's regressions are judged by its history (`judge_night`), not by a fixed
    band against the night before."""
    matrix = getattr(args, "nightly_matrix", None) or args.matrix
    cmd = [sys.executable, "-m", "pytest", "-p", "no:randomly", "-q", "-rfE"]
    cmd += [
        f"--hosts={Path(args.hosts).resolve()}",
        f"--matrix={Path(matrix).resolve()}",
        f"--reports={night}",
    ]
    if args.markers:
        cmd += ["-m", args.markers]
    if args.workers and args.workers != "0":
        cmd += ["-n", args.workers]
    cmd += [*(args.pytest_args or []), "suites"]
    return cmd


def draw_night(target, night_dir, matrix, cells: Sequence[str]) -> list[str]:
    """The night's pictures of its history: the acceptance page again with each cell's trend, and
    the benchmark cards of the models that ran with each cell's series (the Allure report attaches
    the cards). Returns the files written."""
    models = sorted({c.split("/", 1)[0] for c in cells})
    lab = next((lab_of(doc) for doc in cells.values()), None) if isinstance(cells, Mapping) else None
    with open_store(target) as store:
        trends_of = sparklines(store, [c.id for c in matrix.cells], lab)  # this lab's series
        page = write_acceptance(matrix, night_dir, trends=trends_of)
        return [str(page), *map(str, write_cards(matrix, night_dir, models, history=store))]


def previous_state(root: Path, current: str) -> dict:
    """The series' states the newest earlier night carried on (its regressions.json), else none:
    the alarms open and each series' last move (`history.alarms.State`)."""
    for night in sorted((Path(root) / NIGHTS).glob("*"), reverse=True):
        if night.name < current and (night / REGRESSIONS).is_file():
            return (json.loads((night / REGRESSIONS).read_text()).get("history") or {}).get("state") or {}
    return {}


def judge_night(root: Path, night: Path, store, band: float = DEFAULT_BAND_PCT) -> dict:
    """A night's verdict, written to its regressions.json: the night ingested into the store and
    each series judged against its own history from the state the previous night left
    (`history.alarms`: raised once, persisting, recovered); "regressions" are tonight's new
    alarms, the night's failure. The previous night's values are compared for display only."""
    previous = previous_night(root, night.name)
    tonight = latest_by_cell(night)
    history = trends.night(store, night, tonight, previous_state(root, night.name))
    result = {
        "night": night.name,
        "regressions": [a for a in history.get("new", []) if "same_change" not in a],
        "history": history,
        "previous_night": compare_nights(previous, night, band),
    }
    atomic.write_json(night / REGRESSIONS, result, sort_keys=False)
    return result


def say_night(result: dict) -> None:
    history = result["history"]
    for word in ("new", "persist", "recovered"):
        for r in history.get(word, ()):
            print(f"[nightly] {HISTORY_WORDS[word]} {r['cell']}: {r['message']}", file=sys.stderr)
    if "not_available" in history:
        print(f"[nightly] history: {history['not_available']}", file=sys.stderr)
    shown = result["previous_night"]
    print(
        f"[nightly] {len(history.get('new', []))} new regression(s), {len(history.get('persist', []))} "
        f"persisting, {len(history.get('recovered', []))} recovered; against the previous night (display "
        f"only): {len(shown['compared'])} metric(s), {len(shown['regressions'])} beyond the band",
        file=sys.stderr,
    )


def run_nightly(args) -> int:
    """One night: pytest over the matrix (xdist), the night judged by its history, the report."""
    root = Path(args.root).resolve()
    stamp = night_stamp()
    night = root / NIGHTS / stamp
    night.mkdir(parents=True, exist_ok=True)
    baseline = previous_night(root, stamp)
    cmd = pytest_command(args, night)
    print(f"[nightly] night {stamp}; previous: {baseline.name if baseline else 'none'}", file=sys.stderr)
    print(f"[nightly] {' '.join(cmd)}", file=sys.stderr)
    # the second alone is not unique: two controllers (two labs) start from the same cron minute
    env = {**os.environ, "DAYZERO_RUN_ID": f"nightly-{stamp}-{secrets.token_hex(4)}"}
    code = subprocess.run(cmd, cwd=args.suites_root, env=env).returncode
    store = getattr(args, "store", None) or root / STORE
    result = judge_night(root, night, store, args.band)
    say_night(result)
    if "not_available" not in result["history"] and not args.no_report:
        matrix = load_matrix(getattr(args, "nightly_matrix", None) or args.matrix)
        drawn = draw_night(store, night, matrix, latest_by_cell(night))
        print(
            f"[nightly] history drawn: {len(drawn) - 1} benchmark card(s), trends in {drawn[0]}",
            file=sys.stderr,
        )
    if not args.no_report:
        try:
            out = allure_build.build(
                night,
                night / "allure-report",
                history=root / HISTORY,
                name=f"dayzero nightly {stamp}",
                near=Path(args.suites_root),
            )
            print(f"[nightly] report: {out}", file=sys.stderr)
        except allure_build.ReportError as exc:
            print(f"[nightly] report not built: {exc}", file=sys.stderr)
            code = code or 3
    latest = root / "latest"
    if latest.is_symlink() or not latest.exists():
        latest.unlink(missing_ok=True)
        latest.symlink_to(Path(NIGHTS) / stamp)
    if code == 5:
        print("[nightly] no cell ran (pytest exit 5): nothing selected or no host for them", file=sys.stderr)
    if result["regressions"] and code in (exitcodes.OK, exitcodes.LAB_FAULT, exitcodes.INCONCLUSIVE):
        code = exitcodes.TESTS_FAILED  # a new regression alarm fails the night; a persisting one does not
    return code
