"""Prices come from the lab: a `--prices` file replaces the catalogue's price per accelerator-hour,
and a real cpu cell's card prints cost per 1M output tokens from it.

The end-to-end test runs one llama.cpp cell (low_latency/baseline: the short protocol, one sweep
of one point, no floors or evals: the cost path is under test, not the machine's speed) and
writes the card with a prices file whose cpu price is not the catalogue's.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from dayzero.errors import ConfigError
from dayzero.report.cost import load_prices
from dayzero.spec.matrix import load_matrix

from .conftest import REPO, needs_engine, run_pytest, write_yaml
from .slurm_bed import e2e_lock
from .submission_corpus.lab import relaxed_matrix

CELL = "smollm2-135m/cpu+llama.cpp/low_latency/baseline"
PRICE = 0.5  # USD per accelerator-hour: the catalogue's cpu price is 0.08


def test_the_example_prices_load_and_name_their_source_and_date():
    got = load_prices(REPO / "hosts" / "prices.example.yaml", load_matrix(REPO / "matrix"))
    assert set(got) >= {"h100", "h200", "b200"}
    assert all(
        p.per_accelerator_hour > 0 and "http" in p.source and "read 20" in p.source for p in got.values()
    )


def test_a_price_for_an_unknown_kind_names_file_field_and_the_close_kind(tmp_path):
    path = write_yaml(
        tmp_path / "p.yaml",
        {
            "prices": {
                "h1000": {"per_accelerator_hour": 1, "currency": "USD", "source": "x", "date": "2026-12-05"}
            }
        },
    )
    with pytest.raises(ConfigError) as err:
        load_prices(path, load_matrix(REPO / "matrix"))
    assert err.value.path == "prices.h1000" and "did you mean 'h100'" in err.value.message


@pytest.mark.e2e
@needs_engine
def test_a_cpu_cell_s_card_costs_its_tokens_at_the_lab_s_price(tmp_path, local_inventory):
    mdir = relaxed_matrix(tmp_path / "matrix")
    card_path = mdir / "models" / "smollm2-135m.yaml"
    card = yaml.safe_load(card_path.read_text())
    card.update(floors=[], accuracy=[])
    card["sweeps"] = [
        {
            "name": "conc",
            "when": {"engine": "llama.cpp", "mode": "low_latency", "strategy": "baseline"},
            "kind": "concurrency",
            "workload": "random-64-32",
            "points": [1],
            "num_prompts": 2,
            "budget_s": 30,
        }
    ]
    card_path.write_text(yaml.safe_dump(card, sort_keys=False))
    prices = write_yaml(
        tmp_path / "prices.yaml",
        {
            "prices": {
                "cpu": {
                    "per_accelerator_hour": PRICE,
                    "currency": "USD",
                    "source": "test",
                    "date": "2026-12-05",
                }
            }
        },
    )
    reports = tmp_path / "reports"
    with e2e_lock():
        result = run_pytest(
            "-m", "llama.cpp and low_latency and baseline", "-q", f"--matrix={mdir}",
            f"--hosts={local_inventory()}", f"--reports={reports}", timeout=300,
        )  # fmt: skip
    assert result.returncode in (0, 1), result.stdout[-3000:] + result.stderr[-2000:]
    written = subprocess.run(
        [sys.executable, "-m", "dayzero.cli", f"--matrix={mdir}", "card", f"--reports={reports}",
         "--model", "smollm2-135m", f"--prices={prices}"],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert written.returncode == 0, written.stderr
    doc = json.loads((reports / "cards" / "smollm2-135m" / "cpu.json").read_text())
    assert doc["price"]["per_accelerator_hour"] == PRICE
    (point,) = [p for p in doc["points"] if p["cell"] == CELL]
    want = PRICE / (point["tok_s_per_accelerator"] * 3600) * 1e6
    assert point["cost_per_million"] == pytest.approx(want, rel=1e-3)
    md = Path(reports / "cards" / "smollm2-135m" / "cpu.md").read_text()
    assert f"cost: {PRICE:g} USD per accelerator-hour (test, read 2026-12-05" in md
    assert f"{point['cost_per_million']:.4g}" in md
    (row,) = [r for r in doc["plan"] if r["point"] == "c1"]
    assert "per 1M tok" in row["status"]
