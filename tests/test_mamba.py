"""The cookbook's Mamba ratio, against values computed by hand."""

from __future__ import annotations

import pytest

from dayzero import cli
from dayzero.spec import mamba

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
