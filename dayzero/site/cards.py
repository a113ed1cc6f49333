"""The benchmark cards of each lab: per model and hardware kind, from the lab's latest evidence of
each cell (`report.benchcard`'s points, frontier, charts and page), at
`cards/<lab>/<model>/<kind>.html`. A kind whose latest evidence holds no sweep has no card here
(its cell pages say so); with the matrix, the card's display name, published claims and prices."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import replace

from dayzero.evidence import slug
from dayzero.report import benchcard
from dayzero.report.cost import prices


def card_href(lab: str, model: str, kind: str) -> str:
    return f"cards/{slug(lab)}/{model}/{kind}.html"


def cards(
    latest: Mapping[tuple[str, str], tuple[str, dict]], matrix=None
) -> dict[tuple[str, str, str], benchcard.BenchCard]:
    """(lab, model, kind) -> its card, from `latest`: (lab, cell) -> (evidence path, document)."""
    price_of = prices(matrix) if matrix is not None else {}
    grouped: dict[tuple[str, str, str], list[tuple[str, dict]]] = defaultdict(list)
    for (lab, cell), found in sorted(latest.items()):
        model, kind = cell.split("/")[:2]
        grouped[(lab, model, kind)].append(found)
    out = {}
    for (lab, model, kind), found in grouped.items():
        points: list[benchcard.Point] = []
        summaries: list[dict] = []
        for path, doc in found:
            got, sums = benchcard.points_of(doc, path, price_of.get(kind))
            points += got
            summaries += sums
        if not points:
            continue
        on = benchcard.frontier([p for p in points if p.kind != "context"])
        card = matrix.cards.get(model) if matrix is not None else None
        out[(lab, model, kind)] = benchcard.BenchCard(
            model,
            kind,
            f"{card.display_name if card else model} ({lab})",
            tuple(replace(p, frontier=p.id in on) for p in points),
            tuple(summaries),
            benchcard.claim_points(card, kind) if card else (),
            price_of.get(kind),
            benchcard.energy_line(points),
            tuple(sorted({p.evidence for p in points})),
        )
    return out


def card_page(card: benchcard.BenchCard) -> str:
    """The card's own page (`benchcard.to_html`), with the way back to the site's root."""
    context = "\n".join(benchcard.context_svg(card, chart) for chart in benchcard.CONTEXT_CHARTS)
    text = benchcard.to_html(card, benchcard.pareto_svg(card), context)
    return text.replace("<body>", '<body><nav><a href="../../../index.html">all cells</a></nav>', 1)


def cells_of(card: benchcard.BenchCard | None) -> set[str]:
    return {p.cell for p in card.points} if card else set()
