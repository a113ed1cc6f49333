"""The acceptance grid: one grid per model, hardware kinds as rows (a kind's engines adjacent), mode x
strategy as columns, each cell a status badge linking to its evidence or carrying its reason, and
filters by status; checked as markup here and as Chromium renders it (the Kimi grid's 240 cells)."""

from __future__ import annotations

import shutil
import urllib.parse
from html.parser import HTMLParser
from pathlib import Path

import pytest

from dayzero import evidence
from dayzero.report.acceptance import rows, write_acceptance
from dayzero.report.grid import grids
from dayzero.spec.matrix import load_matrix

from .test_acceptance import HT_BASE, LL_BASE, LL_NGRAM, NOW, UNSUPPORTED, doc

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = REPO / "reports" / "artifacts"
KIMI_VERIFIED = "kimi-k3.1-pro/b300/balanced/baseline"
KIMI_VENDOR = "kimi-k3.1-pro/mi355x/balanced/baseline"
KIMI_PUBLISHED = "kimi-k3.1-pro/b300/balanced/dflash"
SGLANG_BASE = "smollm2-135m/cpu+sglang/low_latency/baseline"


class _Grid(HTMLParser):
    """Every grid (by model): its row headers, column keys and cells with their badges."""

    def __init__(self):
        super().__init__()
        self.grids: dict[str, dict] = {}
        self.current: dict | None = None
        self.cell: dict | None = None
        self.filters: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table" and "data-model" in a:
            self.current = self.grids[a["data-model"]] = {"rows": [], "columns": [], "cells": {}}
        elif self.current is not None and tag == "tr" and "data-kind" in a:
            self.current["rows"].append(a["data-kind"])
        elif self.current is not None and tag == "th" and "data-column" in a:
            self.current["columns"].append(a["data-column"])
        elif self.current is not None and tag == "td" and "data-cell" in a:
            self.cell = self.current["cells"][a["data-cell"]] = {**a, "href": None, "text": ""}
        elif self.cell is not None and tag == "a":
            self.cell["href"] = a.get("href")
        elif tag == "input" and "data-filter" in a:
            self.filters.append(a["data-filter"])

    def handle_data(self, data):
        if self.cell is not None:
            self.cell["text"] += data

    def handle_endtag(self, tag):
        if tag == "td":
            self.cell = None
        elif tag == "table":
            self.current = None


def parsed(path: Path) -> _Grid:
    parser = _Grid()
    parser.feed(path.read_text())
    return parser


def vendor_doc(matrix, cell_id):
    return {**doc(matrix, cell_id, run="v1"), "source": "acme", "checked": NOW.isoformat()}


@pytest.fixture
def reports(tmp_path, matrix_dir):
    matrix = load_matrix(matrix_dir)
    out = tmp_path / "reports"
    evidence.write(out, doc(matrix, LL_BASE))
    evidence.write(out, doc(matrix, HT_BASE, verdict="failed"))
    evidence.write(out, doc(matrix, SGLANG_BASE, verdict="broken", run="r2"))
    evidence.write(out, doc(matrix, KIMI_VERIFIED, run="r3"))
    evidence.write(out, vendor_doc(matrix, KIMI_VENDOR))
    write_acceptance(matrix, out, now=NOW)
    return matrix, out


def test_one_grid_per_model_kinds_as_rows_mode_and_strategy_as_columns(reports):
    matrix, out = reports
    got = parsed(out / "acceptance.html").grids
    assert list(got) == ["kimi-k3.1-pro", "smollm2-135m"]
    smol = got["smollm2-135m"]
    assert smol["rows"] == ["cpu+llama.cpp", "cpu+sglang", "cpu+vllm"]  # one kind's engines, adjacent
    assert smol["columns"][:2] == ["low_latency/baseline", "low_latency/ngram_spec"]
    assert "tp2_nodes/baseline" in smol["columns"] and "rpc_split/baseline" in smol["columns"]
    kimi = got["kimi-k3.1-pro"]
    assert len(kimi["rows"]) == 14 and len(kimi["columns"]) == 20
    assert "balanced/dflash+hicache" in kimi["columns"]
    for model, grid in got.items():  # every cell of the matrix once, in its row and column
        cells = [c for c in matrix.cells if c.model == model]
        assert sorted(grid["cells"]) == sorted(c.id for c in cells)
        for c in cells:
            td = grid["cells"][c.id]
            assert td["data-kind"] == c.kind and td["data-column"] == c.id.split("/", 2)[2]


def test_a_badge_links_its_evidence_or_carries_its_reason(reports):
    matrix, out = reports
    table = {r.cell.id: r for r in rows(matrix, out, now=NOW)}
    cells = {k: v for g in parsed(out / "acceptance.html").grids.values() for k, v in g["cells"].items()}
    verified = cells[LL_BASE]
    assert verified["data-label"] == "Verified" and verified["href"].startswith("evidence/")
    assert (out / urllib.parse.unquote(verified["href"])).resolve() == table[LL_BASE].evidence.resolve()
    assert cells[HT_BASE]["data-label"] == "Failed" and "floor:output_throughput" in cells[HT_BASE]["title"]
    assert cells[SGLANG_BASE]["data-label"] == "Broken" and cells[SGLANG_BASE]["href"]
    assert cells[KIMI_VENDOR]["data-label"] == "Verified (vendor)" and "acme" in cells[KIMI_VENDOR]["title"]
    # whose run each badge is, and what of a vendor's rests on its word alone (issue 42, item 2)
    assert f"(source: acme (vendor, checked {NOW.date()}))" in cells[KIMI_VENDOR]["title"]
    assert "the vendor's word: run date and engine version" in cells[KIMI_VENDOR]["title"]
    assert "on the vendor's word alone" in cells[KIMI_VENDOR]["title"]
    assert verified["title"].endswith("(source: lab)") and "vendor's word" not in verified["title"]
    assert cells[UNSUPPORTED]["href"] is None
    assert "Neuron support for Kimi K3.1" in cells[UNSUPPORTED]["title"]
    published = cells[KIMI_PUBLISHED]
    assert published["data-label"] == "Published" and "docs.sglang.ai" in published["title"]
    # "published" only where its authors published it: a Pending cell's source is the matrix
    assert cells[LL_NGRAM]["data-label"] == "Pending" and "published" not in cells[LL_NGRAM]["title"]
    unpublished = [c.id for c in matrix.cells if c.published != "verified"]
    assert not any("source: published" in cells[i]["title"] for i in unpublished)
    assert all(cells[i]["text"].strip() for i in cells)  # every cell shows a badge


def test_filters_by_every_status_the_page_shows(reports):
    _, out = reports
    page = parsed(out / "acceptance.html")
    labels = {c["data-label"] for g in page.grids.values() for c in g["cells"].values()}
    assert set(page.filters) == labels
    assert {"Verified", "Verified (vendor)", "Failed", "Broken", "Published", "Pending"} <= labels
    assert "<script" in (out / "acceptance.html").read_text()  # inline, no external asset
    assert "src=" not in (out / "acceptance.html").read_text()


def test_grids_are_pure_and_keep_a_kinds_engines_together(matrix_dir):
    matrix = load_matrix(matrix_dir)
    table = rows(matrix, Path("/nonexistent"), now=NOW)
    reordered = sorted(table, key=lambda r: r.cell.engine != "sglang")  # sglang rows first
    (smol,) = [g for g in grids(reordered) if g.model == "smollm2-135m"]
    assert smol.kinds == ("cpu+sglang", "cpu+llama.cpp", "cpu+vllm")
    assert smol.cell("cpu+llama.cpp", "tp2_nodes/baseline") is None  # llama.cpp has no tp2_nodes


@pytest.mark.e2e
def test_the_grid_in_chromium_shows_every_cell_and_filters(reports):
    """Chromium renders every cell's badge (the Kimi grid's 240 included) inside the viewport's width,
    and unticking a status hides its badges."""
    from devlab.browser import Browser

    matrix, out = reports
    shot = out / "acceptance-grid.png"
    with Browser(height=1400) as browser:
        browser.goto((out / "acceptance.html").resolve().as_uri())
        seen = browser.js(
            """(() => {
              const cells = [...document.querySelectorAll('table.grid td[data-cell]')];
              const shown = c => { const b = c.querySelector('.badge').getBoundingClientRect();
                                   return b.width > 0 && b.height > 0; };
              const kimi = document.querySelector('table.grid[data-model="kimi-k3.1-pro"]');
              const before = cells.filter(shown).map(c => c.dataset.cell);
              const box = document.querySelector('input[data-filter="Pending"]');
              box.click();
              const off = cells.filter(c => c.classList.contains('off')).map(c => c.dataset.label);
              box.click();
              const vendor = document.querySelector('tr[data-cell="VENDOR_CELL"]').children;
              return {before, off, kimiWidth: kimi.getBoundingClientRect().width,
                      page: document.documentElement.clientWidth,
                      back: cells.filter(c => c.classList.contains('off')).length,
                      source: vendor[3].textContent, detail: vendor[2].textContent};
            })()""".replace("VENDOR_CELL", KIMI_VENDOR)
        )
        browser.screenshot(shot)
    assert sorted(seen["before"]) == sorted(c.id for c in matrix.cells)
    assert seen["off"] and set(seen["off"]) == {"Pending"} and seen["back"] == 0
    assert seen["kimiWidth"] <= seen["page"]  # 20 columns fit a 1400-pixel window
    # the list says whose run the vendor's is, and what of it is the vendor's word (issue 42)
    assert seen["source"] == f"acme (vendor, checked {NOW.date()})"
    assert "(the vendor's word: run date and engine version)" in seen["detail"]
    assert "on the vendor's word alone" in seen["detail"]
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shutil.copy(shot, ARTIFACTS / shot.name)
