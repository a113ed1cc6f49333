"""The acceptance grid: one grid per model, the cookbook's checklist shape. Hardware kinds are rows
(a kind served by several engines gives adjacent rows, `cpu+llama.cpp` then `cpu+sglang`, so its
engines compare side by side), mode x strategy[+options] are columns, each cell a status badge.

At Kimi's size (14 kinds x 20 columns, 240 cells) a badge is a glyph in its status colour: the
word would make the grid wider than a screen. The legend says what each glyph means and doubles
as the filters; a badge's title carries the cell, its status, detail and source.

`grids` is pure (acceptance rows in, grids out); `to_html` renders them for acceptance.html."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from dayzero.redact import redact
from dayzero.spec.matrix import Cell

# The label a row prints (its status; a vendor's Verified says whose word it rests on) -> glyph.
GLYPHS = {
    "Verified": "✓",
    "Verified (reproduced)": "✓✓",
    "Verified (vendor)": "✓v",
    "Failed": "✗",
    "Inconclusive": "~",
    "Broken": "!",
    "Stale": "↻",
    "Published": "P",
    "Pending": "…",
    "Needs data": "?",
    "Unsupported": "–",
}


class _Row(Protocol):
    cell: Cell
    status: str
    label: str
    detail: str
    source: str
    evidence: Path | None


def column_of(cell: Cell) -> str:
    """mode/strategy[+options]: the part of the id after the kind."""
    return cell.id.split("/", 2)[2]


@dataclass(frozen=True)
class Grid:
    model: str
    kinds: tuple[str, ...]  # rows, a hardware's engines adjacent
    columns: tuple[str, ...]  # mode/strategy[+options], in the card's order
    cells: Mapping[tuple[str, str], _Row]  # (kind, column) -> row; absent: not in the matrix

    def cell(self, kind: str, column: str) -> _Row | None:
        return self.cells.get((kind, column))

    @property
    def modes(self) -> list[tuple[str, int]]:
        """(mode, how many columns it spans), for the header's first line."""
        out: list[tuple[str, int]] = []
        for column in self.columns:
            mode = column.split("/", 1)[0]
            if out and out[-1][0] == mode:
                out[-1] = (mode, out[-1][1] + 1)
            else:
                out.append((mode, 1))
        return out


def grids(table: Iterable[_Row]) -> list[Grid]:
    by_model: dict[str, list[_Row]] = {}
    for r in table:
        by_model.setdefault(r.cell.model, []).append(r)
    out = []
    for model, found in by_model.items():
        hardware = list(dict.fromkeys(r.cell.hardware for r in found))
        kinds = sorted(
            dict.fromkeys(r.cell.kind for r in found), key=lambda k: hardware.index(k.split("+")[0])
        )
        columns = tuple(dict.fromkeys(column_of(r.cell) for r in found))
        cells = {(r.cell.kind, column_of(r.cell)): r for r in found}
        out.append(Grid(model, tuple(kinds), columns, cells))
    return out


def labels(found: Sequence[Grid]) -> list[str]:
    """The labels the grids show, in the legend's order."""
    seen = {r.label for g in found for r in g.cells.values()}
    return [label for label in GLYPHS if label in seen] + sorted(seen - GLYPHS.keys())


STYLE = (
    "table.grid{border-collapse:collapse;margin:.5em 0 1.5em;font-size:13px}"
    "table.grid th,table.grid td{border:1px solid #e2e8f0;padding:2px;text-align:center}"
    "table.grid th.kind{text-align:left;padding:2px 8px;white-space:nowrap;position:sticky;left:0;"
    "background:#f8fafc}"
    "table.grid th.mode{font-weight:600;background:#f1f5f9;font-size:12px}"
    "table.grid th.strategy{writing-mode:vertical-rl;transform:rotate(180deg);font-weight:normal;"
    "font-size:12px;padding:4px 2px;white-space:nowrap;max-height:11em}"
    "table.grid td.none{background:repeating-linear-gradient(45deg,#fff,#fff 3px,#f1f5f9 3px,#f1f5f9 6px)}"
    "table.grid .badge{display:inline-block;min-width:1.6em;padding:1px 3px;font-size:12px;"
    "text-decoration:none}"
    "table.grid td.off .badge{opacity:.12}tr.off{display:none}"
    "table.grid svg.spark{display:block;margin:2px auto 0}"
    "fieldset.filters{border:1px solid #e2e8f0;display:inline-block;margin-bottom:1em}"
    "fieldset.filters label{margin-right:1em;white-space:nowrap}"
)

# Unticking a status fades its badges in the grids and hides its rows of the list.
SCRIPT = (
    "<script>document.querySelectorAll('input[data-filter]').forEach(box=>box.addEventListener("
    "'change',()=>{const off=new Set([...document.querySelectorAll('input[data-filter]')]"
    ".filter(b=>!b.checked).map(b=>b.dataset.filter));"
    "document.querySelectorAll('[data-label]').forEach(e=>e.classList.toggle('off',off.has(e.dataset.label)))"
    "}));</script>"
)


def to_html(
    found: Sequence[Grid],
    esc: Callable[[str], str],
    badge: Callable[[str, str, str], str],
    href: Callable[[Path], str],
    notes: Mapping[str, list[str]],
    trends: Mapping[str, str] | None = None,
) -> list[str]:
    """`badge(status, text, tag_attrs)` renders a badge as the acceptance page does; `href` links an
    evidence file; `notes` are lines to print under a model's grid; `trends` a cell's sparkline
    across nights (dayzero.report.pictures, our own SVG), drawn under its badge."""
    counts: dict[str, int] = {}
    for g in found:
        for r in g.cells.values():
            counts[r.label] = counts.get(r.label, 0) + 1
    legend = "".join(
        f'<label><input type="checkbox" checked data-filter="{esc(label)}"> '
        f"{badge(_status(label), esc(GLYPHS.get(label, label)), '')} {esc(label)} ({counts[label]})</label>"
        for label in labels(found)
    )
    out = [f'<fieldset class="filters"><legend>Show</legend>{legend}</fieldset>']
    for g in found:
        out += _grid(g, esc, badge, href, trends or {})
        out += [f"<p>{esc(line)}</p>" for line in notes.get(g.model, [])]
    return [*out, SCRIPT]


def _status(label: str) -> str:
    return label.split(" (", 1)[0]


def _grid(g: Grid, esc, badge, href, trends: Mapping[str, str]) -> list[str]:
    modes = "".join(f'<th class="mode" colspan="{n}">{esc(mode)}</th>' for mode, n in g.modes)
    strategies = "".join(
        f'<th class="strategy" data-column="{esc(c)}">{esc(c.split("/", 1)[1])}</th>' for c in g.columns
    )
    out = [
        f"<h2>{esc(g.model)}</h2>",
        f'<table class="grid" data-model="{esc(g.model)}"><thead>',
        f'<tr><th class="kind" rowspan="2">hardware</th>{modes}</tr>',
        f"<tr>{strategies}</tr></thead><tbody>",
    ]
    for kind in g.kinds:
        tds = []
        for column in g.columns:
            r = g.cell(kind, column)
            if r is None:
                tds.append(f'<td class="none" title="{esc(f"{kind} has no {column} in the matrix")}"></td>')
                continue
            title = (
                f"{r.cell.id}: {r.label}"
                + (f". {redact(r.detail)}" if r.detail else "")
                + f" (source: {r.source})"
            )
            text = esc(GLYPHS.get(r.label, r.label))
            link = f' href="{esc(href(r.evidence))}"' if r.evidence else ""
            tds.append(
                f'<td data-cell="{esc(r.cell.id)}" data-kind="{esc(kind)}" data-column="{esc(column)}"'
                f' data-status="{esc(r.status)}" data-label="{esc(r.label)}" title="{esc(title)}">'
                f"{badge(r.status, text, link)}{trends.get(r.cell.id, '')}</td>"
            )
        out.append(f'<tr data-kind="{esc(kind)}"><th class="kind">{esc(kind)}</th>{"".join(tds)}</tr>')
    return [*out, "</tbody></table>"]
