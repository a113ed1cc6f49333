"""A page per night (`nights/<YYYY-MM-DD>.html`, UTC): what is new, persisting and recovered that
night, and its runs: a count per lab and verdict, each run that did not pass and each vendor run
listed (a lab's 720 passing rows were most of a night page's 200 KB and said nothing), whose it is
and, for a vendor's, its finished time marked as the vendor's word (the night it is on is that
stated time's).

A lab's words are its nightly's own where that night's `regressions.json` is here (the alarms
`history.trends.judged` raised once and kept persisting, `told`); else they are said in hindsight
from the store (`night_words`: the change points of each whole series, `history.trends.found`,
and `trends.recovers`), and the page says which lab's are which. Replaying the nightly's alarms
over a whole store is a judge per series per night: ~10^6 at a lab network's size.
"""

from __future__ import annotations

import html
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from dayzero.history import trends
from dayzero.history.trends import SeriesChange
from dayzero.site.page import cell_href, head, page, stated, verdict, whose

WORDS = {
    "new": "Regressions that start this night",
    "persist": "Regressions that persist",
    "recovered": "Regressions recovered this night",
    "improved": "Improvements that start this night",
}


@dataclass(frozen=True)
class Said:
    """One line of a night page: a regression (or recovery, improvement) of a lab's cell."""

    cell: str
    lab: str
    message: str
    regression: bool = True


def told(history: Mapping) -> dict[str, list[Said]]:
    """The nightly's words of one night (its regressions.json's "history"), by word."""
    return {
        word: [Said(a["cell"], a["lab"], a["message"], word != "recovered") for a in history.get(word) or ()]
        for word in ("new", "persist", "recovered")
    }


def night_words(found: Iterable[Sequence[SeriesChange]], nights: Sequence[str]) -> dict[str, dict[str, list]]:
    """night -> what each regression is that night, in hindsight: **new** its first night,
    **persist** until a later change point takes back half of it (`trends.recovers`),
    **recovered** that change point's night; and the improvements that start there (pure)."""
    out: dict[str, dict[str, list]] = {n: {w: [] for w in WORDS} for n in nights}
    for changes in found:
        for i, c in enumerate(changes):
            start = c.finished[:10]
            if not c.regression:
                out.get(start, {}).get("improved", []).append(c)
                continue
            back = next((r.finished[:10] for r in changes[i + 1 :] if trends.recovers(c, r)), None)
            for night in nights:
                word = "new" if night == start else "recovered" if night == back else None
                if word is None and start < night and (back is None or night < back):
                    word = "persist"
                if word:
                    out[night][word].append(c)
    return out


def night_page(
    night: str,
    runs: Sequence[tuple[str, Mapping]],
    hindsight: Mapping[str, list[SeriesChange]],
    nightly: Mapping[str, Mapping[str, list[Said]]],
) -> str:
    """`hindsight`: word -> the store's change points (`night_words`); `nightly`: lab -> its
    nightly's words that night (`told`), which stand for that lab's."""
    labs = sorted({run["lab"] for _, run in runs if not run["vendor"]})
    own = [lab for lab in labs if lab in nightly]
    rest = [lab for lab in labs if lab not in nightly]
    sources = []
    if own:
        sources.append(f"Words of each lab's nightly (its regressions.json): {', '.join(own)}.")
    if rest:
        sources.append(
            f"In hindsight, from the change points of each whole stored series: {', '.join(rest)}."
        )
    body = [f'<p class="words">{html.escape(" ".join(sources))}</p>']
    for word, title in WORDS.items():
        said = [
            Said(c.cell, c.lab, c.describe(), c.regression) for c in hindsight[word] if c.lab not in nightly
        ]
        said += [s for lab in own for s in nightly[lab].get(word, ())]
        body.append(f"<h2>{title}</h2>")
        body += [
            f'<p class="change {word}{" regression" if s.regression and word != "recovered" else ""}">'
            f'<a href="../{cell_href(s.cell)}">{html.escape(s.cell)}</a> [{html.escape(s.lab)}]: '
            f"{html.escape(s.message)}</p>"
            for s in said
        ] or ["<p>none</p>"]
    counts = Counter((run["lab"], run["verdict"]) for _, run in runs if not run["vendor"])
    verdicts = sorted({v for _, v in counts})
    body.append("<h2>Runs</h2><table>" + head("lab", *verdicts))
    for lab in sorted({lab for lab, _ in counts}):
        body.append(
            f'<tr class="lab"><td>{html.escape(lab)}</td>'
            + "".join(f"<td>{counts[(lab, v)] or ''}</td>" for v in verdicts)
            + "</tr>"
        )
    body.append("</table>")
    listed = [(cell, run) for cell, run in runs if run["verdict"] != "passed" or run["vendor"]]
    body.append("<h2>Runs that did not pass, and vendor runs</h2>")
    if not listed:
        body.append("<p>none</p>")
        return page(f"night {night}", body, up="../")
    body.append("<table>" + head("lab", "cell", "verdict", "finished"))
    for cell, run in sorted(listed, key=lambda r: (r[1]["lab"], r[0])):
        body.append(
            f'<tr class="run"><td>{html.escape(whose(run["lab"]))}</td>'
            f'<td><a href="../{cell_href(cell)}">{html.escape(cell)}</a></td>'
            f"<td>{verdict(run['verdict'])}</td><td>{stated(run['finished'], bool(run['vendor']))}</td></tr>"
        )
    body.append("</table>")
    return page(f"night {night}", body, up="../")
