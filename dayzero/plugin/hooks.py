"""The plugin's hooks: options, markers, one test item per cell, `--dry-run`, end-of-run files.

Glue only (labgrid's rule): what a hook decides or writes is a library call
(`dayzero.run.preview`, `dayzero.report.acceptance`, `dayzero.report.allure_env`). Markers are
registered for every name in the matrix, so `pytest -m b300` works under `--strict-markers`.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dayzero import __version__
from dayzero.clock import now_iso
from dayzero.errors import ConfigError
from dayzero.lab.slurm_pool import unused_hosts
from dayzero.lab.transport.ssh.config import check_jumps
from dayzero.plugin import markers, signals
from dayzero.plugin.crash import CrashedCells
from dayzero.plugin.options import DEFAULTS, OPTIONS, option_path
from dayzero.plugin.stash import INVENTORY_KEY, LINT_KEY, MATRIX_KEY, RUN_ID_KEY, STARTED_KEY
from dayzero.plugin.tally import CellTally
from dayzero.report import allure_env
from dayzero.report.acceptance import write_acceptance
from dayzero.run.cell import new_run_id
from dayzero.run.host_vars import missing_vars
from dayzero.run.preview import dry_run_text, no_run
from dayzero.spec.inventory import load_inventory
from dayzero.spec.matrix import Cell, load_matrix


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("dayzero", "dayzero conformance cells")
    for flag, dest, kwargs in OPTIONS:
        if dest in DEFAULTS:
            kwargs = {"default": DEFAULTS[dest], **kwargs}
        group.addoption(flag, dest=dest, **kwargs)


def _runs_suites(config: pytest.Config) -> bool:
    suites = (config.rootpath / "suites").resolve()
    args = [a.split("::")[0] for a in config.args] or ["suites"]
    return any(
        suites in (Path(config.invocation_params.dir) / a).resolve().parents
        or (Path(config.invocation_params.dir) / a).resolve() == suites
        for a in args
    )


def _load(config: pytest.Config) -> bool:
    """Load the matrix and the inventory into the stash once; False outside a dayzero checkout."""
    if MATRIX_KEY in config.stash:
        return True
    if (
        config.getoption("dayzero_matrix") == DEFAULTS["dayzero_matrix"]
        and not option_path(config, "dayzero_matrix").is_dir()
    ):
        return False  # not a dayzero checkout: stay out of the way
    try:
        matrix = load_matrix(option_path(config, "dayzero_matrix"))
        inventory = load_inventory(option_path(config, "dayzero_hosts"), matrix.hardware)
        check_jumps(inventory)
    except ConfigError as exc:  # every error of the file, one line each
        raise pytest.UsageError("\n".join(f"dayzero: {line}" for line in str(exc).splitlines())) from None
    config.stash[MATRIX_KEY] = matrix
    config.stash[INVENTORY_KEY] = inventory
    return True


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    if not _load(config):
        return
    matrix = config.stash[MATRIX_KEY]
    config.stash[STARTED_KEY] = now_iso()
    for name, description in matrix.marker_names.items():
        config.addinivalue_line("markers", f"{name}: {description}")
    if _runs_suites(config) and not getattr(config.option, "allure_report_dir", None):
        config.option.allure_report_dir = str(option_path(config, "dayzero_reports") / "allure-results")
    if config.getoption("dayzero_dry_run"):
        config.option.dist = "no"  # the plan is printed at collection: xdist's workers would hide it
    if not hasattr(config, "workerinput") and _runs_suites(config):  # an xdist controller, or no xdist
        config.pluginmanager.register(CrashedCells(config), "dayzero-crashed-cells")
        config.pluginmanager.register(CellTally(config, matrix, config.stash[INVENTORY_KEY]), "dayzero-tally")
    signals.install(bool(config.option.fulltrace))


def pytest_report_header(config: pytest.Config) -> list[str]:
    """dayzero's version, and the inventory and matrix a run of the suites reads, under pytest's own."""
    head = f"dayzero: {__version__}"
    if MATRIX_KEY not in config.stash:
        return [head]
    where = (option_path(config, name) for name in ("dayzero_hosts", "dayzero_matrix"))
    return [f"{head}, inventory {next(where)}, matrix {next(where)}"]


def cell_param(cell: Cell, marks_by_name: dict[str, pytest.MarkDecorator] | None = None):
    """One test item's parameter; `marks_by_name` shares each marker's decorator across cells
    (`pytest.mark.<name>` re-checks the registered markers on every call: 40k calls at 10k cells)."""
    known = {} if marks_by_name is None else marks_by_name
    marks = [known.get(name) or known.setdefault(name, getattr(pytest.mark, name)) for name in cell.markers]
    if not cell.supported:
        marks.append(pytest.mark.skip(reason=f"unsupported: {cell.reason}"))
    return pytest.param(cell, id=cell.id, marks=marks)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "cell" in metafunc.fixturenames and MATRIX_KEY in metafunc.config.stash:
        matrix = metafunc.config.stash[MATRIX_KEY]
        marks: dict[str, pytest.MarkDecorator] = {}
        metafunc.parametrize("cell", [cell_param(c, marks) for c in matrix.cells])


@pytest.hookimpl(tryfirst=True)
def pytest_collection(session: pytest.Session) -> None:
    """A misspelt `-m` marker, or a host var a selected cell needs and the inventory lacks, stops
    a run of the suites before collection (and before a dry run's plan)."""
    config = session.config
    if MATRIX_KEY not in config.stash or not _runs_suites(config) or hasattr(config, "workerinput"):
        return
    markers.check_markexpr(config)
    matrix, inventory = config.stash[MATRIX_KEY], config.stash[INVENTORY_KEY]
    cells = markers.selected(config.getoption("markexpr"), matrix.cells)
    runnable = [c for c in cells if c.supported and not no_run(matrix, inventory, c)]
    if missing := missing_vars(matrix, inventory, runnable):
        raise pytest.UsageError("\n".join(f"dayzero: {m.line()}" for m in missing))
    kinds = {c.hardware for c in runnable}
    tr = config.pluginmanager.get_plugin("terminalreporter")
    for line in unused_hosts(inventory):  # Slurm serves the kind: its SSH hosts stand idle
        if tr is not None and line.split(":")[0] in kinds:
            tr.write_line(f"[dayzero] {line}", yellow=True)


def pytest_collection_finish(session: pytest.Session) -> None:
    config = session.config
    if MATRIX_KEY not in config.stash:
        return
    matrix, inventory = config.stash[MATRIX_KEY], config.stash[INVENTORY_KEY]
    cells = [
        c
        for item in session.items
        if (c := getattr(item, "callspec", None) and item.callspec.params.get("cell"))
    ]
    if config.getoption("dayzero_lint"):
        from dayzero.spec import lint

        try:
            config.stash[LINT_KEY] = lint.refusals(matrix, cells, lint.inventory_hosts(inventory))
        except lint.LintError as exc:
            raise pytest.UsageError(f"dayzero lint: {exc}") from None
    if not config.getoption("dayzero_dry_run"):
        return
    tr = config.pluginmanager.get_plugin("terminalreporter")
    for cell in cells:
        tr.write_line(dry_run_text(matrix, inventory, cell, config.getoption("dayzero_heartbeat_timeout")))
        if LINT_KEY in config.stash and cell.supported:
            refused = config.stash[LINT_KEY].get(cell.id) or [
                "every command parses (the engine's own parser)"
            ]
            for line in refused:
                tr.write_line(f"   lint: {line}")


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session):
    if session.config.getoption("dayzero_dry_run"):
        return True  # printed at collection; run nothing
    return None


@pytest.hookimpl(optionalhook=True, tryfirst=True)  # xdist's own (the CPU count) answers otherwise
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """`-n auto` starts one worker per host slot of the inventory and per job its Slurm cluster
    may hold at once (`max_jobs`): more would only wait on leases.

    xdist asks in its pytest_cmdline_main, before pytest_configure: the inventory is loaded here."""
    if not _load(config):
        return None
    inventory = config.stash[INVENTORY_KEY]
    jobs = inventory.slurm.max_jobs if inventory.slurm else 0
    return max(1, sum(h.slots for h in inventory.hosts) + jobs)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """xdist: every worker shares the controller's run id, so one run has one id."""
    node.workerinput["dayzero_run_id"] = node.config.stash.setdefault(RUN_ID_KEY, new_run_id())


def pytest_sessionfinish(session: pytest.Session) -> None:
    """The controller writes the acceptance table and the run's Allure extras (xdist workers do not)."""
    signals.mark_interrupted(session)
    config = session.config
    skip = config.getoption("dayzero_dry_run") or config.option.collectonly
    if hasattr(config, "workerinput") or skip or MATRIX_KEY not in config.stash or not _runs_suites(config):
        return
    reports = option_path(config, "dayzero_reports")
    try:
        path = write_acceptance(
            config.stash[MATRIX_KEY], reports, max_age_days=config.getoption("dayzero_stale_after")
        )
    except ConfigError as exc:
        path = f"not written: {exc}"
    tr = config.pluginmanager.get_plugin("terminalreporter")
    if tr is not None:
        tr.write_line(f"[dayzero] acceptance table: {path}")
    results = getattr(config.option, "allure_report_dir", None)
    if results:
        facts = {
            "inventory": str(option_path(config, "dayzero_hosts")),
            "matrix": str(option_path(config, "dayzero_matrix")),
            "markers": config.getoption("markexpr") or "",
            "reports": str(reports),
        }
        allure_env.write_run_extras(
            Path(results),
            reports,
            config.stash.get(STARTED_KEY, ""),
            facts,
            config.stash[INVENTORY_KEY].secrets,
            build_url=os.environ.get("DAYZERO_BUILD_URL", ""),
        )
