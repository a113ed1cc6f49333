"""`dayzero site`: a static results site from the history store, across labs, kinds and nights.

Static files only (no server to run or secure; any web server or object store hosts them):
`index.html` (`grid`: a grid per model across labs), a page per cell at `cells/<cell id with /
as __>.html` (`cell`: a stable deep link), a page per night at `nights/<YYYY-MM-DD>.html`
(`nights`), and each lab's benchmark cards at `cards/<lab>/<model>/<kind>.html` (`cards`).
Evidence and Allure links follow `links`; vendor runs carry their reproduction status
(`vendors`), whose they are, and what they state but the checker does not recompute (dates, run
id, engine version) marked as the vendor's word on every page (`page.stated`). The store gives
the runs and series; each lab's latest evidence document of a cell, and a vendor's, are read
from where the store says they are (where they are not, the site says so). `pages` gathers;
`write` puts them on disk.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from dayzero import atomic
from dayzero.history import trends
from dayzero.history.points import facts
from dayzero.history.trends import SeriesChange
from dayzero.report import pictures
from dayzero.site.cards import card_href, card_page, cards, cells_of
from dayzero.site.cell import cell_page
from dayzero.site.grid import index_page
from dayzero.site.links import Links, night_dir
from dayzero.site.nights import night_page, night_words, told
from dayzero.site.page import cell_href, verdict
from dayzero.site.vendors import reproduced, submissions

REGRESSIONS = "regressions.json"  # a night's verdicts, beside its evidence/ (report.nightly)

__all__ = ["Links", "cell_href", "night_words", "pages", "write"]


def read_doc(path: str) -> dict | None:
    """A run's evidence document where the store says it is, or None (moved, or another host's)."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def pages(store, out: Path | str = ".", links: Links | None = None, matrix=None) -> dict[str, str]:
    """Every page of the site to be written under `out`: relative path -> HTML."""
    out, links = Path(out), links or Links()
    result: dict[str, str] = {}
    grid: dict[str, dict[str, dict[str, dict[str, str]]]] = defaultdict(lambda: defaultdict(dict))
    by_night: dict[str, list[tuple[str, dict]]] = defaultdict(list)
    every: list[list[SeriesChange]] = []  # each series' change points, in order
    latest: dict[tuple[str, str], tuple[str, dict]] = {}  # (lab, cell) -> its newest evidence
    cells: dict[str, tuple] = {}
    for cell in store.cells():
        model, kind = cell.split("/")[:2]
        runs = [{**run, "cell": cell} for run in store.runs(cell)]
        for run in runs:
            by_night[run["finished"][:10]].append((cell, run))
        series = {  # each lab's apart, its broken nights gaps (asked per lab: run ids repeat across labs)
            key: found
            for lab in store.labs(cell)
            for key, found in trends.clean_series(store, cell, lab=lab).items()
        }
        found = {
            key: trends.found(cell, key[1], higher, points, key[0])
            for key, (higher, points) in series.items()
        }
        every += found.values()
        newest = {run["lab"]: run for run in runs if not run["vendor"]}  # oldest first: the last wins
        engines = {}
        for lab, run in newest.items():
            doc = read_doc(run["path"])
            if doc is not None:
                latest[(lab, cell)] = (run["path"], doc)
                engines[lab] = facts(doc)["engine"]
        sparks = {}
        for lab in {lab for lab, _ in series}:
            main = pictures.main_series(
                [(name, h) for (run_lab, name), (h, _) in series.items() if run_lab == lab]
            )
            sparks[lab] = pictures.series_spark(main, lab, series[(lab, main)][1], found[(lab, main)])
        vendors = submissions(cell, runs, read_doc, matrix)
        grid[model][kind][cell] = {
            **{s.run["lab"]: reproduced(s) for s in vendors},
            **{lab: f"{verdict(run['verdict'])} {sparks.get(lab, '')}" for lab, run in newest.items()},
        }
        cells[cell] = (runs, series, found, vendors, engines)
    made = cards(latest, matrix)
    for key, card in made.items():
        result[card_href(*key)] = card_page(card)
    for cell, (runs, series, found, vendors, engines) in cells.items():
        model, kind = cell.split("/")[:2]
        labs_cards = {
            lab: card_href(lab, model, kind)
            for lab in {run["lab"] for run in runs}
            if cell in cells_of(made.get((lab, model, kind)))
        }
        result[cell_href(cell)] = cell_page(
            cell,
            runs,
            series,
            found,
            links=links,
            page_dir=out / "cells",
            cards=labs_cards,
            vendors=vendors,
            engines=engines,
        )
    result["index.html"] = index_page(grid, store.labs(), sorted(by_night), sorted(made))
    words = night_words(every, sorted(by_night))
    for night, runs in by_night.items():
        result[f"nights/{night}.html"] = night_page(night, runs, words[night], nightly_words(runs))
    return result


def nightly_words(runs) -> dict[str, dict[str, list]]:
    """lab -> its nightly's words of the night the runs are of, where its regressions.json is
    here and the history answered there (`nights.told`)."""
    out: dict[str, dict[str, list]] = {}
    folders = {(run["lab"], night_dir(run["path"])) for _, run in runs if not run["vendor"]}
    for lab, folder in sorted((lab, f) for lab, f in folders if f is not None):
        history = (read_doc(str(folder / REGRESSIONS)) or {}).get("history")
        if isinstance(history, dict) and "not_available" not in history:
            mine = out.setdefault(lab, {})
            for word, said in told(history).items():
                mine.setdefault(word, []).extend(said)
    return out


def write(store, out: Path, links: Links | None = None, matrix=None) -> list[Path]:
    """The site under `out` (written page by page, each atomically)."""
    written = []
    for rel, text in pages(store, out, links, matrix).items():
        path = Path(out) / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic.write_text(path, text)
        written.append(path)
    return written
