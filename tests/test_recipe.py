"""Recipe rendering is pure: same cell and hosts give the same commands, every value quoted."""

from __future__ import annotations

import shlex

import pytest
import yaml

from dayzero.errors import ConfigError
from dayzero.spec.inventory import Host
from dayzero.spec.matrix import load_matrix
from dayzero.spec.recipe import digest, hosts_needed, render

from .conftest import REPO


@pytest.fixture(scope="module")
def matrix():
    return load_matrix(REPO / "matrix")


def lab(hardware: str, n: int, accelerators: int = 8) -> list[Host]:
    return [
        Host(
            name=f"{hardware}-{i}",
            hardware=hardware,
            address=f"10.0.0.{i + 1}",
            accelerators=accelerators,
            vars=(("model_root", "/models"),),  # where a lab keeps the weights the card names
        )
        for i in range(n)
    ]


def test_single_node_tp8(matrix):
    cell = matrix.cell("kimi-k3.1-pro/b300/balanced/dflash")
    recipe = render(matrix, cell, lab("b300", 1))
    (launch,) = recipe.launches
    argv = shlex.split(launch.command)
    assert argv[:2] == ["sglang", "serve"] and argv[argv.index("--tp") + 1] == "8"
    assert "--speculative-algorithm" in argv and "--nnodes" not in argv
    assert launch.endpoint and recipe.endpoint is launch


def test_multi_node_ranks_share_the_dist_init_address(matrix):
    cell = matrix.cell("kimi-k3.1-pro/h100/balanced/baseline")
    assert hosts_needed(matrix.card(cell), cell) == 4
    recipe = render(matrix, cell, lab("h100", 4))
    assert [lc.rank for lc in recipe.launches] == [0, 1, 2, 3]
    for lc in recipe.launches:
        argv = shlex.split(lc.command)
        assert argv[argv.index("--tp") + 1] == "32"
        assert argv[argv.index("--nnodes") + 1] == "4"
        assert argv[argv.index("--node-rank") + 1] == str(lc.rank)
        assert argv[argv.index("--dist-init-addr") + 1] == "10.0.0.1:20000"
    assert [lc.host for lc in recipe.launches] == ["h100-0", "h100-1", "h100-2", "h100-3"]


def test_pd_roles_and_router(matrix):
    cell = matrix.cell("kimi-k3.1-pro/b200/pd_balanced/dflash")
    recipe = render(matrix, cell, lab("b200", 4))
    roles = [(lc.role, lc.rank, lc.host) for lc in recipe.launches]
    assert roles == [
        ("prefill", 0, "b200-0"),
        ("prefill", 1, "b200-1"),
        ("decode", 0, "b200-2"),
        ("decode", 1, "b200-3"),
        ("router", 0, "b200-0"),
    ]
    router = recipe.endpoint
    assert router.role == "router" and router.port == 8000
    argv = shlex.split(router.command)
    assert argv[argv.index("--prefill") + 1] == "http://10.0.0.1:30000"
    assert argv[argv.index("--decode") + 1] == "http://10.0.0.3:30001"
    decode = shlex.split(recipe.launches[2].command)
    assert "DFLASH" in decode and "decode" in decode
    prefill = shlex.split(recipe.launches[0].command)
    assert "DFLASH" not in prefill, "dflash applies to decode roles only"
    assert decode[decode.index("--dist-init-addr") + 1] == "10.0.0.3:20000"


def test_rendering_is_pure_and_digest_ignores_hosts(matrix):
    cell = matrix.cell("kimi-k3.1-pro/gb300/high_throughput/baseline+hicache")
    a = render(matrix, cell, lab("gb300", 2, 4))
    b = render(matrix, cell, lab("gb300", 2, 4))
    assert a == b
    other = [
        Host(name=n, hardware="gb300", address=f"192.168.1.{i}", accelerators=4, vars=(("model_root", "/w"),))
        for i, n in enumerate(("x", "y"), 1)
    ]
    assert render(matrix, cell, other).digest == a.digest
    assert dict(a.launches[0].env)["NCCL_MNNVL_ENABLE"] == "1"


def test_digest_changes_with_a_flag(matrix_dir):
    before = load_matrix(matrix_dir)
    cell = before.cell("smollm2-135m/cpu+llama.cpp/low_latency/baseline")
    card = matrix_dir / "models" / "smollm2-135m.yaml"
    data = yaml.safe_load(card.read_text())
    data["modes"]["low_latency"]["args"].append("--no-cache-prompt")
    card.write_text(yaml.safe_dump(data))
    after = load_matrix(matrix_dir)
    assert digest(after.card(cell), cell) != digest(before.card(cell), cell)
    other = before.cell("smollm2-135m/cpu+llama.cpp/high_throughput/baseline")
    assert digest(after.card(other), other) == digest(before.card(other), other)


def test_values_are_shell_quoted(matrix):
    cell = matrix.cell("smollm2-135m/cpu+llama.cpp/low_latency/baseline")
    evil = Host(
        name="h", hardware="cpu", address="127.0.0.1", vars=(("model_root", "/models/it's here; rm -rf /"),)
    )
    launch = render(matrix, cell, [evil]).launches[0]
    argv = shlex.split(launch.command)
    assert argv[argv.index("--model") + 1] == "/models/it's here; rm -rf //SmolLM2-135M-Instruct.Q4_1.gguf"


def test_home_relative_paths_stay_expandable(matrix):
    cell = matrix.cell("smollm2-135m/cpu+llama.cpp/low_latency/baseline")
    host = Host(name="h", hardware="cpu", address="127.0.0.1", vars=(("model_root", "~/models"),))
    assert (
        "--model ~/models/SmolLM2-135M-Instruct.Q4_1.gguf" in render(matrix, cell, [host]).launches[0].command
    )


def test_missing_host_var_names_the_card_and_known_placeholders(matrix):
    cell = matrix.cell("smollm2-135m/cpu+llama.cpp/low_latency/baseline")
    with pytest.raises(ConfigError) as err:
        render(matrix, cell, [Host(name="h", hardware="cpu", address="127.0.0.1")])
    assert "smollm2-135m.yaml" in str(err.value) and "{model_root}" in str(err.value)


def test_card_vars_are_defaults_a_host_overrides(matrix):
    cell = matrix.cell("smollm2-135m/cpu+llama.cpp/low_latency/baseline")
    plain = Host(name="h", hardware="cpu", address="127.0.0.1", vars=(("model_root", "/m"),))
    one = (("model_root", "/m"), ("threads", "1"))
    shared = Host(name="h", hardware="cpu", address="127.0.0.1", vars=one)
    assert "--threads 2 " in render(matrix, cell, [plain]).launches[0].command
    assert "--threads 1 " in render(matrix, cell, [shared]).launches[0].command
    assert render(matrix, cell, [plain]).digest == render(matrix, cell, [shared]).digest


def test_wrong_number_of_hosts(matrix):
    cell = matrix.cell("kimi-k3.1-pro/h200/balanced/baseline")
    with pytest.raises(ValueError, match="needs 2 host"):
        render(matrix, cell, lab("h200", 1))
