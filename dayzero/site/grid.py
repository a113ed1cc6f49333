"""The site's front page: per model, its cells grouped by hardware kind against the labs that ran
them (each entry the latest verdict and the main series' sparkline) and the vendors that
submitted them (each entry its reproduction status, the column whose: `page.whose`), the labs'
benchmark cards of the model, and every night."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence

from dayzero.site.cards import card_href
from dayzero.site.page import cell_href, page, whose


def index_page(
    grid: Mapping, labs: Sequence[str], nights: Sequence[str], cards: Sequence[tuple[str, str, str]]
) -> str:
    """`grid`: model -> kind -> cell -> lab -> the entry's HTML; `cards`: (lab, model, kind) of each card."""
    body = []
    for model in sorted(grid):
        body.append(f'<h2 id="{html.escape(model)}">{html.escape(model)}</h2>')
        mine = sorted((kind, lab) for lab, card_model, kind in cards if card_model == model)
        if mine:
            body.append(
                '<p class="cards">benchmark cards: '
                + ", ".join(
                    f'<a href="{html.escape(card_href(lab, model, kind))}">'
                    f"{html.escape(kind)} ({html.escape(lab)})</a>"
                    for kind, lab in mine
                )
                + "</p>"
            )
        body.append("<table><tr><th>kind</th><th>cell</th>")
        body += [  # a vendor's column says whose: `acme (vendor)`, never a lab's name
            f"<th>{html.escape(lab)}</th>"
            if whose(lab) == lab
            else f'<th class="vendor">{html.escape(whose(lab))}</th>'
            for lab in labs
        ]
        body.append("</tr>")
        for kind in sorted(grid[model]):
            for cell in sorted(grid[model][kind]):
                seen = grid[model][kind][cell]
                name = cell.split("/", 2)[2]
                body.append(
                    f'<tr class="cell"><td>{html.escape(kind)}</td>'
                    f'<td><a href="{cell_href(cell)}">{html.escape(name)}</a></td>'
                    + "".join(f"<td>{seen.get(lab, '')}</td>" for lab in labs)
                    + "</tr>"
                )
        body.append("</table>")
    body.append(
        "<h2>Nights</h2><p>"
        + " ".join(f'<a href="nights/{n}.html">{n}</a>' for n in reversed(nights))
        + "</p>"
    )
    return page("dayzero results across labs", body)
