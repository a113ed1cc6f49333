"""Shared helpers for dayzero's own tests: small matrices and inventories written to tmp dirs."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from dayzero.lab.cache import engines_venv, model_path, server_binary

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))  # devlab: testbed, stub engine, browser (not installed)

# A suite started in the background of a non-interactive shell (`cmd &`, nohup) inherits SIGINT
# ignored, and an ignored signal stays ignored across exec: every pytest run a test starts to
# send a Ctrl-C would never see it (seen: the interrupt sweeps "passed" through every SIGINT).
# The tests' own children get a terminal's default.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def write_yaml(path: Path, data) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.fixture
def matrix_dir(tmp_path: Path) -> Path:
    """A copy of the repository's matrix that a test may break."""
    dest = tmp_path / "matrix"
    shutil.copytree(REPO / "matrix", dest)
    return dest


def fake_card(command: list[str], port: int, *, model: str = "fake", health: str = "/health") -> dict:
    """A one-cell cpu model card whose server is `command` (for deployment fault tests)."""
    return {
        "model": model,
        "engine": {"name": "fake", "health_path": health, "bind": "{host}"},
        "recipe": {"port": port, "command": command},
        "hardware": {"cpu": {"nodes": 1}},
        "modes": {"low_latency": {"concurrency": 1}},
        "strategies": {"baseline": {}},
        "cells": [{"hardware": ["cpu"], "modes": ["low_latency"], "strategies": ["baseline"]}],
    }


@pytest.fixture
def local_inventory(tmp_path: Path):
    """Write an inventory with one local cpu host whose workdir is in tmp_path."""

    def make(**fields) -> Path:
        host = {
            "transport": "local",
            "address": "127.0.0.1",
            "hardware": "cpu",
            "accelerators": 1,
            "workdir": str(tmp_path / "work"),
            "engine_setup": f'export PATH="{server_binary().parent}:{engines_venv() / "bin"}:$PATH"',
            "vars": {"model_root": str(model_path().parent)},
        }
        host.update(fields)
        return write_yaml(tmp_path / "hosts.yaml", {"hosts": {"local": host}})

    return make


def engine_ready() -> bool:
    return server_binary().exists() and model_path().exists()


needs_engine = pytest.mark.skipif(
    not engine_ready() and not os.environ.get("CI"),
    reason="llama-server not built: run tools/build-engine (CI builds it; there this test never skips)",
)


def run_pytest(*args: str, cwd: Path = REPO, timeout: float = 900, env: dict | None = None):
    """Run pytest on the repository's suites in a subprocess, as a user would."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:randomly", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


@dataclass(frozen=True)
class MainJob:
    """The README's main job, run once per test session: its output and its reports."""

    result: subprocess.CompletedProcess
    reports: Path


@pytest.fixture(scope="session")
def main_job(tmp_path_factory) -> MainJob:
    """`pytest -m cpu` on the repository's matrix and the local inventory, as a user runs it.
    The main-job test judges it; the submission round trip packs its reports (every one-host cpu
    cell of both engines), so the cells run once per session, not once per consumer."""
    reports = tmp_path_factory.mktemp("main-job") / "reports"
    result = run_pytest("-m", "cpu", "-q", "-rA", f"--reports={reports}", timeout=2400)
    return MainJob(result, reports)


def processes_matching(needle: str) -> list[str]:
    # -ww: unlimited width. Without it ps cuts each line at $COLUMNS (80 under pytest), so a needle
    # past that column (`--host <address>` after a long model path) was never found.
    out = subprocess.run(["ps", "-ww", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if needle in line and "ps -eo" not in line]


def one_card_context(tmp_path: Path, card: dict, host: dict, name: str = "local", **options):
    """A RunContext over a matrix of one card (the repository's hardware catalogue) and an
    inventory of one local host: `host` over a local cpu host whose workdir is in tmp_path."""
    from dayzero.run.cell import RunContext, new_run_id
    from dayzero.spec.inventory import load_inventory
    from dayzero.spec.matrix import load_matrix

    mdir = tmp_path / "matrix"
    (mdir / "models").mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "matrix" / "hardware.yaml", mdir / "hardware.yaml")
    write_yaml(mdir / "models" / f"{card['model']}.yaml", card)
    fields = {"transport": "local", "address": "127.0.0.1", "hardware": "cpu", "accelerators": 1}
    inv = write_yaml(
        tmp_path / "hosts.yaml", {"hosts": {name: {**fields, "workdir": str(tmp_path / "work"), **host}}}
    )
    matrix = load_matrix(mdir)
    options = {"lease_wait": 30, "say": lambda m: None, **options}
    return RunContext(
        matrix,
        load_inventory(inv, set(matrix.hardware)),
        tmp_path / "reports",
        tmp_path / "goldens",
        new_run_id(),
        **options,
    )
