"""Identity of a run: one set of records backs one cell of one vendor, however it is re-encoded.

A records file is known by what it says, not by its bytes: the sha256 of its canonical JSON
(keys sorted, no whitespace) and, per request that streamed at least `MIN_CHUNKS` chunks, the
fingerprint of its chunk arrival times (offsets from its own send, kept to the microsecond by
the host client, so shifting a run in time or renaming its requests keeps them). Two honest runs
never stream a request with the same eight or more arrival times to the microsecond; a replayed
one always does. Within a bundle no two records files may share a fingerprint (one run cannot
back two cells, or two phases); across bundles the accepted index remembers every key
(`load_index`, written by `dayzero.submission.accept`), with the vendor and bundle it came from,
and the lab's own runs in its reports are known by the same keys (`lab_index`): a lab run
re-signed by a vendor is the lab's, never the vendor's.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

from dayzero import evidence
from dayzero.errors import ConfigError
from dayzero.run.records import is_records_file
from dayzero.submission.bundle import Reference, Subject, sha256_file
from dayzero.submission.findings import Finding, short

MIN_CHUNKS = 8  # fewer arrival times could meet by chance across millions of records
SUBMISSIONS_DIR = "submissions"  # under the reports: the accepted bundles, and the index of their keys
INDEX = f"{SUBMISSIONS_DIR}/index.json"
LAB = "dayzero"  # the origin of the lab's own runs (evidence `source`), as the index names it


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def canonical(doc) -> str:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def request_fingerprints(answer: dict) -> list[str]:
    """One per record that streamed MIN_CHUNKS chunks or more: its chunk offsets, nothing else."""
    out = []
    for r in answer.get("records") or ():
        chunks = r.get("chunks") if isinstance(r, dict) else None
        if isinstance(chunks, list) and len(chunks) >= MIN_CHUNKS:
            out.append("request:" + _sha(canonical(chunks))[:32])
    return out


def keys(answer: dict) -> list[str]:
    """Every key a records file is known by: its canonical content, then its requests."""
    return ["content:" + _sha(canonical(answer)), *request_fingerprints(answer)]


def run_files(s: Subject) -> Iterator[tuple[str, str, list[str]]]:
    """(cell, records file, keys) of every client records file the evidence names (the /metrics
    snapshots of two fresh servers may be identical; a client's timings never are). The bytes'
    sha256 stays a key, so an index written before canonical keys still answers."""
    for _, doc in sorted(s.evidence.items()):
        for rel in doc.get("records", []):
            if is_records_file(rel) and rel in s.records:
                yield doc["cell"], rel, [sha256_file(s.bundle.path(rel)), *keys(s.records[rel])]


def replays(s: Subject, vendor: str, index: dict[str, dict]) -> list[Finding]:
    """Records accepted before from another vendor or for another cell, or the lab's own run
    (an index entry of origin LAB: `lab_index`), whoever claims it and for whichever cell."""
    out = []
    for cell, rel, known_by in run_files(s):
        prior = next(
            (
                p
                for k in known_by
                if (p := index.get(k)) and (p["vendor"] == LAB or (p["vendor"], p["cell"]) != (vendor, cell))
            ),
            None,
        )
        if prior is not None:
            whose = (
                f"the lab's own run of {prior['cell']}"
                if prior["vendor"] == LAB
                else f"already accepted from {prior['vendor']} for {prior['cell']}"
            )
            out.append(
                Finding(
                    rel,
                    "identity.replay",
                    f"records of {short(prior['file'], 80)}: {whose}",
                    f"records of {vendor}'s own run of {cell}",
                )
            )
    return out


def _lab_runs(reports_dir: Path) -> Iterator[tuple[str, str, dict]]:
    """(cell, records file, its records) of every run of the lab's own evidence in the reports."""
    for path in sorted((Path(reports_dir) / evidence.EVIDENCE_DIR).glob("*.json")):
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # not evidence the lab can vouch for: the acceptance table names it
        if not isinstance(doc, dict) or "submission" in doc or doc.get("source", LAB) != LAB:
            continue
        for rel in doc.get("records") or ():
            file = Path(reports_dir) / str(rel)
            if isinstance(rel, str) and is_records_file(rel) and file.is_file():
                try:
                    yield str(doc.get("cell", "?")), rel, json.loads(file.read_text())
                except (OSError, ValueError):
                    continue


def lab_index(reports_dir: Path) -> dict[str, dict]:
    """Every key of the lab's own records in its reports, as index entries of origin LAB."""
    out: dict[str, dict] = {}
    for cell, rel, answer in _lab_runs(reports_dir):
        for k in keys(answer):
            out.setdefault(k, {"vendor": LAB, "cell": cell, "bundle_sha256": "", "file": rel})
    return out


def known_runs(reports_dir: Path) -> dict[str, dict]:
    """What a bundle is held against: the accepted index, and the lab's own runs over it."""
    return {**load_index(reports_dir), **lab_index(reports_dir)}


def index_entries(s: Subject, vendor: str, bundle_sha256: str) -> dict[str, dict]:
    """What the accepted index learns from a bundle: each key -> where it was first accepted."""
    out: dict[str, dict] = {}
    for cell, rel, known_by in run_files(s):
        for k in known_by:
            out.setdefault(k, {"vendor": vendor, "cell": cell, "bundle_sha256": bundle_sha256, "file": rel})
    return out


def load_index(reports_dir: Path) -> dict[str, dict]:
    """A key of an accepted records file (`keys`) -> {vendor, cell, bundle_sha256, file}."""
    path = Path(reports_dir) / INDEX
    if not path.exists():
        return {}
    try:
        index = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(path, "", f"not a readable submissions index: {exc}") from None
    if not isinstance(index, dict) or not all(isinstance(v, dict) for v in index.values()):
        raise ConfigError(path, "", "expected a mapping of key to {vendor, cell, bundle_sha256, file}")
    return index


def check_one_run_per_phase(s: Subject, ref: Reference) -> list[Finding]:
    """No two records files of a bundle share a request's timings or their whole content."""
    first: dict[str, tuple[str, str]] = {}  # key -> (cell, file)
    out = []
    for cell, rel, known_by in run_files(s):
        shared = [first[k] for k in known_by[1:] if k in first and first[k][1] != rel]
        for k in known_by[1:]:
            first.setdefault(k, (cell, rel))
        if shared:
            other_cell, other = shared[0]
            out.append(
                Finding(
                    rel,
                    "identity.one-run",
                    f"{len(shared)} record(s) or content of {short(other, 80)} ({short(other_cell, 80)})",
                    "a run of its own for every cell and phase",
                )
            )
    return out


CHECKS = (check_one_run_per_phase,)
