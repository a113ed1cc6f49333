"""Parallelism as part of a mode (issue 44, item 2, the card's side): a mode's `parallel: {tp: 2}`
renders one `--tp 2` on an 8-accelerator host, a flag given twice is a lint finding (argparse and
llama.cpp keep the last value silently), and a layer that means to replace a flag says so.
"""

from __future__ import annotations

import argparse
import shlex

import yaml

from dayzero.engines import argv_script
from dayzero.engines.llamacpp import help as llama_help
from dayzero.spec import fit, recipe, sizing
from dayzero.spec.inventory import Host
from dayzero.spec.matrix import load_matrix
from dayzero.spec.recipe import render

KIMI = "models/kimi-k3.1-pro.yaml"


def with_tp2_mode(matrix_dir):
    path = matrix_dir / KIMI
    card = yaml.safe_load(path.read_text())
    card["modes"]["tp2"] = {
        "description": "TP2: two accelerators of a node",
        "concurrency": 1,
        "parallel": {"tp": 2},
    }
    card["cells"].append({"hardware": ["h200"], "modes": ["tp2"], "strategies": ["baseline"]})
    path.write_text(yaml.safe_dump(card, sort_keys=False))
    return load_matrix(matrix_dir)


def test_a_tp2_mode_renders_one_tp_2_on_an_eight_accelerator_host(matrix_dir):
    matrix = with_tp2_mode(matrix_dir)
    cell = matrix.cell("kimi-k3.1-pro/h200/tp2/baseline")
    host = Host("h200-01", "h200", address="10.0.0.1", accelerators=8, vars=(("model_root", "/m"),))
    (launch,) = render(matrix, cell, [host]).launches
    argv = shlex.split(launch.command)
    assert argv.count("--tp") == 1 and argv[argv.index("--tp") + 1] == "2"
    assert cell.nodes == 1  # two of the node's eight, where the card places the model on two nodes
    hosts = [host, Host("h200-02", "h200", address="10.0.0.2", accelerators=8, vars=(("model_root", "/m"),))]
    other = render(matrix, matrix.cell("kimi-k3.1-pro/h200/low_latency/baseline"), hosts).launches[0]
    assert "--tp 16" in other.command  # a mode without `parallel`: every accelerator of the hosts
    assert recipe.parallel_accelerators(matrix.card(cell), cell) == 2  # per-accelerator figures: / 2
    assert (
        recipe.parallel_accelerators(
            matrix.card(cell), matrix.cell("kimi-k3.1-pro/h200/low_latency/baseline")
        )
        is None
    )


def test_fit_judges_one_rank_of_the_modes_layout():
    arch = sizing.from_card(
        {
            "source": "s",
            "parameters": 8e9,
            "layers": [{"kind": "attention", "count": 32, "kv_heads": 8, "head_dim": 128}],
        }
    )
    tp2 = fit.Layout(tp=2)
    assert fit.weights_bytes(arch, fit.PRECISIONS["bf16"], tp2) == 8e9
    dtypes = fit.cache_dtypes([], fit.engine_memory("vllm"))
    assert fit.cache(arch, dtypes, tp2).per_token == 32 * 2 * 4 * 128 * 2


def test_a_flag_given_twice_is_a_finding_for_argparse_engines():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tp", type=int)
    parser.add_argument("--tensor-parallel-size", dest="tp")
    parser.add_argument("--lora", action="append")
    got = argv_script.check(
        parser, ["--tp", "8", "--lora", "a", "--lora", "b", "--tensor-parallel-size", "2"]
    )
    assert got == [
        {
            "flag": "--tensor-parallel-size",
            "kind": "given twice",
            "message": "also given as --tp: argparse keeps the last value",
        }
    ]


def test_a_flag_given_twice_is_a_finding_for_llama_cpp():
    table = {
        "--threads": {"value": True, "choices": None, "list": False},
        "--lora": {"value": True, "choices": None, "list": False},
    }
    got = llama_help.check(table, ["--threads", "2", "--lora", "a", "--lora", "b", "--threads", "1"])
    assert got == [
        {"flag": "--threads", "kind": "given twice", "message": "llama-server keeps the last value"}
    ]


def test_a_layer_that_replaces_a_flag_leaves_it_once(matrix_dir):
    """WideEP's `--ep-size {tp}` replaces the PD decode role's `--ep-size 2` (`replaces:`)."""
    matrix = load_matrix(matrix_dir)
    cell = matrix.cell("kimi-k3.1-pro/h200/pd_balanced/baseline+wideep")
    hosts = [
        Host(f"h200-0{i}", "h200", address=f"10.0.0.{i}", accelerators=8, vars=(("model_root", "/m"),))
        for i in range(1, 5)
    ]
    decode = [lc for lc in render(matrix, cell, hosts[: len(hosts)]).launches if lc.role == "decode"]
    for lc in decode:
        argv = shlex.split(lc.command)
        assert argv.count("--ep-size") == 1 and argv[argv.index("--ep-size") + 1] == "16"


def test_fit_of_a_mode_judges_one_rank_of_its_layout(matrix_dir, capsys):
    from dayzero import cli

    with_tp2_mode(matrix_dir)
    args = ["--matrix", str(matrix_dir), "fit", "kimi-k3.1-pro", "--precision", "mxfp4", "--on", "8xh200"]
    assert cli.main([*args, "--mode", "tp2"]) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if x.startswith("8 x h200")]
    assert ", TP2, " in line and "mxfp4 no: weights 743.8 GB a rank" in line  # 1488 GB over two ranks
