"""The goldens this repository ships belong to cells of its matrix and were recorded under those
cells' recipes and the engine build that `tools/build-engine` makes: a fresh clone's first run
must not warn that its goldens came from another recipe or engine (issue 20)."""

from __future__ import annotations

import subprocess

import pytest

from dayzero.cache import LLAMA_CPP_PYTHON_VERSION, isa_level, server_binary
from dayzero.checks.near_tie import spells, steps
from dayzero.spec.engine_identity import parse, same_engine
from dayzero.spec.goldens import load_golden
from dayzero.spec.matrix import load_matrix
from dayzero.spec.recipe import digest

from .conftest import REPO

GOLDENS = REPO / "suites" / "goldens"
SHIPPED = sorted(GOLDENS.rglob("*.json"))
BUILD_SOURCE = f"llama-cpp-python {LLAMA_CPP_PYTHON_VERSION}"  # what tools/build-engine records


def shipped_build_banner() -> str | None:
    """What the cached llama-server reports through the card's version command, if it is built."""
    binary = server_binary()
    if not binary.exists():
        return None
    version = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=60)
    source = (binary.parent.parent / "SOURCE").read_text().strip()
    return f"{source} {(version.stdout + version.stderr).splitlines()[0]}"


def test_goldens_are_shipped():
    assert SHIPPED, f"no goldens under {GOLDENS}"


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(p.relative_to(GOLDENS)))
def test_a_shipped_golden_matches_its_cell(path):
    matrix = load_matrix(REPO / "matrix")
    cell_id = str(path.relative_to(GOLDENS).with_suffix(""))
    cells = {c.id: c for c in matrix.cells}
    assert cell_id in cells, f"{path}: no cell {cell_id} in the matrix (renamed? re-record or remove it)"
    cell = cells[cell_id]
    golden = load_golden(GOLDENS, cell_id)
    assert golden.cell == cell_id, f"{path}: names cell {golden.cell}"
    card = matrix.card(cell)
    recorded = golden.provenance.get("recipe_digest")
    assert recorded == digest(card, cell), (
        f"{path}: recorded under recipe {recorded}, the cell's is {digest(card, cell)}: "
        "re-record with `dayzero golden record`"
    )
    # goldens by log-probabilities (issue 39): every probe's tokens, spelling its text, and the
    # machine it was recorded on
    if card.mode(cell.mode).golden.by_tokens:
        assert set(golden.tokens) == set(golden.outputs), f"{path}: probes without log-probabilities"
        for probe, raw in golden.tokens.items():
            recorded_steps = steps(raw)
            assert recorded_steps and spells(recorded_steps, golden.outputs[probe]), f"{path}: {probe}"
            assert all(len(s.top) >= 5 for s in recorded_steps), f"{path}: {probe}: fewer than 5 alternatives"
        machine = golden.provenance.get("machine") or {}
        assert machine.get("arch") and machine.get("cpu"), f"{path}: no recording machine in its provenance"
    for alternate in golden.alternates:  # another machine's recording of the same recipe
        assert alternate["provenance"]["recipe_digest"] == recorded, f"{path}: an alternate of another recipe"
        assert set(alternate["outputs"]) == set(golden.outputs), f"{path}: an alternate of other probes"
    if card.engine.name != "llama.cpp":
        return  # no build of it ships with the repository to compare with
    # The pinned build answers alike on every CPU of its level (measured: this Intel Xeon with AMX,
    # an AMD EPYC with AVX2 only, qemu's EPYC-Rome): its goldens need no other machine's recording.
    assert not golden.alternates, f"{path}: a llama.cpp golden of the pinned build carries alternates"
    banner = golden.provenance.get("engine_version", "")
    identity = parse(banner)
    assert identity is not None and BUILD_SOURCE in identity.build and isa_level() in identity.build, (
        f"{path}: recorded under engine {banner!r}, not the build tools/build-engine makes "
        f"({BUILD_SOURCE}, built for {isa_level()})"
    )
    shipped = shipped_build_banner()
    if shipped is not None:
        assert same_engine(banner, shipped), (
            f"{path}: recorded under {banner!r}, the build reports {shipped!r}"
        )
