"""The nightly's alarms (history/alarms.py) and their ranked causes (history/causes.py): raised
once per change, persisting until a recovery that names it, gaps for broken nights, a rotating
host never the first cause. Seeded synthetic series, judged night by night as the nightly does."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("ruptures", reason="the 'history' extra (tools/setup installs it)")

from dayzero.history import alarms, causes, trends  # noqa: E402

from .history_nights import CELL, series_docs, write_nights  # noqa: E402


def replay(values, facts=None, higher=True):
    """Each night judged from the state the night before left: (night, word, alarm or recovery)."""
    facts = facts or [{"engine": "b1"}] * len(values)
    finished = [f"2026-09-{1 + i // 24:02d}T{i % 24:02d}:00:00+00:00" for i in range(len(values))]
    ids = [f"run{i}" for i in range(len(values))]
    state, said = alarms.State(), []
    for n in range(1, len(values) + 1):
        v = alarms.judge("c", "s", "lab", higher, values[:n], finished[:n], ids[:n], facts[:n], state)
        state = v.state
        said += [(n - 1, "new", a) for a in v.new] + [(n - 1, "recovered", r) for r in v.recovered]
        said += [(n - 1, "persist", a) for a in v.persist]
    return said, state


def noisy(seed: int, nights: int = 60, sigma: float = 0.02):
    return list(100 * (1 + sigma * np.random.default_rng(seed).standard_normal(nights)))


def test_a_step_raises_one_alarm_then_persists_every_night_after():
    values = noisy(1)
    values[30:] = [v - 12 for v in values[30:]]  # 6 sigma, nothing recorded changed
    said, state = replay(values)
    new = [(n, a) for n, w, a in said if w == "new"]
    assert len(new) == 1, new
    night, alarm = new[0]
    assert 30 <= night <= 33 and alarm.run_id == "run30"  # within three nights, at its own night
    assert [n for n, w, _ in said if w == "persist"] == list(range(night + 1, 60))
    assert state.open == (alarm,)


def test_a_step_that_came_with_a_recorded_change_is_raised_that_night():
    values = noisy(2)
    values[30:] = [v - 14 for v in values[30:]]  # 7 sigma
    facts = [{"engine": "b1"}] * 30 + [{"engine": "b2"}] * 30
    said, _ = replay(values, facts)
    ((night, alarm),) = [(n, a) for n, w, a in said if w == "new"]
    assert night == 30 and alarm.how == "recorded change"
    assert alarm.candidates[0].fact == "engine" and alarm.candidates[0].night == 30


def test_a_recovery_names_the_regression_it_ends_and_is_said_once():
    values = noisy(3, 70)
    values[25:45] = [v - 12 for v in values[25:45]]
    said, state = replay(values)
    (raised,) = [a for _, w, a in said if w == "new"]
    ((night, back),) = [(n, r) for n, w, r in said if w == "recovered"]
    assert 45 <= night <= 48 and back.ends == raised and back.run_id == "run45"
    assert f"ends the regression of {raised.finished[:10]}" in back.describe()
    assert state.open == () and not [n for n, w, _ in said if w == "persist" and n >= night]


def test_pure_noise_raises_nothing_night_by_night():
    quiet = 0
    for seed in range(20):
        said, _ = replay(noisy(100 + seed, 60))
        quiet += not said
    assert quiet == 20


def test_two_odd_nights_in_a_row_raise_nothing_without_a_recorded_change():
    values = noisy(4)
    values[40] -= 16  # 8 sigma, once
    values[50] -= 16
    values[51] -= 16  # twice in a row: a median of three is not moved by them alone
    assert replay(values)[0] == []


def test_a_night_with_no_point_persists_its_alarms_untested():
    alarm = alarms.Alarm("c", "s", "lab", "r1", "2026-09-01", "2026-09-01", 100.0, 80.0, 6.0, True, "tail")
    state = alarms.State("2026-09-01", (alarm,))
    verdict = alarms.judge(
        "c", "s", "lab", True, [100.0] * 20, ["x"] * 20, ["r"] * 20, [{}] * 20, state, False
    )
    assert verdict.persist == (alarm,) and verdict.state == state and not verdict.new


def test_candidates_are_ranked_a_rotating_host_last_a_harmless_bump_below_the_change_that_fits():
    values = noisy(5)
    values[40:] = [v - 8 for v in values[40:]]  # 4 sigma from night 40
    hosts = ["h1", "h2", "h3", "h4"]
    facts = [
        {"hosts": hosts[i % 4], "harness": "0.2" if i >= 38 else "0.1", "engine": "b2" if i >= 40 else "b1"}
        for i in range(60)
    ]
    found = causes.candidates(facts, [str(i) for i in range(60)], values, 40, 0, 2.0)
    order = [(c.fact, c.night) for c in found]
    assert order[0] == ("engine", 40) and ("harness", 38) in order
    assert order.index(("engine", 40)) < order.index(("harness", 38))
    assert all(c.rotating for c in found if c.fact == "hosts") and found[-1].fact == "hosts"
    # cells that moved with a candidate raise it (2 nats each) above a closer fit; never a rotating one
    engine = causes.Candidate("engine", "b1", "b2", 40, "d40", 3.0, False)
    harness = causes.Candidate("harness", "0.1", "0.2", 38, "d38", 6.0, False, comoved=2)
    host = causes.Candidate("hosts", "h1", "h2", 40, "d40", 0.0, True, comoved=9)
    assert [c.fact for c in causes.ranked([host, engine, harness])] == ["harness", "engine", "hosts"]
    assert causes.rotating(facts) == {"hosts"} and 40 in causes.informative(facts)


def test_broken_and_contended_nights_are_gaps_and_raise_nothing(tmp_path):
    values = [100.0 * (1 + 0.01 * ((i * 7) % 5 - 2)) for i in range(30)]
    docs = series_docs(values, accuracy=None)
    for night in (20, 21, 22):  # a broken run, then two measured on a contended host: 30% off
        docs[night]["checks"][0]["details"]["summaries"][0]["output_throughput"] = 70.0
    docs[20]["verdict"] = "broken"
    for night in (21, 22):
        docs[night]["checks"][0]["details"]["contended"] = {"decode": "local: host contended: load 3.0"}
    paths, state, said = write_nights(tmp_path / "nightly", docs), {}, []
    for path, doc in zip(paths, docs, strict=True):
        said.append(trends.night(tmp_path / "h.sqlite", path.parent.parent, {CELL: doc}, state))
        state = said[-1]["state"]
    assert not any(s["new"] or s["recovered"] for s in said)
    from dayzero.history.store import open_store

    with open_store(tmp_path / "h.sqlite") as store:
        series = trends.clean_series(store, CELL)
        assert {len(points) for _, points in series.values()} == {27}  # three gaps
        assert all(p.value > 90 for _, points in series.values() for p in points if "throughput" in p.facts)


def _shared_change_lab(tmp_path, tput, change):
    """Cells judged night by night through `trends.night`, each cell's throughput from `tput`,
    every cell making the recorded change `change` (facts) from night 24: the new alarms."""
    from .history_nights import night_doc

    cells, state, new = [f"m{c}/cpu+llama.cpp/low_latency/s" for c in range(len(tput))], {}, []
    for night in range(len(tput[0])):
        fixed = change if night >= 24 else {}
        docs = {
            cell: night_doc(night, tput[c][night], cell=cell, accuracy=None) for c, cell in enumerate(cells)
        }
        for doc in docs.values():
            doc["run"]["harness_version"] = fixed.get("harness", doc["run"]["harness_version"])
            doc["engine"]["version"] = fixed.get("engine", doc["engine"]["version"])
            path = write_nights(tmp_path / "nightly", [doc])[0]
        said = trends.night(tmp_path / "h.sqlite", path.parent.parent, docs, state)
        state = said["state"]
        new += [(night, a) for a in said["new"]]
    return cells, new


@pytest.mark.parametrize("odd", [4.3, 6.5])  # sigmas: one heavy-tailed night, under and past 5
def test_a_shared_change_that_moved_no_other_cell_is_no_anchor(tmp_path, odd):
    rng = np.random.default_rng(7)
    tput = 100 * (1 + 0.02 * rng.standard_normal((6, 30)))
    tput[0, 24] -= 100 * 0.02 * odd  # one odd night the night of a harness bump
    harness = [{"harness": "0.2.0" if n >= 24 else "0.1.0"} for n in range(30)]
    alone, _ = replay(list(tput[0]), harness)  # the series alone: the bump anchors it
    assert [(n, a.how) for n, w, a in alone if w == "new"] == [(24, "recorded change")]
    _, new = _shared_change_lab(tmp_path, tput, {"harness": "0.2.0"})
    assert new == []  # five other cells made the same bump and none moved: a weak anchor


def test_a_shared_change_that_moved_the_other_cells_keeps_the_anchored_bar(tmp_path):
    rng = np.random.default_rng(8)
    tput = 100 * (1 + 0.02 * rng.standard_normal((6, 30)))
    tput[:, 24:] -= 10  # every cell 5 sigma slower from the engine bump
    engine = [{"engine": "b4600" if n >= 24 else "b4500"} for n in range(30)]
    cells, new = _shared_change_lab(tmp_path, tput, {"engine": "b4600"})
    raised = {(a["cell"], n, a["how"]) for n, a in new if a["series"].startswith("output_throughput")}
    alone = {
        (cell, n, a.how)
        for cell, x in zip(cells, tput, strict=True)
        for n, w, a in replay(list(x), engine)[0]
        if w == "new"
    }
    assert raised == alone and {how for _, _, how in alone} == {"recorded change"} and len(alone) == 6


def test_one_labs_broken_night_is_no_gap_in_another_labs_series(tmp_path):
    """Run ids repeat across labs (one cron second): a broken night of lab b drops lab b's point
    of that run id only, not lab a's, in a series across labs."""
    import copy

    from dayzero.history.store import open_store

    values = [100.0] * 12
    docs = {lab: series_docs(values, accuracy=None) for lab in ("a", "b")}
    for lab, lab_docs in docs.items():
        for doc in lab_docs:
            doc["run"].update(lab=lab, controller=f"controller-{lab}")
    docs["b"][5]["verdict"] = "broken"
    night = docs["a"][5]["run"]["id"]
    assert docs["b"][5]["run"]["id"] == night
    with open_store(tmp_path / "h.sqlite") as store:
        store.ingest(
            (f"{lab}/{i}.json", copy.deepcopy(doc))
            for lab, lab_docs in docs.items()
            for i, doc in enumerate(lab_docs)
        )
        series = trends.clean_series(store, CELL)
        kept = {(p.lab, p.run_id) for _, points in series.values() for p in points}
    assert ("a", night) in kept and ("b", night) not in kept


def test_cells_already_moving_before_a_shared_change_do_not_count_as_moved_with_it(tmp_path):
    """A harness bump every cell made, two of them drifting down in the nights before it: they
    witness nothing of what the bump did (counted as moved, the bump was never a weak anchor and
    an odd night at it raised an alarm: the --full bench's 6 of 12 false alarms)."""
    rng = np.random.default_rng(7)
    tput = 100 * (1 + 0.02 * rng.standard_normal((12, 30)))
    tput[0, 24] -= 100 * 0.02 * 4.3  # one odd night (4.3 sigma) the night of the bump
    tput[1:3, 10:] -= 100 * 0.02 * np.arange(1, 21)  # drifting down a sigma a night from night 10
    harness = [{"harness": "0.2.0" if n >= 24 else "0.1.0"} for n in range(30)]
    alone, _ = replay(list(tput[0]), harness)
    assert [(n, a.how) for n, w, a in alone if w == "new"] == [(24, "recorded change")]
    cells, new = _shared_change_lab(tmp_path, tput, {"harness": "0.2.0"})
    assert [(n, a["how"]) for n, a in new if a["cell"] == cells[0]] == []
    drifting = [(alarms.moved_with(list(tput[c]), 24, -1.0)) for c in (1, 2)]
    assert drifting == [None, None]  # already moving: no witness either way
