"""The results store: every cell's evidence across nights and labs, in SQLite or PostgreSQL.

SQLite (a file under the reports root, nothing to start) is the default; labs whose controllers
share one database give a PostgreSQL DSN (`postgresql://...`, psycopg 3, from the 'history'
extra). The schema is a numbered list of migrations applied in order, under a lock, and recorded
in `schema_migrations`; both databases run the same SQL, only the parameter marker and the bulk
load differ.

A run is keyed by its cell and a globally unique id, the controller that ran it and its run id
there (`points.uid`), and belongs to a **lab**: a series is one lab's unless asked across labs.
A vendor's accepted run is keyed and filed under its origin (`vendor:<vendor>`: uid and lab), so
it never takes a lab run's place nor joins a lab's series.
Ingest is one transaction and idempotent (the same night twice is one night; a run again replaces
itself). The evidence JSON is the source of truth: `replace` deletes a scope (a lab, a time range)
and ingests again, and refuses to delete a run it is not given again.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from dayzero.errors import DayzeroError
from dayzero.history.points import UNNAMED_LAB, read
from dayzero.history.rows import Rows, rows_of

DEFAULT_FILE = "history.sqlite"
ACROSS_LABS = "*"  # as a lab: every lab's runs in one series

_RUN_COLUMNS = "uid, cell, lab, controller, run_id, finished, source, vendor, verdict, facts, path"
_RUNS = """(
    uid TEXT NOT NULL, cell TEXT NOT NULL, lab TEXT NOT NULL, controller TEXT NOT NULL,
    run_id TEXT NOT NULL, finished TEXT NOT NULL, source TEXT NOT NULL, vendor TEXT,
    verdict TEXT NOT NULL, facts TEXT NOT NULL, path TEXT NOT NULL"""
_POINT_COLUMNS = "uid, cell, series, value, higher_is_better, lo, hi"
_POINTS = """(
    uid TEXT NOT NULL, cell TEXT NOT NULL, series TEXT NOT NULL,
    value DOUBLE PRECISION NOT NULL, higher_is_better INTEGER NOT NULL"""  # as schema 3 made it
_INTERVAL = ", lo DOUBLE PRECISION, hi DOUBLE PRECISION"  # schema 6


# the uid a run stored before schema 3 (no controller) has: a vendor's moved to its origin (5)
def _schema_2_uid(a: str = "") -> str:
    return f"(CASE WHEN {a}vendor IS NULL THEN '' ELSE 'vendor:' || {a}vendor || ':' END) || '/' || {a}run_id"


MIGRATIONS = (
    # 1: runs (one per cell run, its facts as JSON text) and their points (one per series)
    (
        """CREATE TABLE runs (
            cell TEXT NOT NULL, run_id TEXT NOT NULL, finished TEXT NOT NULL,
            source TEXT NOT NULL, vendor TEXT, verdict TEXT NOT NULL, facts TEXT NOT NULL,
            path TEXT NOT NULL, PRIMARY KEY (cell, run_id))""",
        """CREATE TABLE points (
            cell TEXT NOT NULL, run_id TEXT NOT NULL, series TEXT NOT NULL,
            value DOUBLE PRECISION NOT NULL, higher_is_better INTEGER NOT NULL,
            PRIMARY KEY (cell, run_id, series),
            FOREIGN KEY (cell, run_id) REFERENCES runs (cell, run_id) ON DELETE CASCADE)""",
        "CREATE INDEX points_series ON points (cell, series)",
    ),
    # 2: a cell's runs in time order, for its series and the nightly report
    ("CREATE INDEX runs_finished ON runs (cell, finished)",),
    # 3: runs of many labs: keyed by (uid, cell), uid = controller/run id (two controllers' runs in
    # one second were one); a lab per run. Runs of schema 2 have no controller recorded: uid
    # '/run id', lab 'unnamed', until their evidence is ingested again (it replaces them).
    (
        f"CREATE TABLE runs_v3 {_RUNS}, PRIMARY KEY (uid, cell))",
        f"INSERT INTO runs_v3 ({_RUN_COLUMNS}) SELECT '/' || run_id, cell, '{UNNAMED_LAB}', '', run_id,"
        " finished, source, vendor, verdict, facts, path FROM runs",
        f"""CREATE TABLE points_v3 {_POINTS}, PRIMARY KEY (uid, cell, series),
            FOREIGN KEY (uid, cell) REFERENCES runs_v3 (uid, cell) ON DELETE CASCADE)""",
        "INSERT INTO points_v3 (uid, cell, series, value, higher_is_better)"
        " SELECT '/' || run_id, cell, series, value, higher_is_better FROM points",
        "DROP TABLE points",
        "DROP TABLE runs",
        "ALTER TABLE runs_v3 RENAME TO runs",
        "ALTER TABLE points_v3 RENAME TO points",
        "CREATE INDEX points_series_v3 ON points (cell, series)",
        "CREATE INDEX runs_lab_finished ON runs (cell, lab, finished)",
        "CREATE INDEX runs_finished_v3 ON runs (finished)",
    ),
    # 4: a cell's points are found through its runs (runs_lab_finished, then the points' key):
    # an index of its own on ~1M points was half the SQLite write of a year (8.0 -> 4.1 s of CPU)
    ("DROP INDEX points_series_v3",),
    # 5: a vendor's run is keyed and filed under its origin (points.uid, points.vendor_lab): one
    # stored under a lab's controller and run id (or a lab's name) moves to its own. A lab's night
    # such a run had replaced comes back when the lab's evidence is ingested again.
    (
        f"INSERT INTO runs ({_RUN_COLUMNS}) SELECT 'vendor:' || vendor || ':' || uid, cell,"
        " 'vendor:' || vendor, controller, run_id, finished, vendor, vendor, verdict, facts, path"
        " FROM runs WHERE vendor IS NOT NULL AND substr(uid, 1, 7) <> 'vendor:'",
        "INSERT INTO points (uid, cell, series, value, higher_is_better)"
        " SELECT 'vendor:' || r.vendor || ':' || p.uid, p.cell, p.series, p.value, p.higher_is_better"
        " FROM points p JOIN runs r ON r.uid = p.uid AND r.cell = p.cell"
        " WHERE r.vendor IS NOT NULL AND substr(r.uid, 1, 7) <> 'vendor:'",
        "DELETE FROM points WHERE (uid, cell) IN"
        " (SELECT uid, cell FROM runs WHERE vendor IS NOT NULL AND substr(uid, 1, 7) <> 'vendor:')",
        "DELETE FROM runs WHERE vendor IS NOT NULL AND substr(uid, 1, 7) <> 'vendor:'",
    ),
    # 6: a point's interval where its evidence gives one (`points.Point`: lo, hi; NULL where the
    # sample supports none, and in points stored before, until their evidence is ingested again)
    (
        "ALTER TABLE points ADD COLUMN lo DOUBLE PRECISION",
        "ALTER TABLE points ADD COLUMN hi DOUBLE PRECISION",
    ),
)


@dataclass(frozen=True)
class SeriesPoint:
    run_id: str
    finished: str
    value: float
    vendor: str | None
    facts: dict[str, str]
    lab: str = UNNAMED_LAB
    lo: float | None = None  # the value's interval, where its evidence gave one
    hi: float | None = None


@dataclass(frozen=True)
class Scope:
    """Which stored runs a rebuild replaces or a retention forgets: a lab (None: every lab) and
    finished times in [since, until) (ISO, UTC; empty: unbounded)."""

    lab: str | None = None
    since: str = ""
    until: str = ""

    def where(self, alias: str = "") -> tuple[str, tuple]:
        a = f"{alias}." if alias else ""
        clauses, params = ["1 = 1"], []
        bounds = (
            (f"{a}lab = ?", self.lab),
            (f"{a}finished >= ?", self.since),
            (f"{a}finished < ?", self.until),
        )
        for sql, value in bounds:
            if value:
                clauses.append(sql)
                params.append(value)
        return " AND ".join(clauses), tuple(params)


class Refused(DayzeroError):
    """A rebuild would delete runs it is not given again: nothing was changed."""


class Store:
    """One connection to the history, its schema brought up to date on opening."""

    def __init__(self, conn, marker: str, where: str, postgres: bool = False):
        self.conn, self.marker, self.where, self.postgres = conn, marker, where, postgres
        self._migrate()

    def _sql(self, sql: str) -> str:
        return sql.replace("?", self.marker)

    def _execute(self, sql: str, params: tuple = ()):
        cur = self.conn.cursor()
        cur.execute(self._sql(sql), params)
        return cur

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        """One transaction, holding the write lock from its start (SQLite's BEGIN IMMEDIATE: two
        writers queue instead of failing half way); rolled back on any error."""
        if self.postgres:
            with self.conn.transaction():
                yield
            return
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    def _migrate(self) -> None:
        with self._transaction():
            if self.postgres:  # two controllers opening a new store at once: one migrates
                self._execute("SELECT pg_advisory_xact_lock(43043)")
            self._execute("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY)")
            done = {row[0] for row in self._execute("SELECT version FROM schema_migrations").fetchall()}
            for version, statements in enumerate(MIGRATIONS, start=1):
                if version in done:
                    continue
                for statement in statements:
                    self._execute(statement)
                self._execute("INSERT INTO schema_migrations (version) VALUES (?)", (version,))

    @property
    def version(self) -> int:
        return self._execute("SELECT MAX(version) FROM schema_migrations").fetchone()[0] or 0

    # --- writing ------------------------------------------------------------------------------

    def ingest(self, docs: Iterable[tuple[Path | str, dict]]) -> int:
        """Store each (path, evidence document) in one transaction (documents the caller has
        validated); a run stored before is replaced. Returns how many runs."""
        return self.put([rows_of(path, read(doc)) for path, doc in docs])

    def ingest_folder(self, *folders: Path | str, jobs: int | None = None) -> int:
        """Every evidence document under the folders (a night, or a folder of nights), each file
        validated once; a folder that does not exist or holds no evidence is refused."""
        from dayzero.history import sources

        return self.put(sources.read_files(sources.evidence_files(folders), jobs))

    def rebuild(
        self,
        *folders: Path | str,
        scope: Scope | None = None,
        drop_missing: bool = False,
        jobs: int | None = None,
    ) -> int:
        """The runs in `scope` (default: every run) made again from the evidence under the folders,
        in one transaction; refused if a run in the scope has no evidence there (`put`)."""
        from dayzero.history import sources

        rows = sources.read_files(sources.evidence_files(folders), jobs)
        return self.put(rows, scope or Scope(), drop_missing)

    def put(self, rows: Sequence[Rows], scope: Scope | None = None, drop_missing: bool = False) -> int:
        """Store the runs (`rows_of`) in one transaction; with a `scope`, first delete the stored
        runs in it. Refuses (`Refused`, nothing changed) when a run in the scope is not among
        them, unless `drop_missing`: a rebuild deletes only what it is given again. Returns how
        many runs."""
        unique = {r.key: r for r in rows}  # one night in two folders is one
        rows = [unique[k] for k in sorted(unique)]  # one lock order for every writer
        for attempt in range(3):
            try:
                with self._transaction():
                    self._load(rows)
                    if scope is not None:
                        self._delete_scope(scope, drop_missing)
                    self._merge()
                return len(rows)
            except Exception as exc:  # a deadlock between two PostgreSQL writers: the loser retries
                if attempt == 2 or type(exc).__name__ not in ("DeadlockDetected", "SerializationFailure"):
                    raise
        return len(rows)

    def _load(self, rows: Sequence[Rows]) -> None:
        """The incoming runs and points into temporary tables (this connection's own)."""
        self._execute(f"CREATE TEMP TABLE IF NOT EXISTS incoming_runs {_RUNS})")
        self._execute(f"CREATE TEMP TABLE IF NOT EXISTS incoming_points {_POINTS}{_INTERVAL})")
        self._execute("DELETE FROM incoming_runs")
        self._execute("DELETE FROM incoming_points")
        self._bulk("incoming_runs", _RUN_COLUMNS, [r.run for r in rows])
        self._bulk("incoming_points", _POINT_COLUMNS, [p for r in rows for p in r.points])

    def _bulk(self, table: str, columns: str, rows: Sequence[tuple]) -> None:
        """PostgreSQL's COPY (a round trip per row made a year of nights minutes); SQLite is in
        process, its executemany as fast."""
        cur = self.conn.cursor()
        if self.postgres:
            with cur.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
            return
        marks = ", ".join("?" * (columns.count(",") + 1))
        cur.executemany(f"INSERT INTO {table} ({columns}) VALUES ({marks})", rows)

    def _delete_scope(self, scope: Scope, drop_missing: bool) -> None:
        where, params = scope.where("r")
        missing = self._execute(
            f"SELECT r.cell, r.lab, r.run_id, r.path FROM runs r WHERE {where} AND NOT EXISTS"
            " (SELECT 1 FROM incoming_runs i WHERE i.cell = r.cell"
            f" AND (i.uid = r.uid OR {_schema_2_uid('i.')} = r.uid))"
            " ORDER BY r.finished",
            params,
        ).fetchall()
        if missing and not drop_missing:
            first = missing[0]
            raise Refused(
                f"refused: {len(missing)} stored run(s) in the scope are not in the evidence given "
                f"(first: {first[0]} run {first[2]} of lab {first[1]}, from {first[3]}); nothing changed. "
                "Give their folders too, narrow the scope (--lab, --since, --until), or forget them "
                "on purpose (--drop-missing)"
            )
        self._execute(f"DELETE FROM runs WHERE {scope.where()[0]}", params)

    def _merge(self) -> None:
        """The incoming runs over the stored ones: their points replaced, a run of schema 2 (no
        controller) replaced by the same run ingested again."""
        self._execute(
            f"DELETE FROM runs WHERE controller = '' AND uid IN (SELECT {_schema_2_uid()} FROM incoming_runs)"
        )
        self._execute("DELETE FROM points WHERE (uid, cell) IN (SELECT uid, cell FROM incoming_runs)")
        updates = ", ".join(f"{c} = excluded.{c}" for c in _RUN_COLUMNS.split(", ")[2:])
        self._execute(
            f"INSERT INTO runs ({_RUN_COLUMNS}) SELECT {_RUN_COLUMNS} FROM incoming_runs WHERE 1 = 1"
            f" ORDER BY uid, cell ON CONFLICT (uid, cell) DO UPDATE SET {updates}"
        )
        self._execute(
            f"INSERT INTO points ({_POINT_COLUMNS}) SELECT {_POINT_COLUMNS} FROM incoming_points WHERE 1 = 1"
            " ORDER BY uid, cell, series ON CONFLICT (uid, cell, series)"
            " DO UPDATE SET value = excluded.value, higher_is_better = excluded.higher_is_better,"
            " lo = excluded.lo, hi = excluded.hi"
        )

    def forget(self, scope: Scope) -> int:
        """Retention: delete the stored runs in `scope` (their evidence stays where it is)."""
        where, params = scope.where()
        with self._transaction():
            return self._execute(f"DELETE FROM runs WHERE {where}", params).rowcount

    # --- reading ------------------------------------------------------------------------------

    def cells(self) -> list[str]:
        return [r[0] for r in self._execute("SELECT DISTINCT cell FROM runs ORDER BY cell").fetchall()]

    def labs(self, cell: str | None = None) -> list[str]:
        """The labs with runs (of `cell`), in name order."""
        sql, params = (
            ("SELECT DISTINCT lab FROM runs", ())
            if cell is None
            else (
                "SELECT DISTINCT lab FROM runs WHERE cell = ?",
                (cell,),
            )
        )
        return [r[0] for r in self._execute(sql + " ORDER BY lab", params).fetchall()]

    def latest_lab(self, cell: str) -> str | None:
        """The lab of the cell's newest run of a lab (a picture drawn without a lab named is of
        it; a vendor's runs are in their own series, shown only when asked for)."""
        row = self._execute(
            "SELECT lab FROM runs WHERE cell = ? AND vendor IS NULL ORDER BY finished DESC, uid DESC LIMIT 1",
            (cell,),
        ).fetchone()
        return row[0] if row else None

    def series_names(self, cell: str) -> list[tuple[str, bool]]:
        rows = self._execute(
            "SELECT DISTINCT p.series, p.higher_is_better FROM runs r"
            " JOIN points p ON p.uid = r.uid AND p.cell = r.cell WHERE r.cell = ? ORDER BY p.series",
            (cell,),
        ).fetchall()
        return [(r[0], bool(r[1])) for r in rows]

    def series(
        self, cell: str, series: str, vendor: bool = False, lab: str | None = None
    ) -> list[SeriesPoint]:
        """One series in time order: one lab's runs (None: the lab of the cell's newest run;
        ACROSS_LABS: every lab's), its own or with `vendor` accepted vendor runs too."""
        lab = lab or self.latest_lab(cell) or ACROSS_LABS
        found = self.cell_series(cell, vendor=vendor, lab=lab)
        return next((pts for (_, name), (_, pts) in found.items() if name == series), [])

    def cell_series(
        self, cell: str, vendor: bool = False, lab: str | None = None
    ) -> dict[tuple[str, str], tuple[bool, list[SeriesPoint]]]:
        """Every series of a cell in one query: (lab, series) -> (higher is better, points in time
        order). `lab` None: each lab's series apart; a lab: its own only; ACROSS_LABS: the labs'
        runs in one series each (the key's lab is ACROSS_LABS)."""
        clauses, params = ["r.cell = ?"], [cell]
        if lab not in (None, ACROSS_LABS):
            clauses.append("r.lab = ?")
            params.append(lab)
        if not vendor:
            clauses.append("r.vendor IS NULL")
        rows = self._execute(
            "SELECT r.lab, p.series, p.higher_is_better, r.run_id, r.finished, p.value, r.vendor, r.facts,"
            " p.lo, p.hi"
            " FROM runs r JOIN points p ON p.uid = r.uid AND p.cell = r.cell WHERE "
            + " AND ".join(clauses)
            + " ORDER BY p.series, r.finished, r.uid",
            tuple(params),
        ).fetchall()
        facts: dict[str, dict] = {}  # a run's facts text, parsed once for all its series
        out: dict[tuple[str, str], tuple[bool, list[SeriesPoint]]] = {}
        for run_lab, name, higher, run_id, finished, value, vendor_name, text, lo, hi in rows:
            key = (ACROSS_LABS if lab == ACROSS_LABS else run_lab, name)
            out.setdefault(key, (bool(higher), []))
            parsed = facts.get(text)
            if parsed is None:
                parsed = facts[text] = json.loads(text)
            out[key][1].append(
                SeriesPoint(run_id, finished, float(value), vendor_name, parsed, run_lab, lo, hi)
            )
        return out

    def runs(self, cell: str, lab: str = ACROSS_LABS) -> list[dict]:
        clauses, params = "cell = ?", (cell,)
        if lab != ACROSS_LABS:
            clauses, params = "cell = ? AND lab = ?", (cell, lab)
        rows = self._execute(
            "SELECT run_id, lab, controller, finished, source, vendor, verdict, path FROM runs"
            f" WHERE {clauses} ORDER BY finished, uid",
            params,
        ).fetchall()
        keys = ("run_id", "lab", "controller", "finished", "source", "vendor", "verdict", "path")
        return [dict(zip(keys, r, strict=True)) for r in rows]

    def count(self) -> int:
        return self._execute("SELECT COUNT(*) FROM runs").fetchone()[0]

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open_store(target: str | Path) -> Store:
    """A DSN (`postgresql://` or `postgres://`) opens PostgreSQL; anything else is a SQLite file."""
    text = str(target)
    if text.startswith(("postgresql://", "postgres://")):
        try:
            import psycopg
        except ImportError:
            raise DayzeroError(
                "a PostgreSQL history needs psycopg 3: "
                "pip install 'dayzero[history]' (tools/setup installs it)"
            ) from None
        try:
            return Store(psycopg.connect(text), "%s", text.split("@")[-1], postgres=True)
        except psycopg.OperationalError as exc:
            raise DayzeroError(f"history store {text.split('@')[-1]}: {str(exc).strip()}") from None
    path = Path(text)
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, timeout=300, isolation_level=None)  # transactions are ours (_transaction)
    conn.execute("PRAGMA foreign_keys = ON")
    # a year of a lab's points is ~1M index entries: the default 2 MB page cache thrashes on them
    conn.execute("PRAGMA cache_size = -131072")
    conn.execute("PRAGMA temp_store = MEMORY")
    return Store(conn, "?", str(path))
