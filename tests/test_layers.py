"""Packages import downward only (issue 40, item 4): the layering of ARCHITECTURE.md as data,
every import of the package held to it, beside the module-level circle test.

`LAYERS` lists the packages lowest first; a package may import any package below it, never one
above. `DEBTS` are today's upward imports, each named: a new one is red, and one that is
repaid must leave the list (so the list only shrinks). ARCHITECTURE.md shows the same order
between its `<!-- layers -->` marks, checked here against `LAYERS`.
"""

from __future__ import annotations

import re

from .test_import_graph import REPO, import_graph

BASE = ("dayzero", "atomic", "clock", "errors", "escape", "exitcodes", "redact", "cache", "plugins")
LAYERS: tuple[tuple[str, ...], ...] = (
    BASE,
    ("devices",),
    ("engines",),
    ("spec",),
    ("loadgen",),
    ("lab",),
    ("checks",),
    ("evidence",),
    ("run",),
    ("history",),
    ("report",),
    ("site",),
    ("submission",),
    ("plugin",),
    ("cli",),
)
DEBTS: set[tuple[str, str]] = set()  # (importer, imported): upward imports still to remove


def package(module: str) -> str:
    """`dayzero.spec.card` -> `spec`; `dayzero.clock` -> `clock`; `dayzero` -> `dayzero`."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def level() -> dict[str, int]:
    return {name: i for i, layer in enumerate(LAYERS) for name in layer}


def upward(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    """Every import of a module by one in a lower layer (same-layer imports are allowed)."""
    at = level()
    return {
        (a, b)
        for a, targets in graph.items()
        if a.startswith("dayzero")
        for b in targets
        if b.startswith("dayzero") and at[package(b)] > at[package(a)]
    }


def dayzero_graph() -> dict[str, set[str]]:
    return {m: t for m, t in import_graph().items() if m.startswith("dayzero")}


def test_every_package_has_a_layer():
    missing = {package(m) for m in dayzero_graph()} - set(level())
    assert not missing, f"packages with no layer in LAYERS (and ARCHITECTURE.md): {sorted(missing)}"


def test_packages_import_downward_only():
    found = upward(dayzero_graph())
    new = found - DEBTS
    assert not new, "upward imports (a lower layer importing a higher one):\n" + "\n".join(
        f"  {a} -> {b} ({package(a)} is below {package(b)})" for a, b in sorted(new)
    )
    repaid = DEBTS - found
    assert not repaid, f"repaid debts still listed in DEBTS: {sorted(repaid)}"


def test_a_planted_upward_import_is_found():
    graph = dayzero_graph()
    graph["dayzero.spec.card"] = graph["dayzero.spec.card"] | {"dayzero.run.cell"}
    assert ("dayzero.spec.card", "dayzero.run.cell") in upward(graph) - DEBTS


def test_architecture_shows_the_layers_of_the_data():
    text = (REPO / "ARCHITECTURE.md").read_text()
    shown = re.search(r"<!-- layers -->\n(.*?)\n<!-- /layers -->", text, re.S)
    assert shown, "ARCHITECTURE.md has no <!-- layers --> section"
    layers = [re.findall(r"`([\w.]+)`", part) for part in shown.group(1).split("→")]
    assert [tuple(layer) for layer in layers] == list(LAYERS)


def test_architectures_reads_column_names_every_package_a_folder_imports():
    """The table's "reads" column is held to the imports: a folder that starts importing another
    package says so there (or reads "every package below it")."""
    imports: dict[str, set[str]] = {}
    for a, targets in dayzero_graph().items():
        for b in targets:
            if package(a) != package(b) and package(b) not in BASE:
                imports.setdefault(package(a), set()).add(package(b))
    rows = {}
    for line in (REPO / "ARCHITECTURE.md").read_text().splitlines():
        if line.startswith("| `"):
            cells = line.split("|")
            rows[cells[1].strip().strip("`").rstrip("/").removesuffix(".py")] = cells[3]
    unsaid = {
        (pkg, imported)
        for pkg, targets in imports.items()
        for imported in targets
        if "every package below it" not in rows.get(pkg, "") and f"`{imported}`" not in rows.get(pkg, "")
    }
    assert not unsaid, "ARCHITECTURE.md's reads column leaves out: " + ", ".join(
        f"{p} reads {i}" for p, i in sorted(unsaid)
    )
