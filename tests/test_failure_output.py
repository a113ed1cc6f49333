"""What the terminal shows for a failed cell (issue 45): its check lines and where its evidence
is, not ~35 lines of dayzero's own source (fixtures, the test function); `--tb` still gives the
source to whoever asks. One stub cell on the local host whose floor no server reaches.
"""

from __future__ import annotations

import pytest

from .conftest import run_pytest
from .stub_cells import stub_card, stub_inventory, stub_matrix


@pytest.fixture(scope="module")
def floor_cell(tmp_path_factory):
    root = tmp_path_factory.mktemp("floor")
    card = stub_card(model="stubfloor")
    card["recipe"]["port"] = 18790
    card["modes"] = {"low_latency": card["modes"]["low_latency"]}
    card["cells"][0]["modes"] = ["low_latency"]
    card["floors"] = card["floors"][:1]
    card["floors"][0].update(num_prompts=2, min=1e9)  # no server reaches it
    return root, stub_matrix(root, card), stub_inventory(root, slots=1)


def failed_run(floor_cell, *extra):
    root, mdir, inventory = floor_cell
    reports = root / f"reports{len(extra)}"
    result = run_pytest(
        "-q", "-m", "cpu", f"--matrix={mdir}", f"--hosts={inventory}", f"--reports={reports}", *extra,
        timeout=600,
    )  # fmt: skip
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout, reports


@pytest.mark.e2e  # a real pytest run of a stub cell
def test_a_failed_cell_shows_its_check_lines_and_its_evidence_not_our_source(floor_cell):
    out, reports = failed_run(floor_cell)
    evidence = next((reports / "evidence").glob("*.json"))
    assert "stubfloor/cpu/low_latency/baseline: 1 check(s) failed" in out, out[-3000:]
    assert f"evidence: {evidence}" in out, out[-3000:]
    for source in ("def run(", "run_cell_checked", "fixtures.py", "def test_cell", "AssertionError"):
        assert source not in out, (source, out[-3000:])


@pytest.mark.e2e
def test_tb_long_still_shows_the_source(floor_cell):
    out, _ = failed_run(floor_cell, "--tb=long")
    assert "1 check(s) failed" in out and "def test_cell" in out, out[-3000:]
