"""`dayzero history` over a folder of nights, and the nightly words for regressions (new, persist,
recovered): synthetic nights with a planted slowdown whose recipe changed with it."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("ruptures", reason="the 'history' extra (tools/setup installs it)")

from dayzero.cli import main  # noqa: E402
from dayzero.history import trends  # noqa: E402
from dayzero.history.store import open_store  # noqa: E402

from .history_nights import CELL, WORKLOAD, night_doc, series_docs, write_nights  # noqa: E402

SERIES = f"output_throughput@{WORKLOAD}"
WOBBLE = [1.0, 1.02, 0.98, 1.01, 0.99, 1.0, 0.985, 1.015]  # +-2%, the same every run


def levels(*spans: tuple[int, float]) -> list[float]:
    """Nights at given levels with a fixed wobble: (number of nights, level), ..."""
    out: list[float] = []
    for count, level in spans:
        out += [level * WOBBLE[(len(out) + i) % len(WOBBLE)] for i in range(count)]
    return out


def run(capsys, *argv) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().out


def test_ingest_then_changes_finds_the_planted_slowdown_and_its_recipe(tmp_path, capsys):
    docs = series_docs(levels((15, 100.0), (15, 85.0)), changes={15: {"recipe": "fewer-threads"}})
    write_nights(tmp_path / "nightly", docs)
    store = str(tmp_path / "h.sqlite")
    code, out = run(capsys, "history", "ingest", str(tmp_path / "nightly"), "--store", store, "--json")
    assert code == 0 and json.loads(out)["ingested"] == 30
    run(capsys, "history", "ingest", str(tmp_path / "nightly"), "--store", store)  # again: idempotent

    code, out = run(capsys, "history", "changes", "--store", store, "--json", "--regressions")
    (change,) = json.loads(out)
    assert change["series"] == SERIES and change["run_id"] == docs[15]["run"]["id"]
    assert change["changed"] == {"recipe": ["370a065910226f54", "fewer-threads"]}
    assert change["change_pct"] == pytest.approx(-15, abs=1.5)

    code, out = run(
        capsys, "history", "changes", "--store", store, "--since", docs[16]["run"]["finished"][:10]
    )
    assert out.strip() == "(nothing)"

    code, out = run(capsys, "history", "series", CELL, SERIES, "--store", store, "--json")
    assert [p["value"] for p in json.loads(out)["points"]] == [d["checks"][0]["measured"] for d in docs]
    code, out = run(capsys, "history", "series", CELL, "--store", store)
    assert f"{SERIES} [unnamed]: 30 night(s)" in out


def test_a_shift_the_data_put_a_night_off_is_reported_at_the_night_its_recipe_changed(tmp_path, capsys):
    """3% under 2% noise: the series alone places the step a night off in a third of draws; the
    first such draw (found here, not chosen by hand) is reported at the recipe's night."""
    import numpy as np

    from dayzero.history import changes

    def draw(seed):
        x = 100 * (1 + 0.02 * np.random.default_rng(seed).standard_normal(60))
        x[30:] *= 0.97
        return [round(float(v), 3) for v in x]

    values = next(v for v in map(draw, range(200)) if [c.index for c in changes.detect(v)] in ([29], [31]))
    docs = series_docs(values, changes={30: {"recipe": "fewer-threads"}}, accuracy=None)
    write_nights(tmp_path / "nightly", docs)
    store = str(tmp_path / "h.sqlite")
    run(capsys, "history", "ingest", str(tmp_path / "nightly"), "--store", store)
    code, out = run(capsys, "history", "changes", "--store", store, "--json")
    (change,) = [c for c in json.loads(out) if c["series"] == SERIES]
    assert change["run_id"] == docs[30]["run"]["id"]
    assert change["changed"] == {"recipe": ["370a065910226f54", "fewer-threads"]}


def stored(capsys, store: str) -> list[str]:
    """Every stored run, as `dayzero history series` prints it (one line a night)."""
    code, out = run(capsys, "history", "series", CELL, SERIES, "--store", store)
    return out.splitlines()


def test_a_mistyped_or_empty_folder_is_refused_and_keeps_every_run(tmp_path, capsys):
    """Was: `ingest <mistyped folder> --rebuild` deleted every run and said '0 run(s) ingested', exit 0."""
    write_nights(tmp_path / "nightly", series_docs(levels((6, 100.0))))
    store = str(tmp_path / "h.sqlite")
    run(capsys, "history", "ingest", str(tmp_path / "nightly"), "--store", store)
    before = stored(capsys, store)
    (tmp_path / "empty" / "nights").mkdir(parents=True)
    for folder, why in ((tmp_path / "nigthly", "no such folder"), (tmp_path / "empty", "no evidence")):
        for rebuild in ([], ["--rebuild"]):
            assert main(["history", "ingest", str(folder), "--store", store, *rebuild]) == 2
            assert f"{folder}: <root>: {why}" in capsys.readouterr().err
    assert len(before) == 6 and stored(capsys, store) == before


def test_a_rebuild_refuses_to_delete_runs_whose_evidence_it_is_not_given(tmp_path, capsys):
    docs = series_docs(levels((6, 100.0)))
    write_nights(tmp_path / "old", docs[:3])
    write_nights(tmp_path / "new", docs[3:])
    store = str(tmp_path / "h.sqlite")
    run(capsys, "history", "ingest", str(tmp_path / "old"), str(tmp_path / "new"), "--store", store)
    before = stored(capsys, store)
    assert main(["history", "ingest", str(tmp_path / "new"), "--rebuild", "--store", store]) == 1
    assert "refused: 3 stored run(s) in the scope are not in the evidence given" in capsys.readouterr().err
    assert stored(capsys, store) == before
    since = docs[3]["run"]["finished"][:19]  # the scope of the new folder's nights: accepted
    code, out = run(
        capsys, "history", "ingest", str(tmp_path / "new"), "--rebuild", "--since", since, "--store", store
    )
    assert code == 0 and "3 run(s) ingested; 6 run(s) of 1 cell(s) stored" in out
    assert stored(capsys, store) == before
    assert (
        main(["history", "ingest", str(tmp_path / "new"), "--lab", "x", "--store", store]) == 2
    )  # scope needs --rebuild


def test_prune_forgets_runs_older_than_its_age(tmp_path, capsys):
    store = str(tmp_path / "h.sqlite")
    with open_store(store) as s:
        s.ingest((f"{i}.json", d) for i, d in enumerate(series_docs(levels((4, 100.0)))))  # 2026-09
    code, out = run(capsys, "history", "prune", "--older-than", "100000", "--store", store)
    assert code == 0 and "0 run(s) finished before" in out
    code, out = run(capsys, "history", "prune", "--older-than", "0", "--store", store, "--json")
    assert json.loads(out)["forgotten"] == 4


def test_series_of_an_unknown_cell_or_series_says_what_exists(tmp_path, capsys):
    store = str(tmp_path / "h.sqlite")
    with open_store(store) as s:
        s.ingest([("n.json", night_doc(0, 100.0))])
    assert main(["history", "series", "nope/cpu/a/b", "--store", store]) == 1
    assert "no runs of cell 'nope/cpu/a/b'" in capsys.readouterr().err
    assert main(["history", "series", CELL, "bogus", "--store", store]) == 1
    assert f"it has: accuracy:gsm8k-mini, median_ttft_ms@{WORKLOAD}, {SERIES}" in capsys.readouterr().err


def replay(tmp_path, docs) -> list[dict]:
    """The nights judged one by one as the nightly does: each ingested, its series judged from
    the state the night before left."""
    paths, said, state = write_nights(tmp_path / "nightly", docs), [], {}
    for path, doc in zip(paths, docs, strict=True):
        said.append(trends.night(tmp_path / "h.sqlite", path.parent.parent, {doc["cell"]: doc}, state))
        state = said[-1]["state"]
    return said


def words(said: list[dict]) -> list[str]:
    return [next((k for k in ("new", "recovered", "persist") if s[k]), "") for s in said]


def test_a_regression_is_new_once_then_persists_until_a_recovery_that_names_it(tmp_path):
    docs = series_docs(levels((20, 100.0), (10, 80.0), (10, 100.0)))  # nothing recorded changed
    said = replay(tmp_path, docs)
    said_words = words(said)
    first = said_words.index("new")
    assert 20 <= first <= 24 and not any(said_words[:first])  # found within five nights, not before
    assert said_words.count("new") == 1 and said[first]["new"][0]["series"] == SERIES
    back = said_words.index("recovered")
    assert 30 <= back <= 34 and set(said_words[first + 1 : back]) == {"persist"}
    (recovery,) = said[back]["recovered"]
    assert recovery["ends"]["run_id"] == said[first]["new"][0]["run_id"] == docs[20]["run"]["id"]
    assert "ends the regression of 2026-09-21" in recovery["message"]
    assert not any(said_words[back + 1 :])  # said once, then quiet


def test_a_quiet_history_has_nothing_to_say(tmp_path):
    assert not any(words(replay(tmp_path, series_docs(levels((30, 100.0))))))


def test_each_night_is_ingested_and_its_regression_raised_the_night_its_engine_changed(tmp_path):
    docs = series_docs(levels((20, 100.0), (8, 85.0)), changes={20: {"engine": "b4600"}})
    said = replay(tmp_path, docs)
    assert words(said)[:20] == [""] * 20 and words(said)[20] == "new"  # a 15% step with its cause: that night
    (new,) = [a for a in said[20]["new"] if a["series"] == SERIES]
    assert new["run_id"] == docs[20]["run"]["id"] and new["how"] == "recorded change"
    first = new["candidates"][0]
    assert (first["fact"], first["before"], first["after"]) == (
        "engine",
        "llama.cpp b4500",
        "llama.cpp b4600",
    )
    assert "from 2026-09-21" in new["message"] and all(s["persist"] for s in said[21:])
    assert all(not s["new"] for s in said[21:])


def test_a_night_without_a_reachable_store_says_why_and_goes_on(tmp_path):
    carried = {"a|b|c": {"since": "", "open": []}}
    said = trends.night("postgresql://nobody@127.0.0.1:9/none?connect_timeout=2", tmp_path, {}, carried)
    assert said["store"] == "127.0.0.1:9/none?connect_timeout=2" and "history store" in said["not_available"]
    assert said["state"] == carried  # what the night could not judge is carried as it was


def test_change_points_searched_in_two_processes_are_the_ones_searched_in_one(tmp_path):
    cells = [f"m/cpu/mode/s{i:02d}" for i in range(16)]
    with open_store(tmp_path / "h.sqlite") as store:
        for i, cell in enumerate(cells):
            values = levels((15, 100.0), (15, 100.0 - 2 * i))  # a step of 0-30%
            store.ingest((f"{cell}{n}", d) for n, d in enumerate(series_docs(values, cell=cell)))
        one = [c for cell in cells for c in trends.cell_changes(store, cell)]
    two = trends.every_change(tmp_path / "h.sqlite", cells, jobs=2)
    assert len(one) > 8 and two == one
