"""The matrix a calibration runs: each model card less the phases that measure no floor.

`dayzero floors calibrate` needs each cell's floors phase alone, N times: the card's sweeps,
accuracy gate, tool calls and speculative acceptance (top level and each `engines:` entry) feed
no floor and take a third of the main job's time (591 s on 2 cores; its floors phase alone about
390). Probes and goldens stay (a cell answering wrongly is not one whose speed makes a floor),
and so do the floors, workloads, SLOs and every recipe: the copy has the same cells, launched
the same way.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path

import yaml

from dayzero import atomic
from dayzero.spec import yamlfile
from dayzero.spec.matrix import ENGINES, MODELS_DIR

NOT_FLOORS = ("sweeps", "accuracy", "tool_calls", "speculative")


def _less(data: Mapping) -> dict:
    return {k: v for k, v in data.items() if k not in NOT_FLOORS}


def floors_only(card: Mapping) -> dict:
    """A card's data without the phases that measure no floor (the argument is left as it was)."""
    out = _less(card)
    if card.get(ENGINES):
        out[ENGINES] = {name: _less(entry) for name, entry in card[ENGINES].items()}
    return out


def write_copy(matrix_root: Path, dest: Path) -> Path:
    """A copy of the matrix at `dest` (which must not exist) whose cards are `floors_only`'s; the
    hardware catalogue, templates and floors files as they are."""
    shutil.copytree(matrix_root, dest)
    for path in sorted((dest / MODELS_DIR).glob("*.yaml")):
        data = floors_only(yamlfile.load(path, "model_card"))
        head = f"# {Path(matrix_root) / MODELS_DIR / path.name} less {', '.join(NOT_FLOORS)}"
        atomic.write_text(
            path, f"{head} (dayzero/spec/floorsonly.py)\n" + yaml.safe_dump(data, sort_keys=False)
        )
    return dest
