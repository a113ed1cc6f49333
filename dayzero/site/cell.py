"""A cell's page (`cells/<cell id>.html`): each lab's latest evidence with its Allure report and
benchmark card, the vendors' submissions with their reproduction status, each lab's every series
with its change points (attributed), and its latest runs. What a vendor's run states and the
checker does not recompute (its dates, run id, engine version) is marked as the vendor's word
(`page.stated`) beside whose run it is; the lab's own runs stay bare."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from pathlib import Path

from dayzero.report import pictures
from dayzero.site.links import Links
from dayzero.site.page import head, link, page, stated, verdict, whose
from dayzero.site.vendors import Submission, reproduced


def cell_page(
    cell: str,
    runs: Sequence[Mapping],
    series: Mapping,
    found: Mapping,
    *,
    links: Links,
    page_dir: Path,
    cards: Mapping[str, str],
    vendors: Sequence[Submission],
    engines: Mapping[str, str],
) -> str:
    """`runs` oldest first (each with its cell); `cards`: lab -> its card's href from the root;
    `engines`: lab -> the engine of its latest evidence, where that evidence is here."""
    body = [_latest(runs, links, page_dir, cards, engines), _vendors(vendors, links, page_dir)]
    first = lambda item: (item[0][0], not item[0][1].startswith("output_throughput@"), item[0][1])  # noqa: E731
    for (lab, name), (_, points) in sorted(series.items(), key=first):
        mine = found[(lab, name)]
        body.append(f'<h2 id="{html.escape(lab)}:{html.escape(name)}">{html.escape(f"{lab}: {name}")}</h2>')
        body.append(pictures.series_chart(f"{cell} ({lab})", name, points, mine))
        body += [
            f'<p class="change regression">{html.escape(c.describe())}</p>' for c in mine if c.regression
        ]
        body += [f'<p class="change">{html.escape(c.describe())}</p>' for c in mine if not c.regression]
    body.append(
        "<h2>Latest runs</h2><table>" + head("finished", "lab", "source", "verdict", "run", "evidence")
    )
    for run in reversed(runs[-20:]):  # a vendor's accepted evidence is marked with its vendor, never a lab's
        source = f"vendor {run['vendor']}" if run["vendor"] else run["source"]
        theirs = bool(run["vendor"])
        body.append(
            f'<tr class="{"vendor" if theirs else "lab"}"><td>{stated(run["finished"], theirs)}</td>'
            f"<td>{html.escape(whose(run['lab']))}</td><td>{html.escape(source)}</td>"
            f"<td>{verdict(run['verdict'])}</td><td>{stated(run['run_id'], theirs)}</td>"
            f"<td>{link(links.evidence_href(run, page_dir), 'evidence')}</td></tr>"
        )
    body.append("</table>")
    return page(cell, body, up="../")


def _latest(
    runs: Sequence[Mapping],
    links: Links,
    page_dir: Path,
    cards: Mapping[str, str],
    engines: Mapping[str, str],
) -> str:
    newest = {run["lab"]: run for run in runs if not run["vendor"]}  # oldest first: the last wins
    rows = [
        f'<tr class="latest"><td>{html.escape(lab)}</td><td>{html.escape(run["finished"])}</td>'
        f"<td>{_engine(engines.get(lab, ''), False)}</td>"
        f"<td>{verdict(run['verdict'])}</td><td>{html.escape(run['run_id'])}</td>"
        f"<td>{link(links.evidence_href(run, page_dir), 'evidence')}</td>"
        f"<td>{link(links.allure_href(run, page_dir), 'Allure report')}</td>"
        f"<td>{link(f'../{cards[lab]}' if lab in cards else None, 'benchmark card', 'no sweep')}</td></tr>"
        for lab, run in sorted(newest.items())
    ]
    return (
        '<h2 id="latest">Latest evidence</h2><table>'
        + head("lab", "finished", "engine", "verdict", "run", "evidence", "Allure", "card")
        + "".join(rows)
        + "</table>"
    )


def _vendors(vendors: Sequence[Submission], links: Links, page_dir: Path) -> str:
    if not vendors:
        return '<h2 id="vendors">Vendor submissions</h2><p>none</p>'
    rows = []
    for s in vendors:
        rows.append(
            f'<tr class="submission"><td>{html.escape(s.origin)}</td>'
            f"<td>{stated(s.run['finished'], True)}</td><td>{_engine(s.engine, True)}</td>"
            f"<td>{verdict(s.run['verdict'])}</td>"
            f"<td>{reproduced(s)}</td>"
            f"<td>{link(links.evidence_href(s.run, page_dir), 'evidence')}</td></tr>"
        )
    return (
        '<h2 id="vendors">Vendor submissions</h2><table>'
        + head("whose", "finished", "engine", "verdict", "reproduction", "evidence")
        + "".join(rows)
        + "</table>"
    )


def _engine(engine: str, vendor: bool) -> str:
    return stated(engine, vendor) if engine else '<span class="none">evidence not here</span>'
