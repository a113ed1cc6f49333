"""Where the store's runs come from: the evidence files under folders, each read and validated once.

A source that does not exist, or holds no evidence, is refused before the store is touched: a
mistyped folder must never read as "0 runs" (and never empty a store under `--rebuild`). Files
are parsed and validated in worker processes, by the evidence schema compiled once (`valid`: a
real cell's document was ~1 ms of jsonschema, most of an ingest's time); the store receives
only their rows (`rows.Rows`), in file order. A vendor's evidence is read as the vendor's: the
accepted copy by its `submission`, a bundle's kept copy by where the reports keep it (`kept_by`).
"""

from __future__ import annotations

import functools
import json
import multiprocessing
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

import jsonschema

from dayzero import evidence
from dayzero.errors import ConfigError
from dayzero.history import valid
from dayzero.history.points import read
from dayzero.history.rows import Rows, rows_of
from dayzero.spec import yamlfile
from dayzero.spec.yamlfile import format_path


@functools.cache
def _check():
    try:
        return valid.compile_schema(yamlfile.schema("evidence"))
    except valid.Unsupported:  # a keyword the compiler lacks: every document goes to jsonschema
        return None


def _valid(doc: object) -> bool:
    check = _check()
    return check is not None and check(doc)


SUBMISSIONS_DIR = "submissions"  # where `submission accept` keeps bundles (submission.identity's)
PARALLEL_FROM = 2000  # files: below this, starting workers costs more than it saves
CHUNK = 256


def evidence_files(folders: Iterable[Path | str]) -> list[Path]:
    """Every `evidence/*.json` under each folder (a night, or a folder of nights), in order.
    Raises ConfigError naming a folder that does not exist or holds no evidence."""
    out: list[Path] = []
    for folder in map(Path, folders):
        if not folder.is_dir():
            what = "not a folder" if folder.exists() else "no such folder"
            raise ConfigError(folder, "", f"{what}: expected a night or a folder of nights")
        found = sorted(folder.rglob(f"{evidence.EVIDENCE_DIR}/*.json"))
        if not found:
            raise ConfigError(
                folder, "", f"no evidence: expected {evidence.EVIDENCE_DIR}/*.json at any depth under it"
            )
        out += found
    return out


def kept_by(path: Path) -> str | None:
    """The vendor whose accepted bundle keeps this file (reports/submissions/<vendor>/<bundle>/
    evidence/...: the bundle's own copy, which says `source: dayzero` as the vendor's harness
    wrote it), else None."""
    parents = Path(path).parents
    if len(parents) > 4 and parents[3].name == SUBMISSIONS_DIR and parents[0].name == evidence.EVIDENCE_DIR:
        return parents[2].name
    return None


def read_file(path: Path) -> Rows:
    """One evidence file as the store keeps it; a bad file is named with its field."""
    try:
        doc = json.loads(Path(path).read_bytes())
    except (OSError, ValueError) as exc:
        raise ConfigError(path, "", f"not valid evidence: {str(exc).splitlines()[0]}") from None
    if _valid(doc):
        return rows_of(path, read(doc, kept_by(path)))
    try:  # refused by the compiled check: jsonschema, the authority, says why (or lets it pass)
        evidence.validate(doc)
    except jsonschema.ValidationError as exc:
        raise ConfigError(
            path, format_path(exc.absolute_path), f"not valid evidence: {exc.message.splitlines()[0]}"
        ) from None
    return rows_of(path, read(doc, kept_by(path)))


def _read_or_error(path: Path) -> Rows | tuple[str, str, str]:
    """A worker's answer: a ConfigError does not survive pickling, so it comes back as its parts."""
    try:
        return read_file(path)
    except ConfigError as exc:
        return exc.file, exc.path, exc.message


def read_files(paths: Sequence[Path], jobs: int | None = None) -> list[Rows]:
    """Every file read, in order; in `jobs` processes (default: the machine's cores, at most 8)."""
    jobs = jobs or min(os.cpu_count() or 1, 8)
    if jobs < 2 or len(paths) < PARALLEL_FROM:
        return [read_file(p) for p in paths]
    with multiprocessing.get_context("fork").Pool(jobs) as pool:
        answers = pool.map(_read_or_error, paths, chunksize=CHUNK)
    for answer in answers:
        if not isinstance(answer, Rows):
            raise ConfigError(*answer)
    return answers  # type: ignore[return-value]
