"""An inconclusive floor is never green, end to end (issue 41, item 2): a stub cell whose p99
floor rests on 4 requests (no p99 there: "not supported by n=4") is reported INCONCLUSIVE, its
evidence's verdict is `inconclusive`, the acceptance table says Inconclusive, and the run exits
7 (`exitcodes.INCONCLUSIVE`), neither 0 nor a product failure's 1."""

from __future__ import annotations

import json

import pytest

from dayzero import exitcodes

from .conftest import run_pytest
from .stub_cells import stub_card, stub_inventory, stub_matrix


@pytest.mark.e2e  # a real pytest run of a stub cell (no engine: ~10 s)
def test_a_p99_floor_on_four_requests_exits_inconclusive(tmp_path):
    card = stub_card(model="stubunsure")
    card["recipe"]["port"] = 18795
    card["modes"] = {"low_latency": card["modes"]["low_latency"]}
    card["cells"][0]["modes"] = ["low_latency"]
    card["floors"] = [
        {"metric": "p99_ttft_ms", "concurrency": "mode", "max": 1e9, "max_tokens": 8, "num_prompts": 4}
    ]
    mdir, inventory = stub_matrix(tmp_path, card), stub_inventory(tmp_path, slots=1)
    reports = tmp_path / "reports"
    result = run_pytest(
        "-q", "-m", "cpu", f"--matrix={mdir}", f"--hosts={inventory}", f"--reports={reports}", timeout=600
    )
    out = result.stdout + result.stderr
    assert result.returncode == exitcodes.INCONCLUSIVE == 7, out[-3000:]
    assert "inconclusive: stubunsure/cpu/low_latency/baseline: 1 floor(s) neither passed nor failed" in out
    assert "p99 not supported by n=4 -- inconclusive: the sample cannot support it" in out, out[-3000:]
    (doc,) = [json.loads(p.read_text()) for p in (reports / "evidence").glob("*.json")]
    assert doc["verdict"] == "inconclusive"
    (floor,) = [c for c in doc["checks"] if c["name"].startswith("floor:")]
    assert floor["verdict"] == "inconclusive" and floor["details"]["interval"]["n"] == 4
    table = (reports / "acceptance.md").read_text()
    assert "| `stubunsure/cpu/low_latency/baseline` | Inconclusive |" in table, table[-2000:]
