"""Synthetic nights of a lab, replayed night by night through the nightly's own verdict, beside
ruptures' PELT and Apache Otava's e-divisive on the same series.

    flock /tmp/dayzero-e2e.lock .venv/bin/python bench/history_nightly.py [--cells 60] [--full]
        [--seed 41] [--sweep | --gate-sweep]

The lab: `--cells` cells over `NIGHTS` nights, each with two series (output throughput, median
TTFT), noise 1-3% of the level (Student t with 4 degrees of freedom, scaled to that standard
deviation: heavy tails), 3% of nights missing, 3% broken (the run's verdict broken) and 2% with
the measurement invalid (a contended host), both with the numbers 30% off. Cells run one of four
engines; a harness bump reaches every cell on night 45; each engine is bumped once (harmlessly
for most of its cells); a third of the cells draw their host from a pool of four every night.
Each cell is one of: pure noise; a step of 3 or 5 sigma (sigma: the series' noise, its standard
deviation) from a random night, caused by its engine's bump (the cells of that engine that step
all step that night), by its own recipe changing, or by nothing recorded; a drift of 5 sigma
over 15 nights; a 5-sigma step that recovers 15 nights later with another recipe.

Every night is written as evidence (`tests/history_nights.night_doc`) and judged by
`report.nightly.judge_night`: ingested into the store, each series judged from the state the
night before left. Then counted from each night's regressions.json:
- false alarms: new alarms not within [event - 3, event end + 15] of a worsening (per series),
  and how each was raised (a recorded change, a tail, a change point);
- delay: the night a step was first announced less its first measured night (the step's own
  night, or the next one where its run broke or was missing), by size; and from its night;
- broken nights: alarms whose night is a broken, invalid or missing one (must be none);
- cause: the first candidate of each step's alarm is its planted cause (engine or recipe);
- recoveries: each recovery names the alarm of its step.
ruptures PELT and Otava run once on each series' final clean nights (offline: they have no
night-by-night verdict), as does `changes.detect`: false change points on pure-noise series
and steps found within 3 nights of their night.

Otava: `import otava.analysis` if installed, else the unpacked wheel at $DAYZERO_OTAVA
(`pip download --no-deps apache-otava`, unzip): its analysis needs only numpy and scipy.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

from bench.common import load_average, machine, write_result  # noqa: E402
from dayzero import evidence  # noqa: E402
from dayzero.history import alarms, causes, changes  # noqa: E402
from dayzero.report.nightly import judge_night  # noqa: E402
from tests.history_nights import START, night_doc  # noqa: E402

NIGHTS = 90
HARNESS_NIGHT = 45
ENGINES = 4
HOSTS = ("h1", "h2", "h3", "h4")
KINDS = ("noise", "step3", "step5", "drift", "recovery")
WEIGHTS = (0.35, 0.2, 0.2, 0.1, 0.15)
CAUSES = ("engine", "recipe", "none")
SETTINGS = ("ANCHORED_Z", "FREE_Z", "FREE_FROM", "SEARCH_T", "TAIL", "STRICT_Z", "SHARED_MIN", "MOVED_SHARE")
METRICS = ("output_throughput", "median_ttft_ms")
WINDOW = 15  # nights after a worsening ends in which an alarm is still that worsening's


def engine_night(engine: int) -> int:
    return 40 + 7 * engine  # 40, 47, 54, 61: one of them two nights after the harness bump


def plan(rng, cells: int) -> list[dict]:
    """Each cell's noise, kind, event night and cause."""
    out = []
    for c in range(cells):
        kind = str(rng.choice(KINDS, p=WEIGHTS))
        engine = c % ENGINES
        cause = str(rng.choice(CAUSES, p=(0.4, 0.4, 0.2))) if kind.startswith("step") else "recipe"
        if kind in ("noise", "drift"):
            cause = "none"
        at = engine_night(engine) if cause == "engine" else int(rng.integers(25, 75))
        out.append(
            {
                "cell": f"m{c:03d}/cpu+e{engine}/mode/s",
                "engine": engine,
                "sigma": float(rng.uniform(0.01, 0.03)),
                "kind": kind,
                "at": at,
                "cause": cause,
                "rotating": c % 3 == 0,
                "bad": {
                    int(n): str(rng.choice(("missing", "broken", "invalid"), p=(0.375, 0.375, 0.25)))
                    for n in np.flatnonzero(rng.random(NIGHTS) < 0.08)
                },  # fmt: skip
            }
        )
    return out


def shape(cell: dict) -> np.ndarray:
    """The relative level of each night (1.0: the first level), in units of the level."""
    s, at, kind = cell["sigma"], cell["at"], cell["kind"]
    x = np.ones(NIGHTS)
    if kind == "step3":
        x[at:] -= 3 * s
    elif kind in ("step5", "recovery"):
        x[at:] -= 5 * s
        if kind == "recovery":
            x[at + WINDOW :] += 5 * s
    elif kind == "drift":
        x[at:] -= 5 * s * np.minimum(np.arange(NIGHTS - at) + 1, WINDOW) / WINDOW
    return x


def facts(cell: dict, night: int, rng) -> dict:
    engine, at = cell["engine"], cell["at"]
    recipe = "r0"
    if cell["cause"] == "recipe" and night >= at:
        recipe = "r1"
    if cell["kind"] == "recovery" and night >= at + WINDOW:
        recipe = "r2"
    host = str(rng.choice(HOSTS)) if cell["rotating"] else "h0"
    return {
        "engine": f"e{engine}.{int(night >= engine_night(engine))}",
        "recipe": recipe,
        "host": host,
    }


def write_night(night_dir: Path, night: int, lab: list[dict], rng) -> None:
    for cell in lab:
        bad = cell["bad"].get(night)
        if bad == "missing":
            continue
        f = facts(cell, night, rng)
        noise = cell["sigma"] * rng.standard_t(4, 2) / np.sqrt(2)
        level = cell["shape"][night]
        tput, ttft = 100 * (level + noise[0]), 50 * (2 - level + noise[1])
        if bad:
            tput, ttft = tput * 0.7, ttft * 1.43
        doc = night_doc(
            night, tput, cell=cell["cell"], ttft_ms=ttft, recipe=f["recipe"], engine=f["engine"],
            host=f["host"], accuracy=None,
        )  # fmt: skip
        doc["run"]["harness_version"] = "0.2.0" if night >= HARNESS_NIGHT else "0.1.0"
        if bad == "broken":
            doc["verdict"] = "broken"
        elif bad == "invalid":
            doc["checks"][0]["verdict"] = "invalid"
            doc["checks"][0]["details"]["contended"] = "host contended: load 3.1 on 2 cores"
        evidence.write(night_dir, doc)


def replay(lab: list[dict], work: Path, rng) -> tuple[list[dict], float]:
    """Every night through the nightly's verdict; each night's regressions.json."""
    root, store, said = work / "nightly", work / "history.sqlite", []
    start = time.monotonic()
    for night in range(NIGHTS):
        night_dir = root / "nights" / f"2026{night // 28 + 1:02d}{night % 28 + 1:02d}T020000Z"
        write_night(night_dir, night, lab, rng)
        said.append(judge_night(root, night_dir, store)["history"])
        if night % 15 == 14:
            print(f"  night {night + 1}: {time.monotonic() - start:.0f} s", flush=True)
    return said, time.monotonic() - start


def caused(cell: dict) -> str:
    """The value the step's cause took on its night (a gap that night moves it, not the value)."""
    return f"llama.cpp e{cell['engine']}.1" if cell["cause"] == "engine" else "r1"


def night_of(finished: str) -> int:
    return (dt.date.fromisoformat(finished[:10]) - START.date()).days


def score(lab: list[dict], said: list[dict]) -> dict:
    by_cell = {c["cell"]: c for c in lab}
    series = {(c["cell"], s) for c in lab for s in ("tput", "ttft")}
    false_series, false_alarms, at_bad, delays, causes_ok, recoveries = set(), 0, 0, {}, [], []
    first: dict[tuple, int] = {}
    examples: list[list] = []
    late: dict[str, list[int]] = {}  # the delay from the step's night, gap or not
    how: dict[str, int] = {}  # false alarms by how they were raised
    for night, h in enumerate(said):
        for a in h.get("new", ()):
            cell = by_cell[a["cell"]]
            at = night_of(a["finished"])
            key = (a["cell"], a["series"].split("@")[0])
            if at in cell["bad"]:
                at_bad += 1
            worsening = cell["kind"] != "noise"
            end = cell["at"] + (WINDOW if cell["kind"] in ("drift", "recovery") else NIGHTS)
            if not worsening or not cell["at"] - 3 <= at <= end + WINDOW:
                false_alarms += 1
                false_series.add(key)
                how[a["how"]] = how.get(a["how"], 0) + 1
                examples.append([night, at, cell["kind"], cell["at"], a["how"], a["z"], a["change_pct"]])
                continue
            if key not in first:
                first[key] = night
                if cell["kind"].startswith("step") or cell["kind"] == "recovery":
                    size = "3" if cell["kind"] == "step3" else "5"
                    cause = "recorded" if cell["cause"] != "none" else "unrecorded"
                    measured = next(n for n in range(cell["at"], NIGHTS) if n not in cell["bad"])
                    delays.setdefault(f"{size} sigma, {cause}", []).append(night - measured)
                    late.setdefault(f"{size} sigma, {cause}", []).append(night - cell["at"])
                    if cell["cause"] != "none":
                        top = (a.get("candidates") or [{}])[0]
                        causes_ok.append(
                            top.get("fact") == cell["cause"] and top.get("after") == caused(cell)
                        )
        for r in h.get("recovered", ()):
            cell = by_cell[r["cell"]]
            ends = night_of(r["ends"]["finished"])
            recoveries.append(cell["kind"] == "recovery" and abs(ends - cell["at"]) <= 3)
    steps = [c for c in lab if c["kind"] in ("step3", "step5", "recovery")]
    # the offline methods' own cases (pure noise, 3- and 5-sigma steps), judged the same way
    said_at = {}
    for h in said:
        for a in h.get("new", ()):
            said_at.setdefault((a["cell"], a["series"].split("@")[0]), []).append(night_of(a["finished"]))
    offline_cases = [(c, s) for c in lab if c["kind"] in ("noise", "step3", "step5") for s in METRICS]
    noise_said = [bool(said_at.get((c["cell"], s))) for c, s in offline_cases if c["kind"] == "noise"]
    steps_said = [
        any(abs(n - c["at"]) <= 3 for n in said_at.get((c["cell"], s), ()))
        for c, s in offline_cases
        if c["kind"] != "noise"
    ]
    missed = sum(1 for c in steps for s in METRICS if (c["cell"], s) not in first)
    return {
        "series": len(series),
        "false_alarm_series_pct": round(100 * len(false_series) / len(series), 2),
        "false_alarms": false_alarms,
        "false_alarms_per_series_night": false_alarms / (len(series) * NIGHTS),
        "false_alarms_by_how": how,
        "alarms_on_bad_nights": at_bad,
        "delay_nights": {
            k: {
                "median": float(np.median(v)),
                "same_night_pct": round(100 * np.mean(np.array(v) == 0), 1),
                "within_3_pct": round(100 * np.mean(np.array(v) <= 3), 1),
                "n": len(v),
            }
            for k, v in sorted(delays.items())
        },  # fmt: skip
        "delay_from_the_step_night_median": {k: float(np.median(v)) for k, v in sorted(late.items())},
        "same_night_from_the_step_night_pct": {
            k: round(100 * np.mean(np.array(v) == 0), 1) for k, v in sorted(late.items())
        },
        "steps_never_announced": missed,
        "right_cause_first_pct": round(100 * np.mean(causes_ok), 1) if causes_ok else None,
        "attributed_steps": len(causes_ok),
        "recoveries_naming_their_step": f"{sum(recoveries)}/{len(recoveries)}",
        "false_alarm_examples": examples[:12],
        "as_offline": {
            "noise_series": len(noise_said),
            "noise_with_cp": sum(noise_said),
            "steps": len(steps_said),
            "found": sum(steps_said),
        },
    }


def otava():
    try:
        from otava import analysis
    except ImportError:
        where = os.environ.get("DAYZERO_OTAVA")
        if not where:
            return None
        sys.path.append(where)
        from otava import analysis
    return analysis


def offline(lab: list[dict], work: Path) -> dict:
    """dayzero's change points, ruptures PELT and Otava on each series' final clean nights."""
    import ruptures

    from dayzero.history.store import open_store
    from dayzero.history.trends import clean_series

    ota = otava()
    methods = {
        "dayzero changes.detect": lambda x: [c.index for c in changes.detect(x)],
        "ruptures PELT (l2, pen 3 ln n, min 5)": lambda x: (
            ruptures.Pelt(model="l2", min_size=5, jump=1)
            .fit((np.asarray(x) - np.median(x)) / changes.noise(x))
            .predict(pen=3 * np.log(len(x)))[:-1]
        ),
    }
    if ota is not None:
        methods["Otava e-divisive (window 30, p 0.001)"] = lambda x: [
            int(c.index) for c in ota.compute_change_points(list(x), window_len=30, max_pvalue=0.001)[0]
        ]
    out = {
        m: {"noise_series": 0, "noise_with_cp": 0, "steps": 0, "found": 0, "seconds": 0.0} for m in methods
    }
    with open_store(work / "history.sqlite") as store:
        for cell in lab:
            if cell["kind"] not in ("noise", "step3", "step5"):
                continue
            for (_, _), (_, pts) in clean_series(store, cell["cell"]).items():
                x = [p.value for p in pts]
                nights = [night_of(p.finished) for p in pts]
                for name, method in methods.items():
                    t0 = time.monotonic()
                    cps = [nights[i] for i in method(x) if 0 < i < len(nights)]
                    out[name]["seconds"] += time.monotonic() - t0
                    if cell["kind"] == "noise":
                        out[name]["noise_series"] += 1
                        out[name]["noise_with_cp"] += bool(cps)
                    else:
                        out[name]["steps"] += 1
                        out[name]["found"] += any(abs(n - cell["at"]) <= 3 for n in cps)
    if ota is None:
        out["Otava"] = "not run: set DAYZERO_OTAVA to an unpacked apache-otava wheel"
    return out


def side_by_side(run: dict, offline: dict) -> str:
    """The nightly (night by night, `run`: the shipped bars) beside the offline searches, on the
    very same series of this run: pure-noise series given a change point (an alarm), and 3- and
    5-sigma steps found within 3 nights of their night."""
    o = run["as_offline"]
    rows = [
        "| method | pure-noise series with a change point (an alarm) | steps found within 3 nights | time |",
        "|---|---|---|---|",
        f"| dayzero nightly, night by night | {o['noise_with_cp']} of {o['noise_series']} "
        f"| {o['found']} of {o['steps']} | {run['replay_seconds']:.0f} s (each night ingested, judged) |",
    ]
    for name, o in offline.items():
        if isinstance(o, dict):
            rows.append(
                f"| {name}, whole series once | {o['noise_with_cp']} of {o['noise_series']} "
                f"| {o['found']} of {o['steps']} | {o['seconds']:.2f} s |"
            )
        else:
            rows.append(f"| {name} | {o} | | |")
    return "\n".join(rows)


SWEEP = (
    {"ANCHORED_Z": 3.0, "FREE_Z": 2.25, "SEARCH_T": 5.0},
    {},
    {"ANCHORED_Z": 4.5, "FREE_Z": 2.75, "SEARCH_T": 7.0},
)
# the co-movement gate: off (no change is a weak anchor), shipped, a stricter weak anchor's bar
GATE_SWEEP = ({"SHARED_MIN": 10**9}, {}, {"STRICT_Z": 6.0})


def _module(name: str):
    return alarms if hasattr(alarms, name) else causes


def run_once(lab: list[dict], seed: int, work: Path, settings: dict) -> tuple[dict, list[dict]]:
    """One replay with the alarms' bars set as given (the shipped ones where not), same nights."""
    shipped = {k: getattr(_module(k), k) for k in SETTINGS}
    for k, v in settings.items():
        setattr(_module(k), k, v)
    try:
        said, seconds = replay(lab, work, np.random.default_rng(seed + 1))
        used = {k: getattr(_module(k), k) for k in SETTINGS}
    finally:
        for k, v in shipped.items():
            setattr(_module(k), k, v)
    return {"settings": used, "replay_seconds": round(seconds, 1), **score(lab, said)}, said


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cells", type=int, default=60, help="cells, two series each (default 60)")
    ap.add_argument("--full", action="store_true", help="400 cells (800 series)")
    ap.add_argument("--sweep", action="store_true", help="also replay with looser and stricter bars")
    ap.add_argument(
        "--gate-sweep", action="store_true", help="also replay without the co-movement gate, and stricter"
    )
    ap.add_argument("--seed", type=int, default=41)
    ap.add_argument("--out", default="reports/bench/history_nightly.json")
    args = ap.parse_args(argv)
    cells = 400 if args.full else args.cells
    lab = plan(np.random.default_rng(args.seed), cells)
    for cell in lab:
        cell["shape"] = shape(cell)
    result = {
        **machine(),
        "load_before": load_average(),
        "cells": cells,
        "nights": NIGHTS,
        "seed": args.seed,
        "kinds": {k: sum(c["kind"] == k for c in lab) for k in KINDS},
    }
    runs = []
    sweep = SWEEP if args.sweep else GATE_SWEEP if args.gate_sweep else ({},)
    for settings in sweep:
        with tempfile.TemporaryDirectory(prefix="dayzero-nightly-bench-") as tmp:
            scored, _ = run_once(lab, args.seed, Path(tmp), settings)
            runs.append(scored)
            print(json.dumps(scored), flush=True)
            if not settings:
                result["offline"], shipped = offline(lab, Path(tmp)), scored
    result["nightly"] = runs
    result["load_after"] = load_average()
    write_result(ROOT / args.out, result)
    print(json.dumps(result, indent=1))
    print("\n" + side_by_side(shipped, result["offline"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
