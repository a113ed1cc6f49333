"""The plugin as a user meets it: pytest on the repository's suites, in a subprocess."""

from __future__ import annotations

import pytest
import yaml

from .conftest import REPO, run_pytest, write_yaml
from .stub_cells import STUB_PORT, stub_card, stub_inventory, stub_matrix, stub_pair_card
from .test_dry_run_preview import one_line


def test_collect_b300_lists_kimi_cells():
    result = run_pytest("--collect-only", "-q", "-m", "b300")
    assert result.returncode == 0, result.stderr
    ids = [line for line in result.stdout.splitlines() if "test_cell[" in line]
    assert len(ids) == 20
    assert "suites/test_cells.py::test_cell[kimi-k3.1-pro/b300/balanced/dflash]" in ids
    assert all("/b300/" in i for i in ids)


def test_marker_expressions_combine():
    result = run_pytest("--collect-only", "-q", "-m", "cpu and high_throughput and not sglang and not vllm")
    ids = [line for line in result.stdout.splitlines() if "test_cell[" in line]
    assert sorted(ids) == [
        "suites/test_cells.py::test_cell[smollm2-135m/cpu+llama.cpp/high_throughput/baseline]",
        "suites/test_cells.py::test_cell[smollm2-135m/cpu+llama.cpp/high_throughput/ngram_spec]",
    ]
    result = run_pytest("--collect-only", "-q", "-m", "cpu and sglang and baseline")  # the engine axis
    ids = [line for line in result.stdout.splitlines() if "test_cell[" in line]
    assert len(ids) == 5 and all("smollm2-135m/cpu+sglang/" in i for i in ids), ids  # with pd
    result = run_pytest("--collect-only", "-q", "-m", "kimi-k3.1-pro and wideep and h200")
    assert result.returncode == 0 and "h200/pd_balanced/baseline+wideep" in result.stdout


EMPTY_B300 = (
    "dayzero: no cell ran of 20 selected: 16 skipped: no host with hardware 'b300' in inventory "
    f"{REPO}/hosts/local.yaml; 4 unsupported"
)


@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["no-xdist", "xdist"])
def test_b300_on_the_local_inventory_tests_nothing_and_exits_non_zero_saying_why(tmp_path, workers):
    """A nightly job that forgets its inventory skips every cell: it must not go green."""
    result = run_pytest("-q", "-rs", "-m", "b300", f"--reports={tmp_path}", *workers)
    assert result.returncode == pytest.ExitCode.NO_TESTS_COLLECTED, result.stdout[-3000:]
    assert "20 skipped" in result.stdout
    lines = result.stdout.splitlines()
    assert EMPTY_B300 in lines, result.stdout[-3000:]
    assert "[dayzero] 0 of 20 selected cells ran" in lines
    assert f"[dayzero] inventory {REPO}/hosts/local.yaml; matrix {REPO}/matrix" in lines

    allowed = run_pytest("-q", "-m", "b300", f"--reports={tmp_path}", "--allow-empty", *workers)
    assert allowed.returncode == 0, allowed.stdout[-3000:]
    assert f"{EMPTY_B300} (allowed: --allow-empty)" in allowed.stdout.splitlines()


def test_a_dry_run_is_empty_when_the_run_would_be(tmp_path):
    """A dry run tallies its plan: nothing to run on the local inventory is non-zero there too."""
    result = run_pytest("-q", "-m", "b300", "--dry-run", "-n", "2", f"--reports={tmp_path}")
    assert result.returncode == pytest.ExitCode.NO_TESTS_COLLECTED, result.stdout[-3000:]
    assert result.stdout.count("== kimi-k3.1-pro/b300/") == 20, "xdist does not hide the plan"
    assert "[dayzero] 0 of 20 selected cells would run" in result.stdout
    assert EMPTY_B300.replace("no cell ran", "no cell would run") in result.stdout.splitlines()
    allowed = run_pytest("-q", "-m", "b300", "--dry-run", "--allow-empty", f"--reports={tmp_path}")
    assert allowed.returncode == 0, allowed.stdout[-3000:]


def test_a_selection_that_matches_no_cell_is_empty_too(tmp_path):
    result = run_pytest("-q", "-m", "b300 and cpu", f"--reports={tmp_path}")
    assert result.returncode == pytest.ExitCode.NO_TESTS_COLLECTED, result.stdout[-3000:]
    assert f"dayzero: no cell ran: no cell of matrix {REPO}/matrix matches the selection" in result.stdout
    allowed = run_pytest("-q", "-m", "b300 and cpu", "--allow-empty", f"--reports={tmp_path}")
    assert allowed.returncode == 0, allowed.stdout[-3000:]


def test_dry_run_prints_commands_for_each_cell():
    result = run_pytest("-q", "-m", "b300", "--dry-run", "--hosts", "hosts/lab.example.yaml")
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert out.count("== kimi-k3.1-pro/b300/") == 20
    serve = [line for line in one_line(out).splitlines() if "sglang serve" in line]
    assert serve and all("--tp 8" in line for line in serve)
    assert "# server[0] on b300-01: dayzero@10.20.0.11:22 via dayzero@bastion.lab.example:22" in out
    assert "unsupported: WideEP" in out
    assert "needs 2 b300 hosts" in out or "prefill[0] on b300-01" in out
    assert "passed" not in out and "failed" not in out


def test_malformed_matrix_fails_before_any_test(tmp_path):
    mdir = tmp_path / "matrix"
    (mdir / "models").mkdir(parents=True)
    (mdir / "hardware.yaml").write_text((REPO / "matrix" / "hardware.yaml").read_text())
    card = yaml.safe_load((REPO / "matrix" / "models" / "smollm2-135m.yaml").read_text())
    card["cells"][0]["hardware"] = ["cpu", "gpu9000"]
    (mdir / "models" / "smollm2-135m.yaml").write_text(yaml.safe_dump(card))
    result = run_pytest("-q", "-m", "cpu", "--matrix", str(mdir))
    assert result.returncode == 4  # usage error: nothing ran
    assert "smollm2-135m.yaml: cells[0].hardware[1]: unknown hardware 'gpu9000'" in result.stderr
    assert "passed" not in result.stdout


def test_unknown_marker_is_rejected_under_strict_markers():
    """Only names from the matrix are registered: a typo in -m is an error, not an empty run
    (every form of --hosts: tests/test_input_errors.py)."""
    result = run_pytest("--collect-only", "-q", "-m", "b3000")
    assert result.returncode == 4
    assert "unknown marker 'b3000' (did you mean 'b300'?)" in result.stderr


def test_options_work_in_space_form_with_a_path_outside_the_repository(tmp_path):
    """`--hosts /abs/inventory.yaml` (how a lab keeps its inventory, and the README's form) used
    to be taken for a test path: the rootdir moved, the ini was lost and no cell was collected."""
    inventory = tmp_path / "lab" / "inventory.yaml"
    inventory.parent.mkdir()
    inventory.write_text(
        (REPO / "hosts" / "local.yaml").read_text().replace("\n  local:\n", "\n  elsewhere:\n")
    )
    reports = tmp_path / "out"
    for form in (["--hosts", str(inventory), "--reports", str(reports)], [f"--hosts={inventory}"]):
        result = run_pytest("-m", "cpu", *form, "--dry-run", "-q")
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
        assert "240 deselected" in result.stdout and result.stdout.count("elsewhere") >= 4, result.stdout[
            -3000:
        ]
        assert "tests/test_" not in result.stdout, "only the suites are collected (the ini's testpaths)"


def test_n_auto_starts_one_worker_per_host_slot(tmp_path):
    """xdist asks for `-n auto`'s count before pytest_configure, and its own answer (the CPU
    count) came first: a lab of 8 one-slot hosts ran 2 cells at a time on a 2-core controller."""
    hosts = {
        f"h{i}": {
            "transport": "local",
            "address": "127.0.0.1",
            "hardware": "cpu",
            "accelerators": 1,
            "slots": slots,
            "workdir": str(tmp_path / f"w{i}"),
        }
        for i, slots in ((1, 2), (2, 1))
    }
    inventory = tmp_path / "hosts.yaml"
    inventory.write_text(yaml.safe_dump({"hosts": hosts}))
    result = run_pytest(
        "-n", "auto", "-m", "b300", "--allow-empty", f"--hosts={inventory}", f"--reports={tmp_path / 'r'}"
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "created: 3/3 workers" in result.stdout, result.stdout[-3000:]


def test_a_run_where_some_cells_ran_and_others_skipped_exits_0_and_counts_them(tmp_path):
    """Under xdist the controller counts its workers' cells: one ran on the one-host inventory,
    the two-host one was skipped, so the run tested something."""
    mdir = stub_matrix(tmp_path, stub_card())
    write_yaml(mdir / "models" / "pair.yaml", stub_pair_card(port=STUB_PORT + 1))
    inventory = stub_inventory(tmp_path, slots=1)
    result = run_pytest(
        "-q", "-n", "2", "-m", "low_latency or paired", f"--matrix={mdir}", f"--hosts={inventory}",
        f"--reports={tmp_path / 'reports'}", timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:]
    lines = result.stdout.splitlines()
    assert "[dayzero] 1 of 2 selected cells ran (1 passed)" in lines, result.stdout[-3000:]
    assert f"[dayzero] 1 skipped: needs 2 cpu hosts; inventory {inventory} has 1" in lines
    assert "[dayzero] 0 unsupported" in lines
    assert not any(line.startswith("dayzero: no cell ran") for line in lines)
