"""A `-m` expression that names no registered marker is a usage error, before anything is collected.

pytest checks the names only under `--strict-markers` and only after collection: a dry run's plan
was printed first, and where the ini file was lost the misspelt name selected nothing, which reads
as an empty lab. A run of the suites checks them here, whatever the ini says, with the closest
marker as a hint. pytest offers no public parser of `-m`, so this leans on its `Expression`
(tested for it); `selected` evaluates it on the cells' markers for the checks made before
collection (`dayzero.run.host_vars`).
"""

from __future__ import annotations

from collections.abc import Iterable

import pytest
from _pytest.mark.expression import Expression

from dayzero.spec.matrix import Cell
from dayzero.spec.suggest import did_you_mean


def unknown_markers(expression: str, registered: set[str]) -> list[str]:
    """One message per name of `expression` that is no registered marker; [] for none."""
    try:
        names = Expression.compile(expression).idents()
    except SyntaxError as exc:
        return [f"-m {expression!r} does not parse: {exc.msg} (column {exc.offset})"]
    return [
        f"-m {expression!r}: unknown marker {name!r}{did_you_mean(name, registered)} (see `pytest --markers`)"
        for name in sorted(names - registered)
    ]


def selected(expression: str | None, cells: Iterable[Cell]) -> list[Cell]:
    """The cells `-m expression` selects (all without one), by their markers alone: what a check
    made before collection can know (`-k` and node ids narrow it later)."""
    if not expression:
        return list(cells)
    compiled = Expression.compile(expression)

    def marked(cell: Cell) -> bool:
        return compiled.evaluate(lambda name, **kwargs: not kwargs and name in cell.markers)

    return [c for c in cells if marked(c)]


def check_markexpr(config: pytest.Config) -> None:
    expression = config.getoption("markexpr")
    if not expression:
        return
    registered = {line.split(":", 1)[0].split("(")[0].strip() for line in config.getini("markers")}
    if problems := unknown_markers(expression, registered):
        raise pytest.UsageError("\n".join(f"dayzero: {line}" for line in problems))
