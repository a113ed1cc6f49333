"""Shared helpers for dayzero's own tests: small matrices and inventories written to tmp dirs."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from dayzero.cache import engines_venv, model_path, server_binary
from dayzero.spec import parser_cache

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))  # devlab: testbed, stub engine, browser (not installed)

# A suite started in the background of a non-interactive shell (`cmd &`, nohup) inherits SIGINT
# ignored, and an ignored signal stays ignored across exec: every pytest run a test starts to
# send a Ctrl-C would never see it (seen: the interrupt sweeps "passed" through every SIGINT).
# The tests' own children get a terminal's default.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_configure(config: pytest.Config) -> None:
    from . import ci_skips, module_times, tiers

    module_times.configure(config)  # the slowest tests and the time per module, in every run
    ci_skips.configure(config)  # under CI, a skip is a failure naming what is missing
    tiers.configure(config)  # the fast tier first, then the e2e tier
    install_stub_engine()
    # The engines' parser answers (`dayzero lint`) are remembered for this session only, so each
    # session reads the matrix with SGLang's own parser at least once (the runs it starts share it).
    if not os.environ.get(parser_cache.ENV):
        os.environ[parser_cache.ENV] = tempfile.mkdtemp(prefix="dayzero-lint-")
        config.add_cleanup(lambda: shutil.rmtree(os.environ.pop(parser_cache.ENV), ignore_errors=True))


STUB_ENGINE = REPO / "tests" / "data" / "stub-engine"


def install_stub_engine() -> Path:
    """The stub cells' engine (`engine.name: stub`) is a package with a `dayzero.engines` entry
    point, as a vendor's would be: pip-installed once per version of its files into the dayzero
    cache (~3 s) and put on this process's and its children's path (xdist workers, the runs the
    tests start), never into the .venv a user runs dayzero from."""
    import fcntl
    import hashlib

    from dayzero import engines
    from dayzero.cache import cache_root

    files = sorted(p for p in STUB_ENGINE.rglob("*") if p.is_file() and "egg-info" not in str(p))
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in files)).hexdigest()[:16]
    target = cache_root() / "test-engines" / f"stub-{digest}"
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (target / "dayzero_stub_engine").exists():
            with tempfile.TemporaryDirectory() as build:  # pip builds in the source tree: a copy
                source = shutil.copytree(STUB_ENGINE, Path(build) / "src")
                partial = target.with_suffix(".partial")
                shutil.rmtree(partial, ignore_errors=True)
                subprocess.run(
                    [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                     "--no-deps", "--target", str(partial), str(source)],
                    check=True, capture_output=True,
                )  # fmt: skip
                partial.rename(target)
    if str(target) not in sys.path:
        sys.path.insert(0, str(target))
        paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        os.environ["PYTHONPATH"] = os.pathsep.join([str(target), *paths])
        engines.registered.cache_clear()
    return target


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
            "max_foreign_load": 0,  # no contention check: its preflight sample costs a second a cell
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


MAIN_JOB_REPORTS = "DAYZERO_TEST_MAIN_JOB_REPORTS"


@pytest.fixture(scope="session")
def main_job(tmp_path_factory) -> MainJob:
    """`pytest -m cpu` on the repository's matrix and the local inventory, as a user runs it.
    The main-job test judges it; the submission round trip packs its reports (every one-host cpu
    cell of the three engines), so the cells run once per session, not once per consumer.

    For local iteration only, DAYZERO_TEST_MAIN_JOB_REPORTS names the reports of an earlier
    `pytest -m cpu --reports=<dir>` to reuse instead of running the job (~9 min): its consumers
    then read those reports, and the main-job test, which judges the job's own output, fails.
    Reports run before this checkout's last commit are refused as such (timeline.before-commit):
    run the job again after committing. Unset (CI, and every run that counts), the job runs."""
    if reused := os.environ.get(MAIN_JOB_REPORTS):
        note = f"not run: reports reused from ${MAIN_JOB_REPORTS}={reused}"
        return MainJob(subprocess.CompletedProcess(["pytest", "-m", "cpu"], 0, note, ""), Path(reused))
    reports = tmp_path_factory.mktemp("main-job") / "reports"
    result = run_pytest("-m", "cpu", "-q", "-rA", f"--reports={reports}", timeout=2400)
    return MainJob(result, reports)


@pytest.fixture(scope="session")
def real_lab(main_job, tmp_path_factory):
    """The main job's reports packed by a vendor (tests/submission_corpus `lab_from_run`) and
    checked against the repository's own matrix: every one-host cpu cell of both engines, with
    their sweeps, as `pytest -m cpu` measured them. Packed once per session: the submission
    modules forge from this one bundle."""
    from .submission_corpus.lab import lab_from_run

    assert main_job.result.returncode == 0, main_job.result.stdout[-4000:]
    return lab_from_run(tmp_path_factory.mktemp("vendor"), main_job.reports, REPO / "matrix")


# Both labs a forgery is built from: the synthetic run (fast, every test session) and the main
# job's real run (an e2e test: it needs the engines and waits for `main_job`).
LABS = ["synthetic", pytest.param("real", marks=[pytest.mark.e2e])]


@pytest.fixture(scope="module", params=LABS)
def either_lab(request):
    """The module's own synthetic `lab` fixture, then `real_lab`: a forgery that applies to both
    is built from each, consistently, and must be refused alike."""
    if request.param == "real":
        if not engine_ready() and not os.environ.get("CI"):
            pytest.skip("llama-server not built: run tools/build-engine (CI builds it)")
        return request.getfixturevalue("real_lab")
    return request.getfixturevalue("lab")


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
    fields["max_foreign_load"] = 0  # no contention check: its preflight sample costs a second a cell
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


# Shared by every module that needs them, once per session (beds.py reads this module lazily).
from .beds import lab3, llama_cells, ssh_lab  # noqa: E402, F401
from .slurm_bed import slurm_cluster  # noqa: E402, F401
