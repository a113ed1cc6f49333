"""The pytest plugin: cells become test items; each item runs one cell through `run_cell`.

Kept thin on purpose (labgrid's rule): options, markers, parametrization and reporting glue
live here; everything else is in the library. Markers are registered for every name in the
matrix, so `pytest -m b300` works under `--strict-markers` on any machine.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import allure
import pytest

from dayzero.errors import ConfigError
from dayzero.evidence import iter_evidence
from dayzero.redact import redact
from dayzero.report import allure_cell, allure_env, nightly
from dayzero.report.acceptance import DEFAULT_MAX_AGE_DAYS, write_acceptance
from dayzero.run.cell import NoHost, RunContext, candidate_hosts, new_run_id, now_iso, run_cell
from dayzero.spec.inventory import Inventory, load_inventory
from dayzero.spec.matrix import Cell, Matrix, load_matrix
from dayzero.spec.recipe import hosts_needed, render

MATRIX_KEY = pytest.StashKey[Matrix]()
INVENTORY_KEY = pytest.StashKey[Inventory]()
RUN_ID_KEY = pytest.StashKey[str]()
STARTED_KEY = pytest.StashKey[str]()
LINT_KEY = pytest.StashKey[dict[str, list[str]]]()
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
        "--lint",
        dest="dayzero_lint",
        action="store_true",
        help="parse every selected cell's commands with its engine's own parser first (dayzero lint); "
        "a cell whose command does not parse is not launched",
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
    group.addoption(
        "--baseline",
        dest="dayzero_baseline",
        default=None,
        help="reports dir of a previous run (the previous night): a cell whose metrics got worse "
        "beyond the noise band fails as a regression",
    )
    group.addoption(
        "--regression-band",
        dest="dayzero_regression_band",
        type=float,
        default=nightly.DEFAULT_BAND_PCT,
        help="default noise band in %% when a metric has no recorded spread "
        f"(default: {nightly.DEFAULT_BAND_PCT:g}; see dayzero.report.nightly)",
    )
    group.addoption(
        "--stale-after",
        dest="dayzero_stale_after",
        type=float,
        default=DEFAULT_MAX_AGE_DAYS,
        help="days after which evidence is Stale in the acceptance table "
        f"(default: {DEFAULT_MAX_AGE_DAYS:g})",
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
    config.stash[STARTED_KEY] = now_iso()
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
        tr.write_line(dry_run_text(matrix, inventory, cell))
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
def run_cell_checked(dayzero_context: RunContext, request: pytest.FixtureRequest):
    """Run a cell and turn its outcome into pytest's: skip, fail (product) or error (lab).

    Every failed or broken cell gets the Allure category label of why (lab fault, correctness,
    performance floor, regression against `--baseline`).
    """

    def run(cell: Cell):
        allure_cell.label_cell(cell, dayzero_context.matrix.card(cell))
        refused = request.config.stash.get(LINT_KEY, {}).get(cell.id)
        if refused:
            pytest.fail(
                "not launched: its engine would refuse it (--lint)\n  " + "\n  ".join(refused), pytrace=False
            )
        try:
            candidate_hosts(dayzero_context, cell)
        except NoHost as exc:
            pytest.skip(str(exc))
        try:
            outcome = run_cell(dayzero_context, cell)
        except Exception:
            allure_cell.label_failure(allure_cell.INFRASTRUCTURE)
            raise
        if outcome.error:
            allure_cell.label_failure(allure_cell.CORRECTNESS)
            pytest.fail(outcome.error, pytrace=False)
        failed = outcome.failed_checks
        if failed:
            allure_cell.label_failure(allure_cell.failure_category(c.to_json() for c in failed))
            lines = [f"{c.name}: {c.message}" for c in failed]
            raise AssertionError(f"{cell.id}: {len(failed)} check(s) failed\n  " + "\n  ".join(lines))
        _check_regressions(request.config, outcome)
        return outcome

    return run


_BASELINES: dict[Path, dict[str, dict]] = {}


def _check_regressions(config: pytest.Config, outcome) -> None:
    """With `--baseline`, a cell whose metrics got worse than the baseline's beyond noise fails."""
    given = config.getoption("dayzero_baseline")
    if not given or outcome.evidence_path is None:
        return
    base = Path(config.invocation_params.dir) / given
    if base not in _BASELINES:
        _BASELINES[base] = nightly.latest_by_cell(base)
    previous = _BASELINES[base].get(outcome.cell.id)
    if previous is None:
        return
    current = json.loads(Path(outcome.evidence_path).read_text())
    comparisons = nightly.compare_docs(previous, current, config.getoption("dayzero_regression_band"))
    rows = [
        {**c.__dict__, "regressed": c.regressed, "change_pct": round(c.change_pct, 2)} for c in comparisons
    ]
    allure.attach(
        json.dumps(rows, indent=2),
        f"comparison with baseline run {previous['run']['id']}",
        allure.attachment_type.JSON,
    )
    found = nightly.regressions(comparisons)
    if found:
        allure_cell.label_failure(allure_cell.REGRESSION)
        lines = [c.describe() for c in found[:8]]
        if len(found) > 8:
            lines.append(f"... and {len(found) - 8} more (see the comparison attachment)")
        raise AssertionError(
            f"{outcome.cell.id}: regression against run {previous['run']['id']}: {len(found)} metric(s) "
            "worse beyond the noise band\n  " + "\n  ".join(lines)
        )


def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    skip = config.getoption("dayzero_dry_run") or config.option.collectonly
    if hasattr(config, "workerinput") or skip or MATRIX_KEY not in config.stash or not _runs_suites(config):
        return
    reports = _path(config, "dayzero_reports")
    try:
        path = write_acceptance(
            config.stash[MATRIX_KEY], reports, max_age_days=config.getoption("dayzero_stale_after")
        )
    except ConfigError as exc:
        path = f"not written: {exc}"
    tr = config.pluginmanager.get_plugin("terminalreporter")
    if tr is not None:
        tr.write_line(f"[dayzero] acceptance table: {path}")
    _write_allure_extras(config, reports)


def _write_allure_extras(config: pytest.Config, reports: Path) -> None:
    """environment.properties, executor.json, categories.json for the run's Allure results."""
    results = getattr(config.option, "allure_report_dir", None)
    if not results:
        return
    started = config.stash.get(STARTED_KEY, "")
    try:
        docs = [doc for _, doc in iter_evidence(reports) if doc["run"]["started"] >= started]
    except ConfigError:
        docs = []
    facts = {
        "inventory": str(_path(config, "dayzero_hosts")),
        "matrix": str(_path(config, "dayzero_matrix")),
        "markers": config.getoption("markexpr") or "",
        "reports": str(reports),
    }
    run_ids = sorted({d["run"]["id"] for d in docs})
    allure_env.write_results_extras(
        Path(results),
        ", ".join(run_ids) or "none",
        facts,
        docs,
        config.stash[INVENTORY_KEY].secrets,
        build_url=os.environ.get("DAYZERO_BUILD_URL", ""),
    )
