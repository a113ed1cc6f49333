"""Engines side by side: where a card serves one hardware kind with several engines, one grid per
(model, kind) with a row per mode/strategy and a column per engine, read from acceptance rows.

Pure: rows in, grids out; acceptance.md prints them. acceptance.html shows a kind's engines as
adjacent rows of its grid (`dayzero.report.grid`) and names each comparison under it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from dayzero.spec.matrix import Cell


class _Row(Protocol):
    cell: Cell
    status: str


@dataclass(frozen=True)
class Grid:
    model: str
    hardware: str
    engines: tuple[str, ...]
    rows: tuple[tuple[str, tuple[str, ...]], ...]  # (mode/strategy, one status per engine; "" none)

    @property
    def title(self) -> str:
        return f"{self.model} on {self.hardware}: " + " vs ".join(self.engines)


def grids(rows: Iterable[_Row]) -> list[Grid]:
    by_kind: dict[tuple[str, str], dict[str, dict[str, str]]] = {}
    for r in rows:
        if r.cell.engine:
            variant = r.cell.id.split("/", 2)[2]  # mode/strategy[+options]
            cells = by_kind.setdefault((r.cell.model, r.cell.hardware), {})
            cells.setdefault(variant, {})[r.cell.engine] = r.status
    out = []
    for (model, hardware), cells in by_kind.items():
        engines = tuple(dict.fromkeys(e for statuses in cells.values() for e in statuses))
        body = tuple((variant, tuple(s.get(e, "") for e in engines)) for variant, s in cells.items())
        out.append(Grid(model, hardware, engines, body))
    return out


def to_markdown(found: list[Grid]) -> list[str]:
    lines: list[str] = []
    for g in found:
        lines += [f"## Engines side by side: {g.title}", ""]
        lines += ["| mode/strategy | " + " | ".join(g.engines) + " |", "|---|" + "---|" * len(g.engines)]
        lines += [
            f"| {variant} | " + " | ".join(s or "—" for s in statuses) + " |" for variant, statuses in g.rows
        ]
        lines.append("")
    return lines
