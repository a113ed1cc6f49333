"""`dayzero site`: a static results site from the history store, across labs, kinds and nights.

Static files only (no server to run or secure; any web server or object store hosts them):
`index.html` (a grid per model: the model's cells, grouped by hardware kind, against the labs
that ran them; each entry its latest verdict and main series' sparkline), one page per cell at
`cells/<cell id with / as __>.html` (a stable deep link: the cell id; each lab's every series
with its change points, attributed, and the cell's latest runs), and one page per night at
`nights/<YYYY-MM-DD>.html` (the runs that finished that UTC day, per lab, and each regression
that starts, persists or is recovered that night, in hindsight: `night_words`). `pages` is pure
over what the store holds; `write` puts them on disk.
"""

from __future__ import annotations

import html
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from dayzero import atomic
from dayzero.evidence import slug
from dayzero.history import trends
from dayzero.history.trends import SeriesChange
from dayzero.report import pictures

STYLE = """body{font-family:sans-serif;margin:1.5em;color:#111}
table{border-collapse:collapse;margin:.5em 0 1.5em}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:middle}th{background:#f3f4f6}
.passed{color:#15803d}.failed{color:#b91c1c}.broken{color:#a16207}.regression{color:#b91c1c}
a{color:#1d4ed8}h2{margin-top:1.5em}nav{margin-bottom:1em}"""


def _page(title: str, body: list[str], up: str = "") -> str:
    nav = f'<nav><a href="{up}index.html">all cells</a></nav>' if up else ""
    return (
        f'<!doctype html><html><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"<style>{STYLE}</style></head><body>{nav}<h1>{html.escape(title)}</h1>"
        + "".join(body)
        + "</body></html>"
    )


def _head(*names: str) -> str:
    return "<tr>" + "".join(f"<th>{n}</th>" for n in names) + "</tr>"


def cell_href(cell: str) -> str:
    return f"cells/{slug(cell)}.html"


def _verdict(word: str) -> str:
    return f'<span class="{html.escape(word)}">{html.escape(word)}</span>'


def pages(store) -> dict[str, str]:
    """Every page of the site: relative path -> HTML."""
    out: dict[str, str] = {}
    grid: dict[str, dict[str, dict[str, dict[str, str]]]] = defaultdict(lambda: defaultdict(dict))
    labs = store.labs()
    by_night: dict[str, list[tuple[str, dict]]] = defaultdict(list)
    every: list[list[SeriesChange]] = []  # each series' change points, in order
    for cell in store.cells():
        model, kind = cell.split("/")[:2]
        runs = store.runs(cell)
        for run in runs:
            by_night[run["finished"][:10]].append((cell, run))
        series = store.cell_series(cell)  # each lab's apart, in one query
        found = {
            key: trends.found(cell, key[1], higher, points, key[0])
            for key, (higher, points) in series.items()
        }
        every += found.values()
        sparks = {}
        for lab in {lab for lab, _ in series}:
            main = pictures.main_series(
                [(name, h) for (run_lab, name), (h, _) in series.items() if run_lab == lab]
            )
            sparks[lab] = pictures.series_spark(main, lab, series[(lab, main)][1], found[(lab, main)])
        latest = {run["lab"]: run["verdict"] for run in runs}  # runs are in time order: the last wins
        grid[model][kind][cell] = {lab: f"{_verdict(v)} {sparks.get(lab, '')}" for lab, v in latest.items()}
        out[cell_href(cell)] = _cell_page(cell, runs, series, found)
    out["index.html"] = _index(grid, labs, sorted(by_night))
    words = night_words(every, sorted(by_night))
    for night, runs in by_night.items():
        out[f"nights/{night}.html"] = _night_page(night, runs, words[night])
    return out


def _index(grid: Mapping, labs: list[str], nights: list[str]) -> str:
    body = []
    for model in sorted(grid):
        body.append(
            f'<h2 id="{html.escape(model)}">{html.escape(model)}</h2><table><tr><th>kind</th><th>cell</th>'
        )
        body += [f"<th>{html.escape(lab)}</th>" for lab in labs]
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
    return _page("dayzero results across labs", body)


def _cell_page(cell: str, runs: list[dict], series: Mapping, found: Mapping) -> str:
    body = []
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
        "<h2>Latest runs</h2><table>" + _head("finished", "lab", "source", "verdict", "run", "evidence")
    )
    for run in reversed(runs[-20:]):  # a vendor's accepted evidence is marked with its vendor, never a lab's
        source = f"vendor {run['vendor']}" if run["vendor"] else run["source"]
        body.append(
            f'<tr class="{"vendor" if run["vendor"] else "lab"}"><td>{html.escape(run["finished"])}</td>'
            f"<td>{html.escape(run['lab'])}</td><td>{html.escape(source)}</td><td>{_verdict(run['verdict'])}</td>"
            f"<td>{html.escape(run['run_id'])}</td><td>{html.escape(run['path'])}</td></tr>"
        )
    body.append("</table>")
    return _page(cell, body, up="../")


WORDS = {
    "new": "Regressions that start this night",
    "persist": "Regressions that persist",
    "recovered": "Regressions recovered this night",
    "improved": "Improvements that start this night",
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


def _night_page(night: str, runs: list[tuple[str, dict]], words: Mapping[str, list[SeriesChange]]) -> str:
    body = []
    for word, title in WORDS.items():
        body.append(f"<h2>{title}</h2>")
        body += [
            f'<p class="change {word}{" regression" if c.regression and word != "recovered" else ""}">'
            f'<a href="../{cell_href(c.cell)}">{html.escape(c.cell)}</a> [{html.escape(c.lab)}]: '
            f"{html.escape(c.describe())}</p>"
            for c in words[word]
        ] or ["<p>none</p>"]
    body.append("<h2>Runs</h2><table>" + _head("lab", "cell", "verdict", "finished"))
    for cell, run in sorted(runs, key=lambda r: (r[1]["lab"], r[0])):
        body.append(
            f'<tr class="run"><td>{html.escape(run["lab"])}</td>'
            f'<td><a href="../{cell_href(cell)}">{html.escape(cell)}</a></td>'
            f"<td>{_verdict(run['verdict'])}</td><td>{html.escape(run['finished'])}</td></tr>"
        )
    body.append("</table>")
    return _page(f"night {night}", body, up="../")


def write(store, out: Path) -> list[Path]:
    """The site under `out` (written page by page, each atomically)."""
    written = []
    for rel, text in pages(store).items():
        path = Path(out) / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic.write_text(path, text)
        written.append(path)
    return written
