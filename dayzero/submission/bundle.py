"""The bundle's closed set of files, and what a check looks at (`Subject`) and against (`Reference`).

Layout (paths as in a reports directory, so evidence's `records` and `logs` resolve unchanged):

    manifest.json        vendor + sha256 and size of every other file (signed)
    manifest.json.sig    `ssh-keygen -Y sign -n dayzero` signature of manifest.json
    submission.json      vendor, system description, harness version and clean-tree proof,
                         matrix digest, claimed cells
    evidence/<cell>__<run>.json                 one evidence document per claimed cell
    runs/<run>/<cell>/records/<phase>.json      raw per-request records (`dayzero.run.records`)
    runs/<run>/<cell>/records/<phase>.metrics.json  the server's /metrics before and after it
    runs/<run>/<cell>/logs/<file>               server logs
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dayzero.run import records
from dayzero.spec.matrix import Matrix

MANIFEST = "manifest.json"
SIGNATURE = "manifest.json.sig"
SUBMISSION = "submission.json"
NAMESPACE = "dayzero"
SCHEMA_VERSION = 1

# Vendor names become file names and ssh-keygen identities: keep them boring.
VENDOR = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
PART = r"[A-Za-z0-9._+@=-]+"
LAYOUT = (re.compile(rf"^evidence/{PART}\.json$"), *map(re.compile, records.patterns(PART)))
TOP_FILES = (MANIFEST, SIGNATURE, SUBMISSION)


def in_layout(name: str) -> bool:
    return name in TOP_FILES or any(p.fullmatch(name) for p in LAYOUT)


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with Path(path).open("rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


@dataclass(frozen=True)
class Bundle:
    """A bundle safely extracted into `root`: only regular files, only the names in `files`."""

    root: Path
    files: tuple[str, ...]
    sha256: str = ""

    def path(self, name: str) -> Path:
        return self.root / name

    def has(self, name: str) -> bool:
        return name in self.files


@dataclass(frozen=True, eq=False)  # hashed by identity: checks share one recompute per subject
class Subject:
    """What the checks look at: the bundle and its documents that parsed and passed their schema."""

    bundle: Bundle
    manifest: dict[str, Any] | None = None
    submission: dict[str, Any] | None = None
    evidence: dict[str, dict] = field(default_factory=dict)  # bundle file -> evidence document
    records: dict[str, dict] = field(default_factory=dict)  # bundle file -> raw records document
    metrics: dict[str, dict] = field(default_factory=dict)  # bundle file -> a phase's /metrics snapshots

    @property
    def vendor(self) -> str:
        for doc in (self.manifest, self.submission):
            if doc and isinstance(doc.get("vendor"), str):
                return doc["vendor"]
        return ""

    def evidence_for(self, cell_id: str) -> list[tuple[str, dict]]:
        return [(name, doc) for name, doc in sorted(self.evidence.items()) if doc["cell"] == cell_id]


@dataclass(frozen=True, eq=False)
class Reference:
    """What the checks compare against: the maintainers' matrix, goldens and allowed signers."""

    matrix: Matrix
    goldens_dir: Path
    allowed_signers: Path
    known_commit: Callable[[str], bool] | None = None
    commit_time: Callable[[str], float | None] | None = None  # when a known commit was made (epoch s)
    now: Callable[[], float] = time.time  # the check time: no run may be dated after it
    version_at: Callable[[str], str | None] | None = None  # the harness version a known commit carries
