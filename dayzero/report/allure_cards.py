"""The benchmark cards in the Allure report, as report-level ("global") attachments.

A card is built at report time from the evidence of many cells, after every cell's result was
written, so it belongs to the report rather than to one test result. Allure 3 reads a results
folder's `*-globals.json` (`{"attachments": [{name, source, type}], "errors": []}`) and shows
those attachments report-wide (the awesome report's global attachments); `allure_build.build`
writes one such file from `cards/*/*.html` and `.md` (the HTML is self-contained, its SVGs
inline). A cell whose evidence has sweeps also links its card (`card_href`, from `allure_cell`).
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from dayzero import atomic
from dayzero.checks import family_of
from dayzero.report.benchcard import CARDS_DIR

GLOBALS = "dayzero-benchcards-globals.json"
PREFIX = "dayzero-benchcard-"  # every file this module writes in a results folder starts so
TYPES = (("html", "text/html", ""), ("md", "text/markdown", " (markdown)"))


def write_globals(results: Path, cards: Path) -> list[Path]:
    """Copy every card under `cards` into `results` as attachments and list them in the globals
    file; the last build's copies go first, so a card no longer written is no longer attached."""
    results, cards = Path(results), Path(cards)
    for old in results.glob(PREFIX + "*") if results.is_dir() else ():
        old.unlink()
    (results / GLOBALS).unlink(missing_ok=True)
    attachments, written = [], []
    for html in sorted(cards.glob("*/*.html")):
        title = f"benchmark card: {html.parent.name} on {html.stem}"
        stem = PREFIX + hashlib.sha256(f"{html.parent.name}/{html.stem}".encode()).hexdigest()[:16]
        for ext, kind, note in TYPES:
            source = html.with_suffix(f".{ext}")
            if not source.is_file():
                continue
            target = results / f"{stem}-attachment.{ext}"
            results.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
            written.append(target)
            attachments.append({"name": title + note, "source": target.name, "type": kind})
    if not attachments:
        return []
    written.append(atomic.write_json(results / GLOBALS, {"attachments": attachments, "errors": []}))
    return written


def card_href(doc: dict) -> str | None:
    """The cell's benchmark card, relative to the Allure report's folder; None without sweeps."""
    if not any(family_of(c) == "sweep" for c in doc["checks"]):
        return None
    return f"../{CARDS_DIR}/{doc['model']}/{doc['hardware']}.html"
