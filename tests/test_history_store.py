"""The results store: the same tests on SQLite and on a real PostgreSQL server.

The PostgreSQL server is a throwaway cluster (tools/devlab/postgres.py: Debian's initdb and
pg_ctl, a free loopback port) started once for the session under the e2e lock; each test gets
its own database in it.
"""

from __future__ import annotations

import itertools
import json
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from dayzero.errors import DayzeroError
from dayzero.history import store as history_store
from dayzero.history.store import open_store

from .history_nights import CELL, night_doc, series_docs, write_nights
from .slurm_bed import e2e_lock

_databases = itertools.count()


@pytest.fixture(scope="session")
def postgres_server():
    psycopg = pytest.importorskip("psycopg", reason="the 'history' extra (tools/setup installs it)")
    from devlab import postgres

    try:
        postgres.bindir()
    except RuntimeError as exc:
        pytest.skip(str(exc))
    directory = Path(tempfile.mkdtemp(prefix="dayzero-postgres-"))  # the server's user must reach it
    try:
        with e2e_lock():
            dsn = postgres.start(directory)
            try:
                yield dsn, psycopg
            finally:
                postgres.stop(directory)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.e2e)])
def target(request, tmp_path):
    """Where a fresh store lives: a SQLite file, or a new database on the session's server."""
    if request.param == "sqlite":
        return tmp_path / "history.sqlite"
    dsn, psycopg = request.getfixturevalue("postgres_server")
    name = f"history_{next(_databases)}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return dsn.rsplit("/", 1)[0] + f"/{name}"


def test_schema_is_made_by_numbered_migrations_once(target):
    with open_store(target) as store:
        assert store.version == len(history_store.MIGRATIONS)
    with open_store(target) as store:  # reopening applies nothing twice
        assert store.version == len(history_store.MIGRATIONS)


def test_ingest_is_idempotent_by_run(target):
    docs = series_docs([100.0, 101.0, 99.0])
    with open_store(target) as store:
        assert store.ingest((f"n{i}.json", d) for i, d in enumerate(docs)) == 3
        store.ingest([("again.json", docs[1])])  # the same run again: replaced, not doubled
        points = store.series(CELL, "output_throughput@random-64-32/c1")
    assert [p.value for p in points] == [100.0, 101.0, 99.0]


def test_a_series_is_in_time_order_with_its_facts(target):
    docs = series_docs([100.0, 90.0, 95.0], changes={1: {"recipe": "beef"}})
    with open_store(target) as store:
        store.ingest(reversed([(f"n{i}.json", d) for i, d in enumerate(docs)]))
        assert store.cells() == [CELL]
        names = dict(store.series_names(CELL))
        points = store.series(CELL, "median_ttft_ms@random-64-32/c1")
    assert names == {
        "accuracy:gsm8k-mini": True,
        "median_ttft_ms@random-64-32/c1": False,
        "output_throughput@random-64-32/c1": True,
    }
    assert [p.finished for p in points] == sorted(p.finished for p in points)
    assert [p.facts["recipe"] for p in points] == ["370a065910226f54", "beef", "beef"]


def test_vendor_evidence_is_stored_marked_and_kept_out_of_the_labs_series(target):
    with open_store(target) as store:
        store.ingest([("lab.json", night_doc(0, 100.0)), ("acme.json", night_doc(1, 140.0, vendor="acme"))])
        series = "output_throughput@random-64-32/c1"
        assert [p.value for p in store.series(CELL, series)] == [100.0]
        assert [p.value for p in store.series(CELL, series, vendor=True)] == [100.0]  # the lab's own
        both = store.series(CELL, series, vendor=True, lab=history_store.ACROSS_LABS)
        apart = store.cell_series(CELL, vendor=True)
        runs = store.runs(CELL)
    assert [(p.value, p.vendor) for p in both] == [(100.0, None), (140.0, "acme")]
    # the vendor's values in a series of their own (issue 42, item 3), marked
    assert [(p.value, p.vendor) for p in apart[("vendor:acme", series)][1]] == [(140.0, "acme")]
    assert [r["source"] for r in runs] == ["dayzero", "acme"]


def test_the_store_is_rebuilt_from_the_evidence_folder(target, tmp_path):
    write_nights(tmp_path / "nightly", series_docs([100.0, 98.0, 97.0, 60.0]))
    with open_store(target) as store:
        assert store.ingest_folder(tmp_path / "nightly") == 4
        store.ingest([("stray.json", night_doc(9, 1.0, cell="other/cpu/m/s"))])  # not in the folder
        with pytest.raises(history_store.Refused, match=r"1 stored run\(s\) .* other/cpu/m/s .* stray\.json"):
            store.rebuild(tmp_path / "nightly")
        assert store.count() == 5  # refused: nothing changed
        assert store.rebuild(tmp_path / "nightly", drop_missing=True) == 4  # forgotten on purpose
        assert store.cells() == [CELL]
        assert [p.value for p in store.series(CELL, "output_throughput@random-64-32/c1")][-1] == 60.0


def test_an_invalid_evidence_file_is_named_with_its_field(tmp_path):
    bad = tmp_path / "night" / "evidence" / "x.json"
    bad.parent.mkdir(parents=True)
    doc = night_doc(0, 100.0)
    doc["run"]["finished"] = "yesterday"
    bad.write_text(json.dumps(doc))
    with (
        open_store(tmp_path / "h.sqlite") as store,
        pytest.raises(
            DayzeroError, match=r"x\.json: run\.finished: not valid evidence: 'yesterday' does not match"
        ),
    ):
        store.ingest_folder(tmp_path)


def test_the_same_night_ingested_twice_is_one_night(target, tmp_path):
    """From the same folder again, and from a copy of it elsewhere (a night copied off a controller)."""
    write_nights(tmp_path / "nightly", series_docs([100.0, 98.0, 97.0]))
    shutil.copytree(tmp_path / "nightly", tmp_path / "copy")
    with open_store(target) as store:
        store.ingest_folder(tmp_path / "nightly")
        store.ingest_folder(tmp_path / "nightly")
        assert store.ingest_folder(tmp_path / "nightly", tmp_path / "copy") == 3  # one of each night
        assert store.count() == 3
        assert len(store.series(CELL, "output_throughput@random-64-32/c1")) == 3


def test_two_controllers_nights_of_one_cell_in_the_same_second_are_two_runs_of_two_labs(target):
    """The nightly's run id was the UTC second: two labs' nights of one cell replaced each other,
    and one series interleaved both labs' values (every switch a change point)."""
    same = "nightly-20261206T023000Z"
    docs = [night_doc(0, 100.0, lab="lab-a", controller="ctl", run_id=same)]
    docs += [night_doc(0, 50.0, lab="lab-b", controller="ctl-2", run_id=same)]
    series = "output_throughput@random-64-32/c1"
    with open_store(target) as store:
        store.ingest((f"{i}.json", d) for i, d in enumerate(docs))
        assert store.count() == 2 and store.labs(CELL) == ["lab-a", "lab-b"]
        assert [p.value for p in store.series(CELL, series, lab="lab-a")] == [100.0]
        assert [p.value for p in store.series(CELL, series, lab="lab-b")] == [50.0]
        assert sorted(p.value for p in store.series(CELL, series, lab=history_store.ACROSS_LABS)) == [
            50.0,
            100.0,
        ]
        apart = store.cell_series(CELL)
    assert {lab for lab, name in apart if name == series} == {"lab-a", "lab-b"}


def test_series_of_two_labs_apart_show_no_change_point_across_labs(target):
    """Two labs a fifth apart, one running the cell after the other: apart, neither series moves;
    in one series (what a cell's series was before labs), the switch reads as a change point."""
    pytest.importorskip("ruptures")
    from dayzero.history import trends

    docs = [night_doc(n, 100.0 + (n % 3), lab="lab-a", controller="a") for n in range(30)]
    docs += [night_doc(n, 80.0 + (n % 3), lab="lab-b", controller="b") for n in range(30, 60)]
    with open_store(target) as store:
        store.ingest((f"{i}.json", d) for i, d in enumerate(docs))
        apart = trends.cell_changes(store, CELL)
        across = trends.cell_changes(store, CELL, lab=history_store.ACROSS_LABS)
    assert apart == []
    assert {c.lab for c in across} == {history_store.ACROSS_LABS} and across


def test_a_rebuild_is_scoped_by_lab_and_time(target, tmp_path):
    a = series_docs([100.0, 101.0, 99.0], lab="lab-a", controller="a")
    b = series_docs([50.0, 51.0], lab="lab-b", controller="b")
    write_nights(tmp_path / "a", a)
    with open_store(target) as store:
        store.ingest((f"{i}.json", d) for i, d in enumerate(a + b))
        store.ingest([("late.json", night_doc(40, 1.0, lab="lab-a", controller="a"))])  # no evidence on disk
        # lab a's first three nights again: lab b's runs and the late night are out of scope
        until = night_doc(10, 0.0)["run"]["finished"][:10]
        assert store.rebuild(tmp_path / "a", scope=history_store.Scope("lab-a", until=until)) == 3
        assert store.count() == 6
        with pytest.raises(history_store.Refused):  # the late night is in lab a's whole scope
            store.rebuild(tmp_path / "a", scope=history_store.Scope("lab-a"))
        assert store.count() == 6


def test_retention_forgets_runs_older_than_a_date_per_lab(target):
    docs = series_docs([100.0] * 5, lab="lab-a", controller="a") + series_docs(
        [50.0] * 5, lab="lab-b", controller="b"
    )
    cut = docs[3]["run"]["finished"]
    with open_store(target) as store:
        store.ingest((f"{i}.json", d) for i, d in enumerate(docs))
        assert store.forget(history_store.Scope("lab-a", until=cut)) == 3
        assert [p.value for p in store.series(CELL, "output_throughput@random-64-32/c1", lab="lab-b")] == [
            50.0
        ] * 5
        assert len(store.runs(CELL, lab="lab-a")) == 2
        assert store.forget(history_store.Scope(until=cut)) == 3


def _schema_2_store(target, docs) -> None:
    """A store as the code before schema 3 left it: migrations 1-2, runs keyed by (cell, run id)."""
    from dayzero.history.points import read

    postgres = str(target).startswith("postgresql://")
    if postgres:
        import psycopg

        conn, mark = psycopg.connect(str(target)), "%s"
    else:
        conn, mark = sqlite3.connect(target), "?"
    cur = conn.cursor()
    cur.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY)")
    for version, statements in enumerate(history_store.MIGRATIONS[:2], start=1):
        for statement in statements:
            cur.execute(statement)
        cur.execute(f"INSERT INTO schema_migrations (version) VALUES ({mark})", (version,))
    for i, doc in enumerate(docs):
        run = read(doc)
        cur.execute(
            "INSERT INTO runs (cell, run_id, finished, source, vendor, verdict, facts, path)"
            f" VALUES ({', '.join([mark] * 8)})",
            (
                run.cell,
                run.run_id,
                run.finished,
                run.source,
                run.vendor,
                run.verdict,
                json.dumps(run.facts),
                f"{i}.json",
            ),
        )
        for p in run.points:
            cur.execute(
                "INSERT INTO points (cell, run_id, series, value, higher_is_better)"
                f" VALUES ({', '.join([mark] * 5)})",
                (run.cell, run.run_id, p.series, p.value, int(p.higher_is_better)),
            )
    conn.commit()
    conn.close()


def test_a_store_of_the_previous_schema_is_migrated_with_nothing_lost(target):
    docs = series_docs([100.0, 90.0, 95.0], changes={1: {"recipe": "beef"}})
    docs.append(night_doc(3, 140.0, vendor="acme"))
    _schema_2_store(target, docs)
    series = "output_throughput@random-64-32/c1"
    with open_store(target) as store:
        assert store.version == len(history_store.MIGRATIONS) == 6
        # schema 5: the vendor's run moved to its own origin (uid and lab), its points with it
        assert store.count() == 4 and store.labs() == ["unnamed", "vendor:acme"]
        points = store.series(CELL, series, vendor=True, lab=history_store.ACROSS_LABS)
        assert [(p.value, p.vendor) for p in points] == [
            (100.0, None),
            (90.0, None),
            (95.0, None),
            (140.0, "acme"),
        ]
        assert [p.facts["recipe"] for p in points[:3]] == ["370a065910226f54", "beef", "beef"]
        assert {(p.lo, p.hi) for p in points} == {(None, None)}  # schema 6: no interval stored before
        assert dict(store.series_names(CELL))[series] is True
        # their evidence ingested again replaces them (now with controller and lab), never doubles
        store.ingest((f"{i}.json", d) for i, d in enumerate(docs))
        assert store.count() == 4
        assert {r["controller"] for r in store.runs(CELL)} == {"ci-1"}


def test_two_controllers_ingesting_into_one_postgresql_at_once_lose_and_double_nothing(
    postgres_server, tmp_path
):
    """Two processes of `dayzero history ingest`, started together, each its lab's nights and a
    night both were given (a copied folder), into one fresh database: every run once."""
    dsn, psycopg = postgres_server
    name = f"history_{next(_databases)}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    target = dsn.rsplit("/", 1)[0] + f"/{name}"
    shared = night_doc(0, 70.0, cell="other/cpu/m/s", lab="lab-c", controller="c")
    for lab in ("lab-a", "lab-b"):
        cells = [f"m/cpu/mode/s{i:02d}" for i in range(20)]
        docs = [night_doc(n, 100.0, cell=c, lab=lab, controller=lab) for c in cells for n in range(30)]
        write_nights(tmp_path / lab, [*docs, shared])
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "dayzero.cli",
                "history",
                "ingest",
                str(tmp_path / lab),
                "--store",
                target,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for lab in ("lab-a", "lab-b")
    ]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    with open_store(target) as store:
        assert store.count() == 2 * 20 * 30 + 1
        assert store.labs() == ["lab-a", "lab-b", "lab-c"]
        assert all(
            len(store.runs(f"m/cpu/mode/s{i:02d}", lab=lab)) == 30
            for i in range(20)
            for lab in ("lab-a", "lab-b")
        )


def test_an_unreachable_postgresql_is_one_clear_error():
    pytest.importorskip("psycopg")
    with pytest.raises(DayzeroError, match=r"history store 127\.0\.0\.1:9/none"):
        open_store("postgresql://nobody@127.0.0.1:9/none?connect_timeout=2")
