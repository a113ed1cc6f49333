"""A dry run prints each role as its host will run it, readable (issue 45 item 3): the SSH path
(jump hosts included), the port it serves, the host's engine_setup, one export a line, the command
one flag a line; a Slurm role's srun line, its step's script and the step's watchdog each apart,
where one srun line of 775 characters held them all in 8-deep quoting. What is shown is the same
shell: each wrapped command, joined back, is the recipe's argv word for word."""

from __future__ import annotations

import re
import shlex

import pytest

from dayzero.lab import slurm
from dayzero.lab.transport.base import watch_loop
from dayzero.run.preview import STEP, dry_run_text, statements, wrapped
from dayzero.spec.inventory import load_inventory
from dayzero.spec.matrix import load_matrix
from dayzero.spec.recipe import render

from .conftest import REPO, write_yaml

B300 = "kimi-k3.1-pro/b300/low_latency/baseline"
MOUNTS = "/models:/models,/scratch/dayzero:/scratch/dayzero"
NESTED = "'\"'\"'"  # a single quote inside single quotes: one level of quoting in another


def one_line(text: str) -> str:
    """Wrapped commands joined back: each ` \\` line continuation removed, as the shell reads it."""
    return re.sub(r" \\\n\s*", " ", text)


@pytest.fixture(scope="module")
def matrix():
    return load_matrix(REPO / "matrix")


def test_a_long_command_is_one_flag_a_line_and_the_same_words():
    argv = [
        "sglang",
        "serve",
        "--model-path",
        "/m/Kimi K3",
        "--trust-remote-code",
        "--tp",
        "8",
        "--x=1",
        "pos",
    ]
    lines = wrapped(argv, width=40)
    assert lines == [
        "sglang serve \\",
        "    --model-path '/m/Kimi K3' \\",
        "    --trust-remote-code \\",
        "    --tp 8 \\",
        "    --x=1 \\",
        "    pos",
    ]
    assert shlex.split(one_line("\n".join(lines))) == argv
    assert wrapped(argv[:4]) == ["sglang serve --model-path '/m/Kimi K3'"]  # short: one line
    parts = wrapped(["docker", "run", "--rm", "img"], ["sglang", "serve", "--tp", "8"], width=10)
    assert parts[0] == "docker run \\" and "    sglang serve \\" in parts, "each part starts a line"


def test_a_watchdog_loop_is_a_statement_a_line_and_the_same_script():
    loop = watch_loop("$1", "/s/owner.json", 120)
    lines = statements(loop)
    assert "; ".join(lines) == loop and len(lines) > 8
    assert all(len(x) <= 120 for x in lines), lines
    text = """a 'x; y'; b "$(c; d)"; case $s in 1) e;; esac"""
    assert statements(text) == ["a 'x; y'", 'b "$(c; d)"', "case $s in 1) e;; esac"]


def test_an_ssh_dry_run_shows_the_path_port_setup_and_command_one_flag_a_line(matrix, tmp_path):
    inv = load_inventory(REPO / "hosts" / "lab.example.yaml", set(matrix.hardware))
    text = dry_run_text(matrix, inv, matrix.cell(B300))
    assert "# server[0] on b300-01: dayzero@10.20.0.11:22 via dayzero@bastion.lab.example:22" in text
    assert "serves port 30000" in text
    lines = [x.strip() for x in text.splitlines()]
    assert "source /opt/sglang/venv/bin/activate" in lines, "the host's engine_setup"
    assert "export SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK=0" in lines
    assert "cd '/scratch/dayzero/runs/<run>/kimi-k3.1-pro__b300__low_latency__baseline'" in lines
    assert "--tp 8 \\" in lines and "--trust-remote-code \\" in lines
    assert max(len(x) for x in text.splitlines()) <= 110, text
    (launch,) = render(matrix, matrix.cell(B300), inv.for_hardware("b300")[:1]).launches
    command = next(x for x in one_line(text).splitlines() if "sglang serve" in x)
    assert shlex.split(command) == list(launch.argv), "the same words as the recipe's"


def test_a_setup_line_is_shown_with_its_secrets_masked(matrix, tmp_path):
    setup = "source /opt/sglang/activate; export HF_TOKEN=hf_notreallyasecret123"
    hosts = {"b300-01": {"address": "10.0.0.1", "hardware": "b300", "engine_setup": setup}}
    data = {"defaults": {"vars": {"model_root": "/m"}}, "hosts": hosts}
    inv = load_inventory(write_yaml(tmp_path / "lab.yaml", data), set(matrix.hardware))
    text = dry_run_text(matrix, inv, matrix.cell(B300))
    assert "source /opt/sglang/activate; export HF_TOKEN=***" in text, text
    assert "hf_notreallyasecret123" not in text


def test_a_slurm_dry_run_shows_srun_its_step_and_its_watchdog_apart_unnested(matrix):
    inv = load_inventory(REPO / "hosts" / "slurm.example.yaml", set(matrix.hardware))
    text = dry_run_text(matrix, inv, matrix.cell(B300))
    assert NESTED not in text, "no quoting inside quoting"
    assert max(len(x) for x in text.splitlines()) <= 120, max(text.splitlines(), key=len)
    lines = [x.strip() for x in text.splitlines()]
    assert "# slurm job, submitted on the login host dayzero@login.lab.example:22:" in lines
    assert "--gres gpu:nvidia_b300:8 \\" in lines
    assert "'--container-image=registry.lab.example#sglang:b300' \\" in lines
    assert f"bash -c {STEP}" in lines, "srun's task: the step below"
    step = lines[lines.index("#   STEP, the step's script on the node:") + 1 :]
    assert step[:3] == [
        "mkdir -p '/scratch/dayzero/runs/<run>/kimi-k3.1-pro__b300__low_latency__baseline' &&",
        "cd '/scratch/dayzero/runs/<run>/kimi-k3.1-pro__b300__low_latency__baseline' || exit 1",
        'setsid bash -c "$WATCHDOG" dayzero-watchdog $$ > /dev/null 2>&1 < /dev/null &',
    ]
    assert step[3] == "source /opt/sglang/venv/bin/activate", "the cluster's engine_setup"
    watchdog = lines[
        lines.index("#   WATCHDOG, the dead man's switch over the step's process group ($1):") + 1 :
    ]
    loop = watch_loop("$1", "/scratch/dayzero/jobs/leases/slot-<i>/owner.json", 120.0)
    assert "; ".join(watchdog) == loop, "the switch role_script starts, a statement a line"
    srun = next(x for x in one_line(text).splitlines() if x.strip().startswith("srun "))
    script = slurm.role_script("x", {}, "", "/w", ("/h", 120.0))
    pyxis = ("--container-image=registry.lab.example#sglang:b300", f"--container-mounts={MOUNTS}")
    expected = shlex.split(slurm.srun_line("<job>", "node0", script, (*pyxis, "--no-container-mount-home")))
    assert shlex.split(srun)[:-1] == expected[:-1], "srun's own flags, word for word"
