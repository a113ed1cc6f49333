"""The routed and pd cells' router runs from a venv of sglang-router alone (tools/build-router):
from the engines venv its launcher also imports SGLang and torch (its mini load balancer takes
SGLang's tracing when it can), 7 s a start on a quiet 2-core machine and 17-19 s beside two
loading workers (measured), against ~1 s alone."""

from __future__ import annotations

import subprocess

import pytest
import yaml

from dayzero.cache import router_venv
from dayzero.spec.matrix import load_matrix

from .conftest import REPO

PROBE = (
    "import importlib.metadata as m, importlib.util as u; "
    "print(m.version('sglang-router'), u.find_spec('sglang') is not None)"
)


def test_the_router_venv_holds_the_pinned_router_and_not_sglang():
    python = router_venv() / "bin" / "python-router"
    if not python.exists():
        pytest.skip(f"{python} not built: run tools/build-router (tools/setup does)")
    out = subprocess.run([python, "-c", PROBE], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    version, has_sglang = out.stdout.split()
    assert has_sglang == "False", "SGLang is importable in the router venv: its launcher would import it"
    matrix = load_matrix(REPO / "matrix")  # every card and each of its engines' entries
    cards = (*matrix.cards.values(), *matrix.engine_cards.values())
    pins = {card.engine.router_package for card in cards if card.engine.router_package}
    assert pins == {f"sglang-router=={version}"}, (pins, version)


def test_the_smollm2_cells_start_their_router_from_the_router_venv():
    data = yaml.safe_load((REPO / "matrix" / "models" / "smollm2-135m.yaml").read_text())
    routers = [
        role["command"]
        for part in (data, *data["engines"].values())
        for mode in part.get("modes", {}).values()
        for role in (mode.get("roles") or {}).values()
        if "sglang_router.launch_router" in (role.get("command") or [])
    ]
    assert len(routers) == 3, routers  # llama.cpp routed, SGLang routed and pd
    assert {tuple(c[:3]) for c in routers} == {("python-router", "-m", "sglang_router.launch_router")}
