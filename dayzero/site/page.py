"""The site's HTML frame: one style, one page shell, a cell's stable address, a verdict's badge,
whose a run is and the mark of what a vendor stated."""

from __future__ import annotations

import html

from dayzero.evidence import slug
from dayzero.history.points import VENDOR_ORIGIN
from dayzero.report import reproduction

STYLE = """body{font-family:sans-serif;margin:1.5em;color:#111}
table{border-collapse:collapse;margin:.5em 0 1.5em}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:middle}th{background:#f3f4f6}
.passed{color:#15803d}.failed{color:#b91c1c}.broken{color:#a16207}.regression{color:#b91c1c}
.vendor{color:#7c3aed}.reproduced{color:#15803d}.none{color:#6b7280}.word{color:#7c3aed;font-style:italic}
a{color:#1d4ed8}h2{margin-top:1.5em}nav{margin-bottom:1em}"""


def page(title: str, body: list[str], up: str = "") -> str:
    """A whole page; `up` is the way back to the site's root from its folder ('../')."""
    nav = f'<nav><a href="{up}index.html">all cells</a></nav>' if up else ""
    return (
        f'<!doctype html><html><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"<style>{STYLE}</style></head><body>{nav}<h1>{html.escape(title)}</h1>"
        + "".join(body)
        + "</body></html>"
    )


def head(*names: str) -> str:
    return "<tr>" + "".join(f"<th>{html.escape(n)}</th>" for n in names) + "</tr>"


def cell_href(cell: str) -> str:
    """A cell's page, from the site's root: its id, the deep link that stays (`/` as `__`)."""
    return f"cells/{slug(cell)}.html"


def verdict(word: str) -> str:
    return f'<span class="{html.escape(word)}">{html.escape(word)}</span>'


def link(href: str | None, text: str, missing: str = "not published") -> str:
    """An anchor, or why there is none (a grey word)."""
    if href is None:
        return f'<span class="none">{html.escape(missing)}</span>'
    return f'<a href="{html.escape(href)}">{html.escape(text)}</a>'


def whose(lab: str) -> str:
    """Whose runs a store's lab holds, as every report prints it: the lab's name, or its vendor's
    origin (`acme (vendor)`: the store files a vendor's runs under `history.points.vendor_lab`)."""
    vendor = lab.removeprefix(VENDOR_ORIGIN)
    return reproduction.origin(vendor) if vendor != lab else lab


def stated(text: str, vendor: bool) -> str:
    """A field shown as its run states it. A vendor's (its dates, run id, engine version) the
    checker bounds but never recomputes: marked as the acceptance table and the card mark it
    (`reproduction.VENDORS_WORD`); the lab's own bare."""
    said = html.escape(text)
    return f'{said} <span class="word">({html.escape(reproduction.VENDORS_WORD)})</span>' if vendor else said
