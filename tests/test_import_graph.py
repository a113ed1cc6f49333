"""No import circles among dayzero's modules or the devlab tooling's.

A circle means two modules each need a piece of the other: the piece belongs in one of them (or in
a small module of its own), and the circle hides that. An import inside a function counts as much as
one at the top: deferring it dodges the error Python would raise, not the circle. Read from the
source with `ast`, so the test imports nothing it checks.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ROOTS = {"dayzero": REPO / "dayzero", "devlab": REPO / "tools" / "devlab"}


def module_files() -> dict[str, Path]:
    """Every module of the checked packages by its dotted name (a package by its `__init__`)."""
    modules = {}
    for top, folder in ROOTS.items():
        for path in sorted(folder.rglob("*.py")):
            parts = [top, *path.relative_to(folder).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


def imported(module: str, path: Path, known: set[str]) -> set[str]:
    """The checked modules `module` imports anywhere in its source, at the top or in a function.

    `from a import b` is an import of `a.b` where that is a module, else of `a`.
    """
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            found.update(
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names
            )
    return {name for name in found if name in known and name != module}


def import_graph() -> dict[str, set[str]]:
    modules = module_files()
    known = set(modules)
    return {name: imported(name, path, known) for name, path in modules.items()}


def knots(graph: dict[str, set[str]]) -> list[set[str]]:
    """The groups of modules that each reach every other (Tarjan's strongly connected components)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.add(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(group)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def cycles(graph: dict[str, set[str]]) -> list[str]:
    """One shortest circle per knot, as `a -> b -> a`, naming the knot's other modules too."""
    out = []
    for group in knots(graph):
        circle = shortest_circle(graph, group)
        rest = sorted(group - set(circle))
        out.append(" -> ".join(circle) + (f"  (in one knot with {', '.join(rest)})" if rest else ""))
    return out


def shortest_circle(graph: dict[str, set[str]], group: set[str]) -> list[str]:
    """The shortest path from the group's first module back to itself, within the group."""
    start = min(group)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        ahead = []
        for node in frontier:
            for nxt in sorted(graph[node] & group):
                if nxt == start:
                    return [*paths[node], start]
                if nxt not in paths:
                    paths[nxt] = [*paths[node], nxt]
                    ahead.append(nxt)
        frontier = ahead
    raise AssertionError(f"no circle in {sorted(group)}")


def test_graph_sees_the_packages():
    graph = import_graph()
    assert "dayzero.run.cell" in graph and "devlab.testbed" in graph and "dayzero.plugin" in graph
    assert "dayzero.evidence" in graph["dayzero.run.cell"]


def test_finds_a_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == ["a -> b -> c -> a"]
    graph["c"] = {"a", "d"}
    assert cycles(graph) == ["a -> b -> c -> a  (in one knot with d)"]


def test_no_import_circles():
    found = cycles(import_graph())
    assert not found, "import circles:\n" + "\n".join(found)
