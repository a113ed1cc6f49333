"""The cookbook's Mamba ratio, against values computed by hand."""

from __future__ import annotations

import pytest

from dayzero import cli
from dayzero.spec import mamba

from .test_dry_run_preview import one_line

GEOMETRY = {"state_bytes_per_slot": 1_000_000, "kv_bytes_per_token": 1000, "context_tokens": 9216}


def test_balanced_ratio_by_hand():
    # token_equiv = 1e6 / 1e3 = 1000; (4 + 0) * 1000 * 8 / 9216 = 32000 / 9216 = 3.47222...
    i = mamba.Inputs(
        1_000_000, 1000, dcp_size=8, strategy="extra_buffer_lazy", draft_tokens=0, context_tokens=9216
    )
    assert mamba.ratio(i) == pytest.approx(3.472222, rel=1e-6)
    # token_equiv = 2e6 / 4e3 = 500; (3 + 7) * 500 * 1 / 100000 = 0.05
    j = mamba.Inputs(
        2_000_000, 4000, dcp_size=1, strategy="no_buffer", draft_tokens=7, context_tokens=100_000
    )
    assert mamba.ratio(j) == pytest.approx(0.05)
    # radix cache disabled: one slot; (1 + 0) * 500 * 2 / 1000 = 1.0
    k = mamba.Inputs(2_000_000, 4000, dcp_size=2, strategy="disabled", draft_tokens=0, context_tokens=1000)
    assert mamba.ratio(k) == pytest.approx(1.0)


def test_inputs_read_from_the_role_command():
    argv = [
        "--dcp-size",
        "4",
        "--dcp-size",
        "8",
        "--speculative-algorithm",
        "DFLASH",
        "--speculative-dflash-block-size",
        "7",
    ]
    i = mamba.inputs_for(argv, GEOMETRY)
    assert (i.dcp_size, i.strategy, i.slots, i.draft_tokens) == (
        8,
        "extra_buffer",
        5,
        7,
    )  # auto: extra_buffer
    assert mamba.strategy_of(["--disable-overlap-schedule"]) == "no_buffer"
    assert mamba.strategy_of(["--mamba-radix-cache-strategy", "extra_buffer_lazy"]) == "extra_buffer_lazy"
    assert (
        mamba.strategy_of(["--mamba-radix-cache-strategy=no_buffer", "--disable-radix-cache"]) == "disabled"
    )
    assert (
        mamba.inputs_for(["--speculative-num-draft-tokens", "3"], GEOMETRY).draft_tokens == 0
    )  # no algorithm


def test_describe_prints_inputs_beside_the_value_or_what_is_missing():
    line = mamba.describe(["--dcp-size", "8", "--mamba-radix-cache-strategy", "extra_buffer_lazy"], GEOMETRY)
    assert line.startswith("r* = 3.472 = (S 4 [extra_buffer_lazy] + D 0) x token_equiv 1000")
    assert "x dcp 8 / L 9216" in line
    pinned = mamba.describe(["--mamba-full-memory-ratio", "0.9"], {**GEOMETRY, "kv_bytes_per_token": None})
    assert pinned == "card pins 0.9; calculator needs data: mamba_ratio.kv_bytes_per_token"
    spec = mamba.describe(["--speculative-algorithm", "DFLASH"], GEOMETRY)
    assert "needs data: --speculative-num-draft-tokens" in spec


def test_recipe_prints_the_kimi_ratio_line(capsys):
    assert cli.main(["recipe", "kimi-k3.1-pro/b300/low_latency/baseline"]) == 0
    out = capsys.readouterr().out
    assert "# mamba ratio: card pins 0.9; calculator needs data: mamba_ratio.state_bytes_per_slot" in out


RATIO = "--mamba-full-memory-ratio"
OPTIONS = ["--mamba-state-bytes", "1000000", "--mamba-kv-bytes", "1000"]


def server_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if "sglang serve" in line]


def test_recipe_options_write_the_ratio_where_the_mode_pins_none(capsys):
    # balanced: extra_buffer_lazy (S 4), dcp 8, L 9216 from the card: 4 * 1000 * 8 / 9216 = 3.4722
    assert cli.main(["recipe", "kimi-k3.1-pro/b300/balanced/baseline", *OPTIONS]) == 0
    out = capsys.readouterr().out
    (line,) = server_lines(out)
    assert line.endswith(f"{RATIO} 3.472") and line.count(RATIO) == 1
    assert "# mamba ratio: r* = 3.472 = (S 4 [extra_buffer_lazy] + D 0)" in out
    assert f"written as {RATIO} 3.472" in out
    # DFLASH names no draft tokens: D from --mamba-draft-tokens 7, (4 + 7) * 1000 * 8 / 9216 = 9.5486
    # and L from --mamba-context 4096: (4 + 7) * 1000 * 8 / 4096 = 21.484
    argv = ["recipe", "kimi-k3.1-pro/b300/balanced/dflash", *OPTIONS, "--mamba-draft-tokens", "7"]
    assert cli.main(argv) == 0
    assert server_lines(capsys.readouterr().out)[0].endswith(f"{RATIO} 9.549")
    assert cli.main([*argv, "--mamba-context", "4096"]) == 0
    assert server_lines(capsys.readouterr().out)[0].endswith(f"{RATIO} 21.48")
    # without D the value is not computed (never guessed) and nothing is written
    assert cli.main(["recipe", "kimi-k3.1-pro/b300/balanced/dflash", *OPTIONS]) == 0
    out = capsys.readouterr().out
    assert RATIO not in server_lines(out)[0] and "needs data: --speculative-num-draft-tokens" in out


def test_a_mode_that_pins_the_ratio_keeps_its_pin(capsys):
    # low_latency pins 0.9; auto strategy is extra_buffer (S 5), dcp 1: 5 * 1000 / 9216 = 0.54253
    assert cli.main(["recipe", "kimi-k3.1-pro/b300/low_latency/baseline", *OPTIONS]) == 0
    out = capsys.readouterr().out
    (line,) = server_lines(out)
    assert f"{RATIO} 0.9 " in line + " " and line.count(RATIO) == 1
    assert "# mamba ratio: card pins 0.9; r* = 0.5425 = (S 5 [extra_buffer] + D 0)" in out


def test_dry_run_shows_the_ratio_recipe_writes(matrix_dir, capsys):
    """With the geometry in the card, `--dry-run` and a run launch what `dayzero recipe` prints;
    the recipe digest moves with the geometry (older evidence turns Stale)."""
    import yaml

    from dayzero.run.preview import dry_run_text
    from dayzero.spec.inventory import load_inventory
    from dayzero.spec.matrix import load_matrix
    from dayzero.spec.recipe import digest

    cell_id = "kimi-k3.1-pro/b300/high_throughput/baseline"
    before = load_matrix(matrix_dir)
    path = matrix_dir / "models" / "kimi-k3.1-pro.yaml"
    card = yaml.safe_load(path.read_text())
    card["mamba_ratio"].update(state_bytes_per_slot=1_000_000, kv_bytes_per_token=1000)
    path.write_text(yaml.safe_dump(card, sort_keys=False))
    matrix = load_matrix(matrix_dir)
    cell = matrix.cell(cell_id)
    inventory = load_inventory("hosts/lab.example.yaml", set(matrix.hardware))
    # high_throughput: auto (S 5), dcp 8: 5 * 1000 * 8 / 9216 = 4.3403
    (dry,) = server_lines(one_line(dry_run_text(matrix, inventory, cell)))  # one flag a line, joined
    assert dry.endswith(f"{RATIO} 4.34")
    assert (
        cli.main(["--matrix", str(matrix_dir), "recipe", cell_id, "--hosts", "hosts/lab.example.yaml"]) == 0
    )
    recipe = [x.rpartition("; ")[2] for x in server_lines(capsys.readouterr().out)]  # after its exports
    assert recipe == [dry.strip()]
    assert digest(matrix.card(cell), cell) != digest(before.card(before.cell(cell_id)), cell)
