"""One word for a cookbook claim: Published. Verified is earned by evidence alone, so no view
that reads no evidence (the matrix view, `dayzero recipe`, `--dry-run`) may print it."""

from __future__ import annotations

import re

from dayzero import cli

from .conftest import run_pytest

# the four cells the Kimi card records as published verified by the cookbook
PUBLISHED = (
    "kimi-k3.1-pro/b300/balanced/dflash",
    "kimi-k3.1-pro/b300/high_throughput/baseline",
    "kimi-k3.1-pro/mi355x/balanced/dflash",
    "kimi-k3.1-pro/mi350x/balanced/dflash",
)
VERIFIED = re.compile(r"verified", re.IGNORECASE)


def test_matrix_view_says_published_and_filters_by_it(capsys):
    assert cli.main(["matrix", "--status", "published"]) == 0
    out = capsys.readouterr().out
    assert sorted(line.split()[0] for line in out.splitlines() if line.strip()) == sorted(PUBLISHED)
    assert all(line.split()[1] == "Published" for line in out.splitlines() if line.strip())
    assert not VERIFIED.search(out)
    assert cli.main(["matrix", "--status", "verified"]) == 0  # the old word still selects them
    assert capsys.readouterr().out == out


def test_recipe_headers_say_published(capsys):
    assert cli.main(["recipe", *PUBLISHED]) == 0
    out = capsys.readouterr().out
    heads = [line for line in out.splitlines() if line.startswith("# kimi-k3.1-pro/")]
    assert heads == [f"# {cell}  [Published]" for cell in PUBLISHED]
    assert "[verified]" not in out.lower()


def test_dry_run_headers_say_published():
    result = run_pytest(
        "-q", "-m", "kimi-k3.1-pro and balanced and dflash", "--dry-run", "--hosts", "hosts/lab.example.yaml"
    )
    assert result.returncode == 0, result.stdout + result.stderr
    heads = [line for line in result.stdout.splitlines() if line.startswith("== kimi-k3.1-pro/")]
    assert "== kimi-k3.1-pro/b300/balanced/dflash  [Published]" in [h.split("  recipe")[0] for h in heads]
    assert any("[Pending]" in h for h in heads)
    assert "[verified]" not in result.stdout.lower()
