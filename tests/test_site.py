"""`dayzero site` over a store of three labs' nights: the grid, each cell's page and each night's,
as files and as Chromium renders them (screenshots kept beside the site)."""

from __future__ import annotations

import pytest

pytest.importorskip("ruptures", reason="the 'history' extra (tools/setup installs it)")

from dayzero import site  # noqa: E402
from dayzero.cli import main  # noqa: E402
from dayzero.history.store import open_store  # noqa: E402

from .history_nights import night_doc  # noqa: E402

LABS = {"lab-a": 100.0, "lab-b": 80.0, "lab-c": 60.0}
CELLS = [f"smollm2-135m/cpu+llama.cpp/low_latency/s{c}" for c in range(3)]
SLOWED = (CELLS[0], "lab-a", 18)  # lab a's first cell is 15% slower from night 18, its recipe changed


def nights() -> list[dict]:
    docs = []
    for lab, level in LABS.items():
        for cell in CELLS:
            for n in range(30):
                slow = (cell, lab) == SLOWED[:2] and n >= SLOWED[2]
                value = round(level * (1 + 0.005 * ((n * 7) % 5 - 2)) * (0.85 if slow else 1), 2)
                recipe = "fewer-threads" if slow else "370a065910226f54"
                docs.append(night_doc(n, value, cell=cell, lab=lab, controller=lab, recipe=recipe))
    return docs


@pytest.fixture
def store_path(tmp_path):
    with open_store(tmp_path / "h.sqlite") as store:
        store.ingest((f"{i}.json", d) for i, d in enumerate(nights()))
    return tmp_path / "h.sqlite"


def test_the_site_has_a_grid_a_page_per_cell_and_per_night(store_path):
    with open_store(store_path) as store:
        store.ingest(
            [("acme.json", night_doc(29, 500.0, cell=CELLS[1], lab="lab-a", controller="v", vendor="acme"))]
        )
        pages = site.pages(store)
    assert set(pages) == {"index.html"} | {site.cell_href(c) for c in CELLS} | {
        f"nights/2026-09-{d:02d}.html" for d in range(1, 31)
    }
    index = pages["index.html"]
    assert index.count('<tr class="cell">') == 3 and all(f"<th>{lab}</th>" in index for lab in LABS)
    assert index.count('<span class="passed">passed</span>') == 9  # a cell's latest verdict in each lab
    cell = pages[site.cell_href(CELLS[0])]
    assert all(f"{lab}: output_throughput@random-64-32/c1</h2>" in cell for lab in LABS)
    (regression,) = [p for p in cell.split("<p ")[1:] if p.startswith('class="change regression"')]
    assert "regressed -1" in regression and "recipe 370a065910226f54 -&gt; fewer-threads" in regression
    assert "lab-a: output_throughput" in cell.split(regression)[0].rsplit("<h2", 1)[1]  # under lab a's series
    vendor = pages[site.cell_href(CELLS[1])]  # a vendor's run is listed, marked, and kept out of the series
    assert vendor.count('<tr class="vendor">') == 1 and "<td>vendor acme</td>" in vendor
    assert "31 night(s)" not in index and index.count("(lab-a): 30 night(s)") == 3
    night = pages["nights/2026-09-19.html"]  # the slowdown's first night
    assert night.count('<tr class="run">') == 9
    assert pages["nights/2026-09-30.html"].count('<tr class="run">') == 10  # the vendor's night too
    new = f'<p class="change new regression"><a href="../{site.cell_href(CELLS[0])}">{CELLS[0]}</a> [lab-a]'
    assert night.count(new) == 1 and "output_throughput@random-64-32/c1 regressed" in night
    assert pages["nights/2026-09-10.html"].count("<p>none</p>") == 4  # before it: nothing to say
    assert pages["nights/2026-09-25.html"].count('class="change persist regression"') == 1


def test_a_regression_is_new_then_persists_until_the_night_a_later_change_takes_it_back():
    from dayzero.history.trends import SeriesChange

    def change(night: int, before: float, after: float) -> SeriesChange:
        worse = after < before
        return SeriesChange(
            "c",
            "s",
            "lab-a",
            f"r{night}",
            f"2026-09-{night:02d}T02:05:00+00:00",
            before,
            after,
            0.0,
            9.0,
            worse,
            {},
        )

    fell, back = change(5, 100.0, 80.0), change(9, 80.0, 95.0)
    nights = [f"2026-09-{n:02d}" for n in range(1, 13)]
    words = site.night_words([[fell, back]], nights)
    said = {n[-2:]: [w for w, found in words[n].items() if found] for n in nights}
    assert said == {
        **{f"{n:02d}": [] for n in (1, 2, 3, 4, 10, 11, 12)},
        "05": ["new"],
        "06": ["persist"],
        "07": ["persist"],
        "08": ["persist"],
        "09": ["recovered", "improved"],
    }


@pytest.mark.e2e
def test_the_site_in_chromium_shows_the_grid_a_cell_and_a_night(store_path, tmp_path, capsys):
    from devlab.browser import Browser

    out = tmp_path / "site"
    assert main(["site", str(out), "--store", str(store_path)]) == 0
    assert "34 page(s)" in capsys.readouterr().out
    seen = {}
    with Browser(height=1200) as browser:
        for name, rel, count in (
            ("grid", "index.html", "tr.cell svg.spark"),
            ("cell", site.cell_href(CELLS[0]), "h2 + svg"),
            ("night", "nights/2026-09-19.html", "tr.run a"),
        ):
            browser.goto((out / rel).resolve().as_uri())
            seen[name] = browser.js(
                f"[document.querySelectorAll({count!r}).length, document.querySelector('h1').textContent]"
            )
            browser.screenshot(out / f"{name}.png")
    assert seen["grid"] == [9, "dayzero results across labs"]
    assert seen["cell"] == [9, CELLS[0]]  # three series in each of three labs, each drawn
    assert seen["night"] == [9, "night 2026-09-19"]
    assert all((out / f"{name}.png").stat().st_size > 10_000 for name in seen)
