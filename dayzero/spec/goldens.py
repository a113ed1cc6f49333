"""Golden outputs per cell, with provenance (engine version, recipe digest, date)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dayzero import atomic
from dayzero.spec import yamlfile


@dataclass(frozen=True)
class Golden:
    cell: str
    policy: dict
    provenance: dict
    outputs: dict[str, str]


def golden_path(goldens_dir: Path, cell_id: str) -> Path:
    return Path(goldens_dir) / f"{cell_id}.json"


def load_golden(goldens_dir: Path, cell_id: str) -> Golden | None:
    path = golden_path(goldens_dir, cell_id)
    if not path.exists():
        return None
    return Golden(**yamlfile.load(path, "golden"))


def save_golden(goldens_dir: Path, golden: Golden) -> Path:
    return atomic.write_json(golden_path(goldens_dir, golden.cell), golden.__dict__)
