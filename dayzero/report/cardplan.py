"""The benchmark card's plan: what the card asks a lab to measure on a hardware kind, point by point.

Before any evidence a card is not blank: each sweep the card declares for the kind's cells
(`dayzero.spec.sweeps`) is listed with its SLO, the cells it runs on and every point, "not
measured" until a run's evidence holds it; the published claims that apply, with their
prerequisites and what evidence said; the fit (`dayzero.spec.fit`): weights and cache against
the kind's memory. Pure: the card, the kind's cells, their latest evidence and measured points in,
rows and lines out (`benchcard` prints them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from dayzero.checks.claims import WORDS
from dayzero.report import reproduction
from dayzero.spec import fit as fit_spec
from dayzero.spec.card import as_names, matches
from dayzero.spec.sweeps import sweeps_for

NOT_MEASURED = "not measured"


@dataclass(frozen=True)
class PlanRow:
    sweep: str
    kind: str
    workload: str
    slo: str
    cells: str
    point: str
    status: str  # "not measured", or what evidence measured there


def _measured(points: Sequence) -> str:
    """What the evidence measured at one plan point (every cell that ran it)."""
    out = []
    for p in points:
        if p.kind == "context":
            got = f"decode/token p50 {p.tpot_p50_ms:.4g} ms, TTFT p50 {p.ttft_p50_ms:.4g} ms"
        else:
            got = f"{p.tok_s_per_accelerator:.4g} tok/s/acc, {p.tok_s_per_user:.4g} tok/s/user"
            if p.attainment is not None:
                got += f", SLO {p.attainment:.0%}"
        if p.cost_per_million is not None:
            got += f", {p.cost_per_million:.4g} per 1M tok"
        out.append(f"{p.mode}/{p.strategy}: {got}")
    return "; ".join(out)


def rows(matrix, model: str, kind: str, points: Sequence) -> list[PlanRow]:
    """Each sweep of the kind's supported cells, point by point, measured or not."""
    cells = [c for c in matrix.cells if c.model == model and c.hardware == kind and c.supported]
    by_sweep: dict[tuple[str, str], tuple] = {}
    for cell in cells:
        for s in sweeps_for(matrix.card(cell), cell):
            by_sweep.setdefault((cell.engine, s.name), (s, []))[1].append(cell.id)
    out = []
    for (engine, name), (s, ids) in by_sweep.items():
        shown = f"{engine} {name}" if engine else name
        names = [i.split("/", 2)[2] for i in ids]  # mode/strategy[+options]
        for load in s.points:
            label = s.label(load)
            got = [p for p in points if p.sweep == name and p.label == label and p.cell in ids]
            out.append(
                PlanRow(
                    shown,
                    s.kind,
                    s.workload,
                    s.slo.describe() if s.slo else "none",
                    f"{len(names)}: {', '.join(names)}",
                    label,
                    _measured(got) if got else NOT_MEASURED,
                )
            )
    return out


def claim_lines(card, cells: Sequence, docs: Mapping[str, Mapping]) -> list[str]:
    """The card's claims that apply to the kind's cells: prerequisites, needs, and what the cells'
    latest evidence said of each (`docs`: cell id -> evidence)."""
    out = []
    for claim in card.claims:
        hit = [c for c in cells if matches(claim.when, c)]
        if not hit:
            continue
        prereq = ", ".join(f"{k} {'/'.join(as_names(v))}" for k, v in claim.when.items()) or "none"
        text = f"{claim.id}: {claim.text} (tolerance {claim.tolerance:.0%}); prerequisites: {prereq}"
        if claim.needs:
            text += f"; needs: {'; '.join(claim.needs)}"
        said = [
            WORDS.get(e["status"], e["status"])
            for c in hit
            for e in (docs.get(c.id) or {}).get("claims") or ()
            if e.get("claim") == claim.id
        ]
        seen = ", ".join(f"{said.count(w)} {w}" for w in dict.fromkeys(said))
        text += (
            f"; {seen} of {len(hit)} cell(s)" if said else f"; {NOT_MEASURED} in any of {len(hit)} cell(s)"
        )
        theirs = sorted(  # a vendor's answer is its run's: said whose (issue 42, item 2)
            {
                reproduction.origin_of(docs[c.id])
                for c in hit
                if c.id in docs and reproduction.from_vendor(docs[c.id]) and docs[c.id].get("claims")
            }
        )
        text += f" (answered by {', '.join(theirs)})" if theirs else ""
        out.append(f"{text}. Source: {claim.source}")
    return out


def fit_lines(card, hardware: Mapping, kind: str) -> list[str]:
    """Weights and cache against the kind's memory (`dayzero fit MODEL` for every kind)."""
    got = fit_spec.plan(card, hardware, kinds=[kind])
    if got is None:
        return ["fit: needs data: the card has no architecture: section"]
    return [*fit_spec.weights_lines(got), *fit_spec.cache_lines(got), *fit_spec.target_lines(got)]


GROUP_HEADER = ("sweep", "kind", "workload", "SLO", "cells", "points")


def grouped(plan: Sequence[PlanRow]) -> list[tuple[PlanRow, list[PlanRow]]]:
    """One entry per sweep (its first row stands for sweep, workload, SLO, cells) with its points."""
    out: dict[str, tuple[PlanRow, list[PlanRow]]] = {}
    for r in plan:
        out.setdefault(r.sweep, (r, []))[1].append(r)
    return list(out.values())


def _yes(row: PlanRow) -> str:
    return "no" if row.status == NOT_MEASURED else "yes"


def _title(plan: Sequence[PlanRow]) -> str:
    measured = sum(r.status != NOT_MEASURED for r in plan)
    return f"Plan: {measured} of {len(plan)} sweep points measured"


CLAIMS_TITLE = "Published claims and their prerequisites"
NO_CLAIM = "none of the card's claims applies to this kind's supported cells"
FIT_TITLE = "Fit: weights and cache against this kind's memory"


def markdown(plan: Sequence[PlanRow], claims: Sequence[str], fit: Sequence[str]) -> list[str]:
    from dayzero.escape import escape

    def md(text: str) -> str:
        return escape(text, "markdown")

    out = []
    if plan:
        out += [
            f"## {_title(plan)}",
            "",
            "| " + " | ".join(GROUP_HEADER) + " |",
            "|" + "---|" * len(GROUP_HEADER),
        ]
        for first, rows_ in grouped(plan):
            points = "; ".join(f"{r.point}: {r.status}" for r in rows_)
            cells = (first.sweep, first.kind, first.workload, first.slo, first.cells, points)
            out.append("| " + " | ".join(md(c) for c in cells) + " |")
        out.append("")
    out += [f"## {CLAIMS_TITLE}", "", *(f"- {md(c)}" for c in claims or [NO_CLAIM]), ""]
    if fit:
        out += [f"## {FIT_TITLE}", "", *(f"- {md(f)}" for f in fit), ""]
    return out


def html(plan: Sequence[PlanRow], claims: Sequence[str], fit: Sequence[str]) -> list[str]:
    from dayzero.escape import escape

    def h(text: str) -> str:
        return escape(text, "html")

    out = []
    if plan:
        head = "".join(f"<th>{h(x)}</th>" for x in GROUP_HEADER)
        out += [f"<h2>{h(_title(plan))}</h2>", f'<table id="plan"><thead><tr>{head}</tr></thead><tbody>']
        for first, rows_ in grouped(plan):
            points = "".join(
                f'<li class="plan-point" data-point="{h(r.point)}" data-measured="{_yes(r)}">'
                f"{h(r.point)}: {h(r.status)}</li>"
                for r in rows_
            )
            cells = "".join(f"<td>{h(x)}</td>" for x in (first.sweep, first.kind, first.workload, first.slo))
            out.append(f'<tr>{cells}<td class="cells">{h(first.cells)}</td><td><ul>{points}</ul></td></tr>')
        out.append("</tbody></table>")
    for title, ident, items in ((CLAIMS_TITLE, "claims", claims or [NO_CLAIM]), (FIT_TITLE, "fit", fit)):
        if items:
            out.append(
                f'<h2>{h(title)}</h2><ul id="{ident}">' + "".join(f"<li>{h(i)}</li>" for i in items) + "</ul>"
            )
    return out
