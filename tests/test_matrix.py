"""The matrix as data: schema errors name file, path and expectation; cells expand as declared."""

from __future__ import annotations

import re

import pytest
import yaml

from dayzero.errors import ConfigError
from dayzero.spec.matrix import load_matrix, matches

from .conftest import REPO


def edit(path, change):
    data = yaml.safe_load(path.read_text())
    change(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def test_repository_matrix_loads_with_every_day0_hardware():
    matrix = load_matrix(REPO / "matrix")
    day0 = {
        "vera_rubin",
        "b300",
        "gb300",
        "b200",
        "gb200",
        "h200",
        "h100",
        "mi355x",
        "mi350x",
        "tpu7x",
        "trainium2",
        "trainium3",
        "ppu_m890",
        "ppu_810e",
    }
    assert day0 | {"cpu", "mac"} == set(matrix.hardware)  # mac: for `dayzero fit --on mac=64GiB`
    kimi = {c.hardware for c in matrix.cells if c.model == "kimi-k3.1-pro"}
    assert kimi == day0


def test_published_statuses_and_unsupported_reasons():
    matrix = load_matrix(REPO / "matrix")
    verified = {c.id for c in matrix.cells if c.published == "verified"}
    assert verified == {
        "kimi-k3.1-pro/b300/balanced/dflash",
        "kimi-k3.1-pro/b300/high_throughput/baseline",
        "kimi-k3.1-pro/mi355x/balanced/dflash",
        "kimi-k3.1-pro/mi350x/balanced/dflash",
    }
    h100 = matrix.cell("kimi-k3.1-pro/h100/low_latency/baseline")
    assert h100.published == "unsupported" and "TP8" in h100.reason
    assert all(c.reason for c in matrix.cells if not c.supported)
    assert matrix.cell("kimi-k3.1-pro/h100/balanced/baseline").nodes == 4


def test_smollm2_cells_cover_modes_and_strategies():
    matrix = load_matrix(REPO / "matrix")
    ids = {c.id for c in matrix.cells if c.model == "smollm2-135m"}
    assert ids == {
        f"smollm2-135m/cpu+llama.cpp/{m}/{s}"
        for m in ("low_latency", "high_throughput")
        for s in ("baseline", "ngram_spec")
    } | {"smollm2-135m/cpu+llama.cpp/rpc_split/baseline", "smollm2-135m/cpu+llama.cpp/routed/baseline"} | {
        f"smollm2-135m/cpu+sglang/{m}/{s}"
        for m in ("low_latency", "high_throughput")
        for s in ("baseline", "ngram_spec")
    } | {f"smollm2-135m/cpu+sglang/{m}/baseline" for m in ("tp2_nodes", "routed", "pd")} | {
        "smollm2-135m/cpu+vllm/low_latency/baseline",
        "smollm2-135m/cpu+vllm/low_latency/ngram_spec",
        "smollm2-135m/cpu+vllm/high_throughput/baseline",
    }


def test_engine_axis_cells_carry_their_engine_and_card():
    """Three engines on one kind: ids and markers name the engine, each cell reads its engine's card."""
    matrix = load_matrix(REPO / "matrix")
    sglang = matrix.cell("smollm2-135m/cpu+sglang/low_latency/baseline")
    llama = matrix.cell("smollm2-135m/cpu+llama.cpp/low_latency/baseline")
    assert "sglang" in sglang.markers and "llama.cpp" in llama.markers and "cpu" in sglang.markers
    assert matrix.card(sglang).engine.name == "sglang" and matrix.card(llama).engine.name == "llama.cpp"
    assert matrix.card(sglang).weights.endswith("-bf16") and matrix.card(llama).weights.endswith(".gguf")
    assert matrix.card(sglang).probes == matrix.card(llama).probes  # the model's own data is shared
    assert matrix.engines("smollm2-135m") == ["llama.cpp", "sglang", "vllm"]
    vllm = matrix.cell("smollm2-135m/cpu+vllm/low_latency/baseline")
    assert "vllm" in vllm.markers and matrix.card(vllm).engine.name == "vllm"
    assert matrix.engines("kimi-k3.1-pro") == ["sglang"]
    spec = matrix.cell("smollm2-135m/cpu+sglang/low_latency/ngram_spec")
    assert spec.published == "unsupported" and "sgl_kernel.speculative" in spec.reason
    assert {"sglang", "llama.cpp", "vllm"} <= set(matrix.marker_names)
    # a kind one engine serves keeps the plain id
    assert all("+" not in c.id.split("/")[1] for c in matrix.cells if c.model == "kimi-k3.1-pro")


def test_engine_entry_naming_another_engine_is_refused(matrix_dir):
    card = matrix_dir / "models" / "smollm2-135m.yaml"
    card.write_text(
        card.read_text().replace(
            "  sglang:\n    engine:\n      name: sglang", "  sglang:\n    engine:\n      name: vllm"
        )
    )
    with pytest.raises(ConfigError, match=r"engines.sglang.engine.name.*expected 'sglang'"):
        load_matrix(matrix_dir)


def test_bad_reference_in_an_engine_entry_names_the_entry(matrix_dir):
    card = matrix_dir / "models" / "smollm2-135m.yaml"
    text = card.read_text().replace("modes: [tp2_nodes, routed, pd]", "modes: [tp2_nodes, routd, pd]")
    card.write_text(text)
    with pytest.raises(ConfigError, match=r"engines.sglang.cells\[1\].modes.*unknown mode 'routd'") as err:
        load_matrix(matrix_dir)
    line = next(i for i, x in enumerate(text.splitlines(), 1) if "routd" in x)  # issue 45: the entry's line,
    assert str(err.value).endswith(f"(line {line})"), str(err.value)  # not the top level's it replaced


def test_pd_cells_exist_with_options():
    matrix = load_matrix(REPO / "matrix")
    cell = matrix.cell("kimi-k3.1-pro/b200/pd_balanced/dflash+wideep")
    assert cell.options == ("wideep",) and cell.supported
    assert set(cell.markers) == {"kimi-k3.1-pro", "b200", "pd_balanced", "dflash", "wideep"}


def test_unknown_hardware_names_file_path_and_choices(matrix_dir):
    card = matrix_dir / "models" / "smollm2-135m.yaml"
    edit(card, lambda d: d["cells"][0]["hardware"].append("b3000"))
    with pytest.raises(ConfigError) as err:
        load_matrix(matrix_dir)
    msg = str(err.value)
    assert str(card) in msg and "cells[0].hardware[1]" in msg and "unknown hardware 'b3000'" in msg
    assert "expected one of ['cpu']" in msg and "(line " in msg


def test_card_hardware_must_be_in_the_catalogue(matrix_dir):
    card = matrix_dir / "models" / "smollm2-135m.yaml"
    edit(card, lambda d: d["hardware"].__setitem__("b3000", {"nodes": 1}))
    with pytest.raises(ConfigError) as err:
        load_matrix(matrix_dir)
    msg = str(err.value)
    assert "hardware.b3000" in msg and "unknown hardware 'b3000'" in msg and "'b300'" in msg


def test_wrong_type_names_the_path_and_type(matrix_dir):
    card = matrix_dir / "models" / "smollm2-135m.yaml"
    edit(card, lambda d: d["modes"]["low_latency"].__setitem__("concurrency", "one"))
    with pytest.raises(ConfigError) as err:
        load_matrix(matrix_dir)
    msg = str(err.value)
    assert "modes.low_latency.concurrency" in msg and "expected integer" in msg and "'one'" in msg


def test_duplicate_cell_is_an_error(matrix_dir):
    card = matrix_dir / "models" / "smollm2-135m.yaml"
    edit(
        card,
        lambda d: d["cells"].append(
            {"hardware": ["cpu"], "modes": ["low_latency"], "strategies": ["baseline"]}
        ),
    )
    with pytest.raises(ConfigError) as err:
        load_matrix(matrix_dir)
    assert "duplicate cell 'smollm2-135m/cpu+llama.cpp/low_latency/baseline'" in str(err.value)
    assert "cells[2]" in str(err.value) and "cells[0]" in str(err.value)  # the appended entry


@pytest.mark.parametrize(
    "change, where, words",
    [
        (lambda d: d["cells"][0]["strategies"].append("eagle"), "cells[0].strategies[2]", "unknown strategy"),
        (lambda d: d["cells"][0]["modes"].append("turbo"), "cells[0].modes[2]", "unknown mode"),
        (
            lambda d: d["modes"]["low_latency"].__setitem__("colour", "red"),
            "modes.low_latency",
            "unknown field",
        ),
        (
            lambda d: d.__setitem__("published", {"smollm2-135m/cpu+llama.cpp/x/y": "verified"}),
            "published",
            "no such cell",
        ),
        (
            lambda d: d["strategies"]["ngram_spec"].__setitem__("roles", ["drafter"]),
            "strategies.ngram_spec.roles[0]",
            "unknown role",
        ),
    ],
)
def test_unknown_references(matrix_dir, change, where, words):
    card = matrix_dir / "models" / "smollm2-135m.yaml"
    edit(card, change)
    with pytest.raises(ConfigError) as err:
        load_matrix(matrix_dir)
    assert where in str(err.value) and words in str(err.value)


def test_bad_yaml_and_missing_catalogue(matrix_dir, tmp_path):
    (matrix_dir / "models" / "smollm2-135m.yaml").write_text("model: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_matrix(matrix_dir)
    with pytest.raises(ConfigError, match="hardware catalogue"):
        load_matrix(tmp_path / "nowhere")


def test_when_rules_match_on_every_key():
    matrix = load_matrix(REPO / "matrix")
    cell = matrix.cell("kimi-k3.1-pro/b300/balanced/dflash+hicache")
    assert matches({"hardware": ["b300", "h100"], "option": "hicache"}, cell)
    assert not matches({"hardware": "b300", "strategy": "baseline"}, cell)
    assert matches({"nodes": 1}, cell) and not matches({"nodes": 2}, cell)


def test_the_readme_counts_the_kimi_cells_the_matrix_has():
    """The README's headline numbers are the matrix's (it once said 244 where the matrix had 240)."""
    text = (REPO / "README.md").read_text()
    found = re.search(
        r"Kimi K3\.1 Pro day-0 matrix \((\d+) accelerator kinds, SGLang recipes, (\d+) cells\)", text
    )
    assert found, "the README's sentence on the Kimi matrix changed: update this test with it"
    cells = [c for c in load_matrix(REPO / "matrix").cells if c.model == "kimi-k3.1-pro"]
    assert (int(found[1]), int(found[2])) == (len({c.hardware for c in cells}), len(cells))
