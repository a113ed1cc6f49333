"""The results store: the same tests on SQLite and on a real PostgreSQL server.

The PostgreSQL server is a throwaway cluster (tools/devlab/postgres.py: Debian's initdb and
pg_ctl, a free loopback port) started once for the session under the e2e lock; each test gets
its own database in it.
"""

from __future__ import annotations

import itertools
import json
import shutil
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
        both = store.series(CELL, series, vendor=True)
        runs = store.runs(CELL)
    assert [(p.value, p.vendor) for p in both] == [(100.0, None), (140.0, "acme")]
    assert [r["source"] for r in runs] == ["dayzero", "acme"]


def test_the_store_is_rebuilt_from_the_evidence_folder(target, tmp_path):
    write_nights(tmp_path / "nightly", series_docs([100.0, 98.0, 97.0, 60.0]))
    with open_store(target) as store:
        assert store.ingest_folder(tmp_path / "nightly") == 4
        store.ingest([("stray.json", night_doc(9, 1.0, cell="other/cpu/m/s"))])  # not in the folder
        assert store.rebuild(tmp_path / "nightly") == 4
        assert store.cells() == [CELL]
        assert [p.value for p in store.series(CELL, "output_throughput@random-64-32/c1")][-1] == 60.0


def test_an_invalid_evidence_file_is_named(tmp_path):
    bad = tmp_path / "night" / "evidence" / "x.json"
    bad.parent.mkdir(parents=True)
    bad.write_text(json.dumps({"cell": "x"}))
    with (
        open_store(tmp_path / "h.sqlite") as store,
        pytest.raises(DayzeroError, match="x.json: .*not valid evidence"),
    ):
        store.ingest_folder(tmp_path)


def test_an_unreachable_postgresql_is_one_clear_error():
    pytest.importorskip("psycopg")
    with pytest.raises(DayzeroError, match=r"history store 127\.0\.0\.1:9/none"):
        open_store("postgresql://nobody@127.0.0.1:9/none?connect_timeout=2")
