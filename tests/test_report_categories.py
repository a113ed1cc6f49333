"""Why a cell failed, as Allure categories: a lab fault, a recipe that never served, a missed floor.

Three one-cell models on the stub server, each failing one way, through a real pytest run and a
real report build; the categories are read from the report in Chromium. (The fourth category,
regression, is covered by tests/test_nightly.py.)
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from devlab.browser import AllureReportPage, Browser

from .conftest import REPO, run_pytest, write_yaml
from .stub_cells import stub_card, stub_inventory, stub_matrix


def one_cell(model: str, port: int, **changes) -> dict:
    card = stub_card(model=model)
    card["recipe"]["port"] = port
    card["modes"] = {"low_latency": card["modes"]["low_latency"]}
    card["cells"][0]["modes"] = ["low_latency"]
    for floor in card["floors"]:
        floor["num_prompts"] = 2
    for key, value in changes.items():
        section, _, field = key.partition("__")
        card[section][field] = value
    return card


@pytest.mark.e2e  # the report built by Allure 3 (Node.js)
def test_failed_and_broken_cells_land_in_their_categories(tmp_path):
    floor = one_cell("stubfloor", 18760)
    floor["floors"][0]["min"] = 1e9  # no server reaches it
    dead = one_cell("stubdead", 18770, recipe__command=["sh", "-c", "echo crashing; exit 3"])
    busy = one_cell("stubbusy", 18780)  # its port is taken by someone else: a lab fault
    mdir = stub_matrix(tmp_path, floor)
    for card in (dead, busy):
        write_yaml(mdir / "models" / f"{card['model']}.yaml", card)
    inventory = stub_inventory(tmp_path, slots=1)
    reports = tmp_path / "reports"
    squatter = socket.socket()
    squatter.bind(("127.0.0.1", 18780))
    squatter.listen()
    try:
        result = run_pytest(
            "-q", "-rA", "-m", "cpu", f"--matrix={mdir}", f"--hosts={inventory}", f"--reports={reports}",
            timeout=600,
        )  # fmt: skip
    finally:
        squatter.close()
    assert result.returncode == 1, result.stdout[-3000:]  # product failures beside a lab fault: 1
    assert "2 failed, 1 broken" in result.stdout, result.stdout[-3000:]

    by_cell = {}
    for path in (reports / "allure-results").glob("*-result.json"):
        doc = json.loads(path.read_text())
        labels = dict((x["name"], x["value"]) for x in doc["labels"] if x["name"] == "dayzero_category")
        by_cell[doc["name"]] = (doc["status"], labels.get("dayzero_category"))
    assert by_cell == {
        "stubfloor/cpu/low_latency/baseline": ("failed", "performance_floor"),
        "stubdead/cpu/low_latency/baseline": ("failed", "correctness"),
        "stubbusy/cpu/low_latency/baseline": ("broken", "infrastructure"),
    }

    built = subprocess.run(
        [sys.executable, "-m", "dayzero.cli", f"--matrix={mdir}", "report", f"--reports={reports}"],
        cwd=REPO, capture_output=True, text=True, timeout=600, env=dict(os.environ),
    )  # fmt: skip
    assert built.returncode == 0, built.stdout + built.stderr
    with Browser() as browser:
        text = AllureReportPage(browser, reports / "allure-report" / "index.html").categories()
    for name in ("Infrastructure (lab faults", "Correctness (wrong answers", "Performance floor missed"):
        assert f"{name}" in text, text
    assert "Product errors" not in text and "Test errors" not in text  # nothing fell through
