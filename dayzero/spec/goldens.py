"""Golden outputs per cell, with provenance (engine version, recipe digest, date); on a reference
cell also its tool-call answers (which tools each case of a tool-use suite called)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from dayzero import atomic
from dayzero.spec import yamlfile


@dataclass(frozen=True)
class Golden:
    cell: str
    policy: dict
    provenance: dict
    outputs: dict[str, str]
    tool_calls: dict[str, dict[str, list[str]]] = field(default_factory=dict)  # suite -> case -> names


def golden_path(goldens_dir: Path, cell_id: str) -> Path:
    return Path(goldens_dir) / f"{cell_id}.json"


def load_golden(goldens_dir: Path, cell_id: str) -> Golden | None:
    path = golden_path(goldens_dir, cell_id)
    if not path.exists():
        return None
    return Golden(**yamlfile.load(path, "golden"))


def save_golden(goldens_dir: Path, golden: Golden) -> Path:
    doc = {k: v for k, v in golden.__dict__.items() if k != "tool_calls" or v}
    return atomic.write_json(golden_path(goldens_dir, golden.cell), doc)
