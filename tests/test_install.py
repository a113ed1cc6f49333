"""dayzero as an installed package: `pip install .` (non-editable) into a fresh venv, then
`dayzero report` and a cpu cell run from it, in a scratch copy of matrix/, hosts/, suites/ and
the pytest settings with no dayzero/ source folder next to them (so the checkout's source
cannot be imported by accident), and with the development tooling (tools/devlab) not installed.

Slow on purpose (a venv and a package build, then one real cpu cell). The dependencies come
from the interpreter running these tests (one .pth line: no network, no wheel downloads), but
dayzero itself is a real, non-editable install, and the test proves that copy is the one used.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import uuid
from pathlib import Path

import pytest

from dayzero import cache
from dayzero.report import allure_build
from dayzero.report.allure_build import ALLURE_CLI, ALLURE_DIR, ReportError, allure_cli

from .conftest import REPO, needs_engine

CPU_CELL = "smollm2-135m/cpu+llama.cpp/low_latency/baseline"


def _clean_env() -> dict:
    """No PYTHONPATH (a worktree run sets it to the checkout): only the venv's own packages count."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "DAYZERO_ALLURE")}


def _run(cmd: list, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(c) for c in cmd], cwd=cwd, env=_clean_env(), capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, Path]:
    """(the venv's python, a scratch checkout without dayzero/ source) with dayzero pip-installed."""
    root = tmp_path_factory.mktemp("install")
    source = root / "source"  # pip builds in the source tree: build from a copy, not the checkout
    shutil.copytree(REPO / "dayzero", source / "dayzero", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    venv = root / "venv"
    done = _run([sys.executable, "-m", "venv", "--without-pip", venv], root)
    assert done.returncode == 0, done.stderr
    python = venv / "bin" / "python"
    purelib = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = Path(_run([python, "-c", purelib], root).stdout.strip())
    deps = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}  # pip, pytest, paramiko...
    (site / "zz_test_deps.pth").write_text("".join(f"{d}\n" for d in sorted(deps)))
    done = _run(
        # the build backend (pyproject's build-system) comes from the index, as for any `pip install .`;
        # --ignore-installed: the dependencies' own (editable) dayzero is seen, and never touched
        [python, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps"]
        + ["--ignore-installed", source],
        root,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    scratch = root / "scratch"
    for name in ("matrix", "hosts", "suites"):
        shutil.copytree(REPO / name, scratch / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", scratch / "pyproject.toml")  # the pytest settings
    return python, scratch


@pytest.mark.slow
def test_the_installed_copy_is_used_and_ships_no_dev_tooling(installed):
    python, scratch = installed
    probe = (
        "import importlib.util as u, dayzero, dayzero.spec.yamlfile as y, dayzero.loadgen as g; "
        "print(dayzero.__file__); y.schema('evidence'); assert g.client_source(); "
        "print([m for m in ('dayzero.testbed', 'dayzero.engine', 'dayzero.loadgen.stub', "
        "'dayzero.report.browser', 'devlab') if u.find_spec(m)])"
    )
    done = _run([python, "-c", probe], scratch)
    assert done.returncode == 0, done.stderr
    where, tooling = done.stdout.splitlines()
    venv = python.parent.parent
    assert Path(where).is_relative_to(venv) and "site-packages" in where, where
    assert not Path(where).is_relative_to(REPO)
    assert tooling == "[]", f"development tooling installed: {tooling}"

    dayzero = python.parent / "dayzero"
    paths = _run([dayzero, "engine", "--print-paths"], scratch)
    assert paths.returncode == 0 and str(cache.server_binary()) in paths.stdout, paths.stderr
    build = _run([dayzero, "engine"], scratch)  # the build is a checkout's tools/build-engine
    assert build.returncode == 2 and "tools/build-engine" in build.stderr, build.stderr


@pytest.mark.slow
def test_report_from_the_installed_package(installed, tmp_path):
    python, scratch = installed
    dayzero = python.parent / "dayzero"
    reports = tmp_path / "reports"
    results = reports / "allure-results"
    results.mkdir(parents=True)
    result = {"uuid": str(uuid.uuid4()), "name": "a cell", "fullName": "suites/test_cells.py::a cell"}
    result.update(status="passed", stage="finished", start=1_700_000_000_000, stop=1_700_000_001_000)
    (results / f"{result['uuid']}-result.json").write_text(json.dumps(result))

    missing = _run([dayzero, "report", f"--reports={reports}"], scratch)  # no tools/allure here
    assert missing.returncode != 0
    assert "npm ci" in missing.stderr and "--allure" in missing.stderr, missing.stderr

    allure = Path(os.environ.get("DAYZERO_ALLURE") or REPO / allure_build.ALLURE_DIR)
    if not (allure / allure_build.ALLURE_CLI).is_file() and not os.environ.get("CI"):
        pytest.skip(f"Allure 3 not installed in {allure}: run tools/setup (npm ci in tools/allure)")
    built = _run([dayzero, "report", f"--reports={reports}", f"--allure={allure}"], scratch)
    assert built.returncode == 0, built.stdout + built.stderr
    assert (reports / "allure-report" / "index.html").stat().st_size > 0
    assert (reports / "acceptance.md").is_file()


@pytest.mark.slow
@pytest.mark.e2e
@needs_engine
def test_cpu_cell_from_the_installed_package(installed, tmp_path):
    """The installed plugin runs a real cell end to end. On the short protocol (no sweeps, one
    repetition): the path from an installed package is under test here; the main job
    (tests/test_e2e_cpu.py) runs this cell's full protocol."""
    from .submission_corpus.lab import relaxed_matrix

    python, scratch = installed
    reports = tmp_path / "reports"
    matrix = relaxed_matrix(tmp_path / "matrix")
    done = _run(
        [python, "-m", "pytest", "-p", "no:randomly", "-q", "-k", CPU_CELL, f"--matrix={matrix}"]
        + [f"--reports={reports}"],
        scratch,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "1 passed" in done.stdout, done.stdout[-2000:]
    (evidence,) = [json.loads(p.read_text()) for p in (reports / "evidence").glob("*.json")]
    assert evidence["cell"] == CPU_CELL and evidence["verdict"] == "passed"


def test_build_engine_runs_on_a_bare_python_before_any_venv():
    """tools/setup runs tools/build-engine before .venv exists: stdlib only (-S: no site-packages)."""
    done = subprocess.run(
        [sys.executable, "-S", "-I", REPO / "tools" / "build-engine", "--print-paths"],
        cwd=REPO.parent,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    expected = [
        "llama-server", str(cache.server_binary()),
        "rpc-server", str(cache.rpc_server_binary()),
        "model", str(cache.model_path()),
        "tools-template", str(cache.tools_template_path()),
        "engines-venv", str(cache.engines_venv()),
        "vllm-venv", str(cache.vllm_venv()),
        "router-venv", str(cache.router_venv()),
        "sglang-model", str(cache.sglang_model_path()),
    ]  # fmt: skip
    assert done.stdout.split() == expected


def _allure_at(directory: Path) -> Path:
    (directory / ALLURE_CLI).parent.mkdir(parents=True)
    (directory / ALLURE_CLI).touch()
    return (directory / ALLURE_CLI).resolve()


def test_allure_is_found_explicitly_then_in_the_checkout_the_run_is_in(tmp_path, monkeypatch):
    monkeypatch.delenv("DAYZERO_ALLURE", raising=False)
    cwd, near, given = tmp_path / "cwd", tmp_path / "checkout", tmp_path / "given"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    with pytest.raises(ReportError, match=r"npm ci.*--allure DIR or \$DAYZERO_ALLURE"):
        allure_cli(near=near)
    in_near = _allure_at(near / ALLURE_DIR)
    assert allure_cli(near=near) == in_near
    in_cwd = _allure_at(cwd / ALLURE_DIR)
    assert allure_cli(near=near) == in_cwd  # the working directory's checkout first
    monkeypatch.setenv("DAYZERO_ALLURE", str(given))
    with pytest.raises(ReportError, match=str(given)):  # named explicitly: no fallback to a guess
        allure_cli(near=near)
    in_given = _allure_at(given)
    assert allure_cli(near=near) == in_given
    monkeypatch.delenv("DAYZERO_ALLURE")
    assert allure_cli(given, near=near) == in_given  # --allure DIR
