"""The results store: every cell's evidence across nights, in SQLite or PostgreSQL, one schema.

SQLite (a file under the reports root, nothing to start) is the default; a lab whose
controllers share one database gives a PostgreSQL DSN (`postgresql://...`, psycopg 3, from the
'history' extra). The schema is a numbered list of migrations applied in order and recorded in
`schema_migrations`; both databases run the same SQL, only the parameter marker differs.

Ingest is idempotent by run: a (cell, run id) already stored is replaced, never doubled. The
evidence JSON is the source of truth: `rebuild` empties the store and ingests a folder again.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from dayzero import evidence
from dayzero.errors import DayzeroError
from dayzero.history.points import Run, read

DEFAULT_FILE = "history.sqlite"

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
)


@dataclass(frozen=True)
class SeriesPoint:
    run_id: str
    finished: str
    value: float
    vendor: str | None
    facts: dict[str, str]


class Store:
    """One connection to the history, its schema brought up to date on opening."""

    def __init__(self, conn, marker: str, where: str):
        self.conn, self.marker, self.where = conn, marker, where
        self._migrate()

    def _sql(self, sql: str) -> str:
        return sql.replace("?", self.marker)

    def _execute(self, sql: str, params: tuple = ()):
        cur = self.conn.cursor()
        cur.execute(self._sql(sql), params)
        return cur

    def _migrate(self) -> None:
        self._execute("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY)")
        done = {row[0] for row in self._execute("SELECT version FROM schema_migrations").fetchall()}
        for version, statements in enumerate(MIGRATIONS, start=1):
            if version in done:
                continue
            for statement in statements:
                self._execute(statement)
            self._execute("INSERT INTO schema_migrations (version) VALUES (?)", (version,))
        self.conn.commit()

    @property
    def version(self) -> int:
        return self._execute("SELECT MAX(version) FROM schema_migrations").fetchone()[0] or 0

    def ingest(self, docs: Iterable[tuple[Path | str, dict]]) -> int:
        """Store each (path, evidence document); one transaction. Returns how many runs."""
        count = 0
        with self._pipeline():
            for path, doc in docs:
                self._put(read(doc), str(path))
                count += 1
        self.conn.commit()
        return count

    def _pipeline(self):
        """PostgreSQL's pipeline mode: statements sent without waiting for each answer (a round
        trip per statement made a year of nights 46 s); SQLite is in-process and needs none."""
        pipeline = getattr(self.conn, "pipeline", None)
        return pipeline() if pipeline else contextlib.nullcontext()

    def _put(self, run: Run, path: str) -> None:
        key = (run.cell, run.run_id)
        self._execute("DELETE FROM points WHERE cell = ? AND run_id = ?", key)
        self._execute("DELETE FROM runs WHERE cell = ? AND run_id = ?", key)
        self._execute(
            "INSERT INTO runs (cell, run_id, finished, source, vendor, verdict, facts, path)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                *key,
                run.finished,
                run.source,
                run.vendor,
                run.verdict,
                json.dumps(run.facts, sort_keys=True),
                path,
            ),
        )
        rows = [(*key, p.series, p.value, int(p.higher_is_better)) for p in run.points]
        if rows:
            cur = self.conn.cursor()
            cur.executemany(
                self._sql(
                    "INSERT INTO points (cell, run_id, series, value, higher_is_better)"
                    " VALUES (?, ?, ?, ?, ?)"
                ),
                rows,
            )

    def ingest_folder(self, root: Path) -> int:
        """Every evidence document under `root`: a night (`root/evidence`) or a folder of nights."""
        root = Path(root)
        folders = sorted({p.parent.parent for p in root.rglob(f"{evidence.EVIDENCE_DIR}/*.json")})
        return sum(self.ingest(evidence.iter_evidence(folder)) for folder in folders)

    def rebuild(self, root: Path) -> int:
        """The store again from the evidence: emptied, then every document under `root` ingested."""
        self._execute("DELETE FROM points")
        self._execute("DELETE FROM runs")
        self.conn.commit()
        return self.ingest_folder(root)

    def cells(self) -> list[str]:
        return [r[0] for r in self._execute("SELECT DISTINCT cell FROM runs ORDER BY cell").fetchall()]

    def series_names(self, cell: str) -> list[tuple[str, bool]]:
        rows = self._execute(
            "SELECT DISTINCT series, higher_is_better FROM points WHERE cell = ? ORDER BY series", (cell,)
        ).fetchall()
        return [(r[0], bool(r[1])) for r in rows]

    def series(self, cell: str, series: str, vendor: bool = False) -> list[SeriesPoint]:
        """One series in time order: the lab's own runs, or with `vendor` accepted vendor runs too."""
        rows = self._execute(
            "SELECT r.run_id, r.finished, p.value, r.vendor, r.facts FROM points p"
            " JOIN runs r ON r.cell = p.cell AND r.run_id = p.run_id"
            " WHERE p.cell = ? AND p.series = ?"
            + ("" if vendor else " AND r.vendor IS NULL")
            + " ORDER BY r.finished, r.run_id",
            (cell, series),
        ).fetchall()
        return [SeriesPoint(r[0], r[1], float(r[2]), r[3], json.loads(r[4])) for r in rows]

    def runs(self, cell: str) -> list[dict]:
        rows = self._execute(
            "SELECT run_id, finished, source, vendor, verdict, path FROM runs"
            " WHERE cell = ? ORDER BY finished, run_id",
            (cell,),
        ).fetchall()
        keys = ("run_id", "finished", "source", "vendor", "verdict", "path")
        return [dict(zip(keys, r, strict=True)) for r in rows]

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
            return Store(psycopg.connect(text), "%s", text.split("@")[-1])
        except psycopg.OperationalError as exc:
            raise DayzeroError(f"history store {text.split('@')[-1]}: {str(exc).strip()}") from None
    path = Path(text)
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA foreign_keys = ON")
    return Store(conn, "?", str(path))
