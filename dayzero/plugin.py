"""The pytest plugin: cells become test items; each item runs one cell through `run_cell`.

Kept thin on purpose (labgrid's rule): options, markers, parametrization and reporting glue
live here; everything else is in the library. Markers are registered for every name in the
matrix, so `pytest -m b300` works under `--strict-markers` on any machine.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import allure
import pytest

from dayzero.cellrun import NoHost, RunContext, candidate_hosts, new_run_id, now_iso, run_cell
from dayzero.errors import ConfigError
from dayzero.inventory import Inventory, load_inventory
from dayzero.matrix import Cell, Matrix, load_matrix
from dayzero.recipe import hosts_needed, render
from dayzero.redact import redact
from dayzero.report.acceptance import write_acceptance

MATRIX_KEY = pytest.StashKey[Matrix]()
INVENTORY_KEY = pytest.StashKey[Inventory]()
RUN_ID_KEY = pytest.StashKey[str]()
DEFAULTS = {
    "dayzero_hosts": "hosts/local.yaml",
    "dayzero_matrix": "matrix",
    "dayzero_reports": "reports",
    "dayzero_goldens": "suites/goldens",
}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("dayzero", "dayzero conformance cells")
    group.addoption(
        "--hosts",
        dest="dayzero_hosts",
        default=DEFAULTS["dayzero_hosts"],
        help="inventory of lab hosts (default: hosts/local.yaml, the embedded CPU host)",
    )
    group.addoption(
        "--matrix",
        dest="dayzero_matrix",
        default=DEFAULTS["dayzero_matrix"],
        help="matrix directory: hardware.yaml and models/*.yaml (default: matrix)",
    )
    group.addoption(
        "--dry-run",
        dest="dayzero_dry_run",
        action="store_true",
        help="print, per selected cell, the host(s) it would use and the exact commands; run nothing",
    )
    group.addoption(
        "--reports",
        dest="dayzero_reports",
        default=DEFAULTS["dayzero_reports"],
        help="where evidence, raw records, logs and acceptance.md go (default: reports)",
    )
    group.addoption(
        "--goldens",
        dest="dayzero_goldens",
        default=DEFAULTS["dayzero_goldens"],
        help="golden outputs directory (default: suites/goldens)",
    )
    group.addoption(
        "--ready-deadline",
        dest="dayzero_ready_deadline",
        type=float,
        default=600.0,
        help="seconds a recipe may take to become ready (default: 600)",
    )
    group.addoption(
        "--heartbeat-timeout",
        dest="dayzero_heartbeat_timeout",
        type=float,
        default=120.0,
        help="seconds without a heartbeat from this controller after which a host kills the cell's "
        "servers by itself (controller killed, connection lost; default: 120)",
    )
    group.addoption(
        "--lease-wait",
        dest="dayzero_lease_wait",
        type=float,
        default=1800.0,
        help="seconds a cell waits for a free matching host (default: 1800)",
    )


def _path(config: pytest.Config, option: str) -> Path:
    """Defaults are relative to the rootdir (the repository); given paths to where pytest ran."""
    given = config.getoption(option)
    value = Path(given)
    if value.is_absolute():
        return value
    base = config.rootpath if given == DEFAULTS[option] else Path(config.invocation_params.dir)
    return base / value


def _runs_suites(config: pytest.Config) -> bool:
    suites = (config.rootpath / "suites").resolve()
    args = [a.split("::")[0] for a in config.args] or ["suites"]
    return any(
        suites in (Path(config.invocation_params.dir) / a).resolve().parents
        or (Path(config.invocation_params.dir) / a).resolve() == suites
        for a in args
    )


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    if (
        config.getoption("dayzero_matrix") == DEFAULTS["dayzero_matrix"]
        and not _path(config, "dayzero_matrix").is_dir()
    ):
        return  # not a dayzero checkout: stay out of the way
    try:
        matrix = load_matrix(_path(config, "dayzero_matrix"))
        inventory = load_inventory(_path(config, "dayzero_hosts"), set(matrix.hardware))
    except ConfigError as exc:
        raise pytest.UsageError(f"dayzero: {exc}") from None
    config.stash[MATRIX_KEY] = matrix
    config.stash[INVENTORY_KEY] = inventory
    for name, description in matrix.marker_names.items():
        config.addinivalue_line("markers", f"{name}: {description}")
    if _runs_suites(config) and not getattr(config.option, "allure_report_dir", None):
        config.option.allure_report_dir = str(_path(config, "dayzero_reports") / "allure-results")
    # SIGTERM unwinds like Ctrl-C so every deployment's `finally` kills its process groups.
    if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
        signal.signal(signal.SIGTERM, _raise_interrupt)


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def cell_param(cell: Cell):
    marks = [getattr(pytest.mark, name) for name in cell.markers]
    if not cell.supported:
        marks.append(pytest.mark.skip(reason=f"unsupported: {cell.reason}"))
    return pytest.param(cell, id=cell.id, marks=marks)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "cell" in metafunc.fixturenames and MATRIX_KEY in metafunc.config.stash:
        matrix = metafunc.config.stash[MATRIX_KEY]
        metafunc.parametrize("cell", [cell_param(c) for c in matrix.cells])


def dry_run_text(matrix: Matrix, inventory: Inventory, cell: Cell) -> str:
    head = f"== {cell.id}  [{cell.published}]"
    if not cell.supported:
        return f"{head}\n   unsupported: {cell.reason}"
    card = matrix.card(cell)
    needed = hosts_needed(card, cell)
    hosts = inventory.for_hardware(cell.hardware)
    if len(hosts) < needed:
        return (
            f"{head}\n   no run: needs {needed} host(s) with hardware {cell.hardware!r}, "
            f"inventory {inventory.path} has {len(hosts)}"
        )
    recipe = render(matrix, cell, hosts[:needed])
    lines = [f"{head}  recipe {recipe.digest}"]
    for lc in recipe.launches:
        lines.append(f"   # {lc.role}[{lc.rank}] on {lc.host} ({lc.address})")
        lines.append(f"   {redact(lc.shell, inventory.secrets)}")
    return "\n".join(lines)


def pytest_collection_finish(session: pytest.Session) -> None:
    config = session.config
    if not config.getoption("dayzero_dry_run") or MATRIX_KEY not in config.stash:
        return
    tr = config.pluginmanager.get_plugin("terminalreporter")
    matrix, inventory = config.stash[MATRIX_KEY], config.stash[INVENTORY_KEY]
    for item in session.items:
        cell = getattr(item, "callspec", None) and item.callspec.params.get("cell")
        if cell is not None:
            tr.write_line(dry_run_text(matrix, inventory, cell))


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session):
    if session.config.getoption("dayzero_dry_run"):
        return True  # printed at collection; run nothing
    return None


@pytest.fixture(scope="session")
def dayzero_context(request: pytest.FixtureRequest):
    config = request.config
    worker = os.environ.get("PYTEST_XDIST_WORKER", "master")
    run_id = os.environ.get("DAYZERO_RUN_ID") or getattr(config, "workerinput", {}).get("dayzero_run_id")
    tr = config.pluginmanager.get_plugin("terminalreporter")

    capman = config.pluginmanager.get_plugin("capturemanager")

    reports = _path(config, "dayzero_reports")

    def say(message: str) -> None:
        """Progress goes to the terminal live, past output capture (as pytest's live logs do).

        xdist workers cannot reach the terminal: every worker also appends to the run's
        `progress.log` (`tail -f reports/runs/<run id>/progress.log` to follow a parallel run).
        """
        log_file = reports / "runs" / ctx.run_id / "progress.log"
        log_file.parent.mkdir(parents=True, exist_ok=True)
        with log_file.open("a") as out:
            out.write(f"{now_iso()} [{worker}] {message}\n")
        if tr is None or worker != "master":
            return
        if capman is None:
            tr.write_line(f"[dayzero] {message}")
            return
        with capman.global_and_fixture_disabled():
            tr.write_line(f"[dayzero] {message}")

    ctx = RunContext(
        matrix=config.stash[MATRIX_KEY],
        inventory=config.stash[INVENTORY_KEY],
        reports_dir=reports,
        goldens_dir=_path(config, "dayzero_goldens"),
        run_id=run_id or new_run_id(),
        worker=worker,
        ready_deadline=config.getoption("dayzero_ready_deadline"),
        lease_wait=config.getoption("dayzero_lease_wait"),
        heartbeat_timeout=config.getoption("dayzero_heartbeat_timeout"),
        say=say,
    )
    yield ctx
    ctx.close()


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """`-n auto` starts one worker per host slot of the inventory: more would only wait on leases."""
    if INVENTORY_KEY not in config.stash:
        return None
    return max(1, sum(h.slots for h in config.stash[INVENTORY_KEY].hosts))


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """xdist: every worker shares the controller's run id, so one run has one id."""
    node.workerinput["dayzero_run_id"] = node.config.stash.setdefault(RUN_ID_KEY, new_run_id())


@pytest.fixture
def run_cell_checked(dayzero_context: RunContext):
    """Run a cell and turn its outcome into pytest's: skip, fail (product) or error (lab)."""

    def run(cell: Cell):
        allure.dynamic.epic(cell.model)
        allure.dynamic.feature(cell.hardware)
        allure.dynamic.story(cell.mode)
        allure.dynamic.tag(cell.strategy, *cell.options)
        allure.dynamic.parameter("cell", cell.id)
        try:
            candidate_hosts(dayzero_context, cell)
        except NoHost as exc:
            pytest.skip(str(exc))
        outcome = run_cell(dayzero_context, cell)
        if outcome.error:
            pytest.fail(outcome.error, pytrace=False)
        failed = outcome.failed_checks
        if failed:
            lines = [f"{c.name}: {c.message}" for c in failed]
            raise AssertionError(f"{cell.id}: {len(failed)} check(s) failed\n  " + "\n  ".join(lines))
        return outcome

    return run


def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    skip = config.getoption("dayzero_dry_run") or config.option.collectonly
    if hasattr(config, "workerinput") or skip or MATRIX_KEY not in config.stash or not _runs_suites(config):
        return
    try:
        path = write_acceptance(config.stash[MATRIX_KEY], _path(config, "dayzero_reports"))
    except ConfigError as exc:
        path = f"not written: {exc}"
    tr = config.pluginmanager.get_plugin("terminalreporter")
    if tr is not None:
        tr.write_line(f"[dayzero] acceptance table: {path}")
