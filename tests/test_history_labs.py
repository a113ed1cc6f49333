"""A run's lab: named in the inventory, carried by the cell's evidence into the results store."""

from __future__ import annotations

import json
import random

import pytest
import yaml

from dayzero.errors import ConfigError
from dayzero.history.store import open_store
from dayzero.run.cell import RunContext, new_run_id, run_cell
from dayzero.spec.inventory import load_inventory
from dayzero.spec.matrix import load_matrix

from .conftest import REPO
from .stub_cells import stub_card, stub_inventory, stub_matrix


def with_lab(path, lab):
    data = yaml.safe_load(path.read_text())
    path.write_text(yaml.safe_dump({"lab": lab, **data}))
    return path


def test_an_inventory_names_its_lab_and_a_bad_name_is_refused_naming_the_field(tmp_path):
    assert load_inventory(with_lab(stub_inventory(tmp_path), "lab-a")).lab == "lab-a"
    assert load_inventory(stub_inventory(tmp_path / "plain")).lab == ""  # none named: older inventories load
    with pytest.raises(ConfigError, match=r"hosts\.yaml: lab: .*does not match"):
        load_inventory(with_lab(stub_inventory(tmp_path / "bad"), "Lab A"))


def test_a_cells_evidence_carries_its_lab_into_the_store(tmp_path, monkeypatch):
    monkeypatch.setenv("DAYZERO_SUITES", str(REPO / "suites"))
    card = stub_card(model="labby")
    card["recipe"]["port"] = random.randint(20000, 29000)  # ours alone: other runs use the stub too
    matrix = load_matrix(stub_matrix(tmp_path, card))
    inventory = load_inventory(with_lab(stub_inventory(tmp_path, ttft=0.01), "lab-a"), set(matrix.hardware))
    reports = tmp_path / "reports"
    ctx = RunContext(matrix, inventory, reports, tmp_path / "goldens", new_run_id(), say=lambda m: None)
    try:
        outcome = run_cell(ctx, matrix.cell("labby/cpu/low_latency/baseline"))
    finally:
        ctx.close()
    doc = json.loads(outcome.evidence_path.read_text())
    assert doc["run"]["lab"] == "lab-a"
    with open_store(tmp_path / "h.sqlite") as store:
        assert store.ingest_folder(reports) == 1
        assert store.labs() == ["lab-a"]
        assert store.runs(doc["cell"])[0]["controller"] == doc["run"]["controller"]
