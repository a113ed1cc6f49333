"""`dayzero site` over a store of three labs' nights, each lab's nightly root on disk: the grid,
each cell's page (latest evidence, Allure and card links, vendor submissions with their
reproduction status, series), each night's, each lab's cards, as files and as Chromium renders
them (screenshots kept beside the site)."""

from __future__ import annotations

import copy
import datetime as dt
import html
import json
import urllib.parse
from pathlib import Path

import pytest

pytest.importorskip("ruptures", reason="the 'history' extra (tools/setup installs it)")

from dayzero import evidence, site  # noqa: E402
from dayzero.cli import main  # noqa: E402
from dayzero.errors import ConfigError  # noqa: E402
from dayzero.history import alarms  # noqa: E402
from dayzero.history.store import open_store  # noqa: E402
from dayzero.report.reproduction import VENDORS_WORD  # noqa: E402
from dayzero.site import links  # noqa: E402
from dayzero.spec.matrix import load_matrix  # noqa: E402

from .history_nights import night_doc, write_nights  # noqa: E402
from .submission_corpus.synthetic import synthetic_run  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
LABS = {"lab-a": 100.0, "lab-b": 80.0, "lab-c": 60.0}
CELLS = [f"smollm2-135m/cpu+llama.cpp/low_latency/s{c}" for c in range(3)]
SLOWED = (CELLS[0], "lab-a", 18)  # lab a's first cell is 15% slower from night 18, its recipe changed
FAILED = (CELLS[2], "lab-c", 18)  # lab c's third cell failed that night
BROKEN = (CELLS[2], "lab-b", 10)  # lab b's broke on night 10
SWEPT = "smollm2-135m/cpu+llama.cpp/high_throughput/baseline"  # a real cell: its evidence has sweeps
KIND = "smollm2-135m/cpu+llama.cpp"


def nights(lab: str, level: float) -> list[dict]:
    docs = []
    for cell in CELLS:
        for n in range(30):
            slow = (cell, lab) == SLOWED[:2] and n >= SLOWED[2]
            value = round(level * (1 + 0.005 * ((n * 7) % 5 - 2)) * (0.85 if slow else 1), 2)
            recipe = "fewer-threads" if slow else "370a065910226f54"
            doc = night_doc(n, value, cell=cell, lab=lab, controller=lab, recipe=recipe)
            if (cell, lab) == (CELLS[0], "lab-a"):  # its floor's interval, as checks.intervals writes it
                interval = {"lo": value * 0.98, "hi": value * 1.02, "n": 8, "runs": 1, "method": "bootstrap"}
                doc["checks"][0]["details"]["intervals"] = {"output_throughput": interval}
            if (cell, lab, n) == FAILED:
                doc["verdict"] = "failed"
            if (cell, lab, n) == BROKEN:  # the run broke: its halved number is no level
                doc["verdict"] = "broken"
                doc["checks"][0]["details"]["summaries"][0]["output_throughput"] = value / 2
            docs.append(doc)
    return docs


def vendor_copy(doc: dict, vendor: str, scale: float) -> dict:
    """The doc as accepted from a vendor's bundle, its floors' measurements times `scale`."""
    out = copy.deepcopy(doc)
    out["source"] = vendor
    out["run"].update(controller=f"{vendor}-ci", id=f"{vendor}-1")
    out["run"].pop("lab", None)
    out["submission"] = {"vendor": vendor, "bundle_sha256": "0" * 64}
    for check in out["checks"]:
        if check["name"].startswith("floor:") and isinstance(check.get("measured"), int | float):
            check["measured"] = check["measured"] * scale
    return out


@pytest.fixture(scope="module")
def labs(tmp_path_factory):
    """Three labs' nightly roots (lab a's also holds a run of the real cpu cells, and its last
    night an Allure report), two vendors' accepted evidence, one store of them all."""
    root = tmp_path_factory.mktemp("labs")
    for lab, level in LABS.items():
        write_nights(root / lab, nights(lab, level))
    last = sorted((root / "lab-a" / "nights").iterdir())[-1]
    (last / "allure-report").mkdir()
    (last / "allure-report" / "index.html").write_text("<html>allure</html>")
    real = root / "lab-a" / "nights" / "real"
    for path in synthetic_run(load_matrix(REPO / "matrix"), real, REPO / "suites" / "goldens"):
        doc = json.loads(path.read_text())
        doc["run"]["lab"] = "lab-a"
        evidence.write(real, doc)
    swept = json.loads(next((real / "evidence").glob(f"{evidence.slug(SWEPT)}__*.json")).read_text())
    accepted = root / "accepted"
    # within 1% of what lab a measured, a run of its own: reproduced (lab a's run itself,
    # relabelled, reproduces nothing: report.reproduction.same_run)
    evidence.write(accepted, vendor_copy(swept, "acme", 0.99))
    evidence.write(accepted, vendor_copy(swept, "bolt", 2.0))  # twice it: the vendor's word alone
    with open_store(root / "h.sqlite") as store:
        store.ingest_folder(*(root / lab for lab in LABS), accepted)
    told = alarms.Alarm(CELLS[1], "output_throughput@random-64-32/c1", "lab-b", "r",
                        "2026-09-17T02:05:00+00:00", "2026-09-19T02:05:00+00:00", 80.0, 70.0, 6.1, True,
                        "tail")  # fmt: skip
    regressions = {"history": {"new": [told.to_json()], "persist": [], "recovered": []}}
    (root / "lab-b" / "nights" / "20260919T020500" / "regressions.json").write_text(json.dumps(regressions))
    return root


def site_pages(labs, published=None) -> dict[str, str]:
    with open_store(labs / "h.sqlite") as store:
        return site.pages(store, labs / "site", published, load_matrix(REPO / "matrix"))


def resolved(labs, href: str) -> Path:
    return (labs / "site" / "cells" / urllib.parse.unquote(href)).resolve()


def hrefs(page: str, text: str) -> list[str]:
    return [part.rsplit('<a href="', 1)[1] for part in page.split(f'">{text}</a>')[:-1]]


def test_the_site_has_a_grid_a_page_per_cell_and_night_and_each_labs_card(labs):
    pages = site_pages(labs)
    real = {KIND + "/" + c for c in ("low_latency/baseline", "low_latency/ngram_spec")} | {
        KIND + "/high_throughput/" + s for s in ("baseline", "ngram_spec")
    }
    today = dt.datetime.now(dt.UTC).date()  # the synthetic run's evidence is a minute old
    night_pages = {f"nights/2026-09-{d:02d}.html" for d in range(1, 31)}
    assert set(pages) - night_pages - {f"nights/{today - dt.timedelta(days=1)}.html"} == {
        "index.html",
        f"nights/{today}.html",
        f"cards/lab-a/{KIND}.html",
        *(site.cell_href(c) for c in [*CELLS, *real]),
    }
    index = pages["index.html"]
    assert index.count('<tr class="cell">') == 7 and all(f"<th>{lab}</th>" in index for lab in LABS)
    assert index.count('<span class="passed">passed</span>') == 9 + 4  # each cell's latest in each lab
    assert f'<a href="cards/lab-a/{KIND}.html">cpu+llama.cpp (lab-a)</a>' in index
    row = index.split(f'<a href="{site.cell_href(SWEPT)}">')[1].split("</tr>")[0]
    assert row.endswith(
        '<td><span class="reproduced">Verified (reproduced)</span></td>'
        '<td><span class="vendor">Verified (vendor)</span></td>'
    )  # the vendors' columns: acme's, bolt's
    cell = pages[site.cell_href(CELLS[0])]
    assert all(f"{lab}: output_throughput@random-64-32/c1</h2>" in cell for lab in LABS)
    (regression,) = [p for p in cell.split("<p ")[1:] if p.startswith('class="change regression"')]
    assert "regressed -1" in regression and "recipe 370a065910226f54 -&gt; fewer-threads" in regression
    assert "lab-a: output_throughput" in cell.split(regression)[0].rsplit("<h2", 1)[1]  # under lab a's series
    charts = {c.split("</h2>")[0]: c for c in cell.split("<h2 id=")[1:]}
    bars = {name.split(">", 1)[1]: c.count('class="error-bar"') for name, c in charts.items()}
    assert bars["lab-a: output_throughput@random-64-32/c1"] == 30  # every night's interval
    assert sum(bars.values()) == 30  # where the evidence gives none, nothing is drawn
    assert index.count("(lab-b): 29 night(s)") == 1  # its broken night is a gap, not a -50% night
    assert index.count("(lab-a): 30 night(s)") == index.count("(lab-c): 30 night(s)") == 3  # theirs stay
    assert "31 night(s)" not in index and index.count("(lab-a): 30 night(s)") == 3


def test_a_cells_latest_evidence_allure_report_and_card_are_linked(labs):
    pages = site_pages(labs)
    cell = pages[site.cell_href(CELLS[0])]
    latest = cell.split('<h2 id="latest">')[1].split("</table>")[0]
    assert latest.count('<tr class="latest">') == 3  # one per lab: its newest run
    files = [resolved(labs, h) for h in hrefs(latest, "evidence")]
    assert [f.parent.parent.parent.parent.name for f in files] == list(LABS)  # each lab's own root
    assert all(
        f.is_file() and json.loads(f.read_text())["run"]["finished"].startswith("2026-09-30") for f in files
    )
    (allure,) = hrefs(latest, "Allure report")  # only lab a published one
    assert resolved(labs, allure).read_text() == "<html>allure</html>"
    assert latest.count('<span class="none">not published</span>') == 2
    assert latest.count('<span class="none">no sweep</span>') == 3
    swept = pages[site.cell_href(SWEPT)]
    (card,) = hrefs(swept, "benchmark card")
    assert card == f"../cards/lab-a/{KIND}.html"
    page = pages[f"cards/lab-a/{KIND}.html"]
    assert 'id="pareto"' in page and page.count('<tr class="point"') >= 2 and "(lab-a)" in page


def test_templates_say_where_each_lab_publishes(labs):
    published = site.Links(
        links.parse(["lab-b=https://b.example/nightly/{night}/evidence/{file}"], "--evidence-url"),
        links.parse(["https://r.example/{lab}/{night}/allure-report/index.html?cell={cell}"], "--allure-url"),
    )
    latest = site_pages(labs, published)[site.cell_href(CELLS[0])].split('<h2 id="latest">')[1]
    b_night = "20260930T020500"
    file = urllib.parse.quote(evidence.slug(CELLS[0]))
    assert (
        f'href="https://b.example/nightly/{b_night}/evidence/{file}__20260930T020500Z-00029.json"' in latest
    )
    assert resolved(labs, hrefs(latest, "evidence")[0]).is_file()  # lab a: no template, its file
    assert (
        f'href="https://r.example/lab-c/{b_night}/allure-report/index.html?cell='
        f'{urllib.parse.quote(CELLS[0], safe="/")}"' in latest
    )
    said = r"^--allure-url: 'https://x/\{nite\}': unknown field \{nite\}; expected one of \{lab\}"
    with pytest.raises(ConfigError, match=said):
        links.parse(["https://x/{nite}"], "--allure-url")


def test_vendor_submissions_say_whether_a_second_party_reproduced_them(labs):
    swept = site_pages(labs)[site.cell_href(SWEPT)]
    vendors = swept.split('<h2 id="vendors">')[1].split("</table>")[0]
    rows = vendors.split('<tr class="submission">')[1:]
    said = {row.split("</td>")[0][4:].split(" ")[0]: row for row in rows}
    assert set(said) == {"acme", "bolt"}
    assert '<span class="reproduced">Verified (reproduced)</span>' in said["acme"]  # lab a measured the same
    assert '<span class="vendor">Verified (vendor)</span>' in said["bolt"]  # twice lab a's: its word alone
    assert all(resolved(labs, hrefs(row, "evidence")[0]).is_file() for row in rows)
    with open_store(labs / "h.sqlite") as store:  # no matrix: not judged, and why
        unjudged = site.pages(store, labs / "site")[site.cell_href(SWEPT)]
    assert unjudged.count("not judged</span> (the cell is not in this matrix)") == 2
    assert "lab-a: output_throughput" in swept and "acme: " not in swept  # vendors stay out of the series


MARK = html.escape(f"({VENDORS_WORD})")


def test_what_a_vendor_stated_is_marked_as_its_word_and_the_labs_own_runs_are_not(labs):
    """Issue 42: a vendor's dates, run ids and engine version are bounded by the checker, never
    recomputed, so every page marks them as the acceptance table does, beside whose run it is;
    the lab's own run of the same cell (the same date and engine: the vendors copied it) stays bare."""
    pages = site_pages(labs)
    swept = pages[site.cell_href(SWEPT)]
    latest = swept.split('<h2 id="latest">')[1].split("</table>")[0]
    doc = json.loads(resolved(labs, hrefs(latest, "evidence")[0]).read_text())
    finished, engine = doc["run"]["finished"], f"{doc['engine']['name']} {doc['engine']['version']}"
    assert f"<td>{finished}</td>" in latest and f"<td>{engine}</td>" in latest and MARK not in latest
    vendors = swept.split('<h2 id="vendors">')[1].split("</table>")[0].split('<tr class="submission">')[1:]
    for row in vendors:  # whose, with its bundle; when and which engine on its word
        assert row.split("</td>")[0] in (
            "<td>acme (vendor, bundle 0000000000000000)",
            "<td>bolt (vendor, bundle 0000000000000000)",
        )
        assert f'{finished} <span class="word">{MARK}</span>' in row
        assert f'{engine} <span class="word">{MARK}</span>' in row
    runs = swept.split("<h2>Latest runs</h2>")[1].split("</table>")[0]
    lab_rows = runs.split('<tr class="lab">')[1:]
    vendor_rows = runs.split('<tr class="vendor">')[1:]
    assert len(lab_rows) == 1 and MARK not in lab_rows[0] and f"<td>{finished}</td>" in lab_rows[0]
    assert len(vendor_rows) == 2 and all(r.count(MARK) == 2 for r in vendor_rows)  # finished, run id
    assert {r.split("</td>")[1] for r in vendor_rows} == {"<td>acme (vendor)", "<td>bolt (vendor)"}
    night = pages[f"nights/{finished[:10]}.html"].split("<h2>Runs that did not pass, and vendor runs</h2>")[1]
    listed = night.split('<tr class="run">')[1:]
    assert {r.split("</td>")[0] for r in listed if MARK in r} == {"<td>acme (vendor)", "<td>bolt (vendor)"}
    assert all(MARK not in r for r in listed if "(vendor)" not in r.split("</td>")[0])
    (failed,) = pages["nights/2026-09-19.html"].split('<tr class="run">')[1:]  # lab c's own: bare
    assert failed.startswith("<td>lab-c</td>") and failed.endswith(
        "<td>2026-09-19T02:05:00+00:00</td></tr></table></body></html>"
    )
    index = pages["index.html"]
    assert '<th class="vendor">acme (vendor)</th>' in index and "vendor:acme" not in index
    assert all(MARK not in p for name, p in pages.items() if name.startswith("cards/"))  # the lab's alone


def test_a_night_says_what_is_new_persisting_and_recovered_and_which_runs_did_not_pass(labs):
    pages = site_pages(labs)
    night = pages["nights/2026-09-19.html"]  # the slowdown's first night, and lab c's failure
    assert [row.split("</td>")[0] for row in night.split('<tr class="lab"><td>')[1:]] == list(LABS)
    assert '<tr class="lab"><td>lab-c</td><td>1</td><td>2</td></tr>' in night  # failed, passed
    assert night.count('<tr class="run">') == 1 and f">{FAILED[0]}</a>" in night.split('<tr class="run">')[1]
    new = f'<p class="change new regression"><a href="../{site.cell_href(CELLS[0])}">{CELLS[0]}</a> [lab-a]'
    assert night.count(new) == 1 and "output_throughput@random-64-32/c1 regressed" in night
    assert (
        "nightly (its regressions.json): lab-b. In hindsight" in night
        and "stored series: lab-a, lab-c." in night
    )
    assert night.count(f'<p class="change new regression"><a href="../{site.cell_href(CELLS[1])}">') == 1
    assert "raised 2026-09-19" in night  # lab b's nightly's own alarm, in its words
    assert pages["nights/2026-09-10.html"].count("<p>none</p>") == 5  # before it: nothing to say
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
def test_the_site_in_chromium_shows_the_grid_a_cell_and_a_night(labs, capsys):
    from devlab.browser import Browser

    out = labs / "site-cli"
    assert main(["--matrix", str(REPO / "matrix"), "site", str(out), "--store", str(labs / "h.sqlite")]) == 0
    assert " page(s)" in capsys.readouterr().out
    seen = {}
    with Browser(height=1400) as browser:
        for name, rel, count in (
            ("grid", "index.html", "tr.cell svg.spark"),
            ("cell", site.cell_href(CELLS[0]), "h2 + svg"),
            ("vendors", site.cell_href(SWEPT), "tr.submission span.word"),
            ("night", "nights/2026-09-19.html", "p.change"),
            ("card", f"cards/lab-a/{KIND}.html", "#pareto svg"),
        ):
            browser.goto((out / rel).resolve().as_uri())
            seen[name] = browser.js(
                f"[document.querySelectorAll({count!r}).length, document.querySelector('h1').textContent]"
            )
            browser.screenshot(out / f"{name}.png")
            if (
                name == "vendors"
            ):  # as read on screen: each vendor's when and engine on its word, the lab's bare
                said = browser.js(
                    "[...document.querySelectorAll('tr.submission, tr.latest')].map(r => r.innerText)"
                )
    assert [row.count(f"({VENDORS_WORD})") for row in said] == [0, 2, 2]
    assert "(vendor, bundle 0000000000000000)" in said[1] and "(vendor" not in said[0]
    assert seen["grid"] == [9, "dayzero results across labs"]  # the real cells ran once: no sparkline
    assert seen["cell"] == [9, CELLS[0]]  # three series in each of three labs, each drawn
    assert seen["vendors"] == [4, SWEPT]
    assert seen["night"] == [2, "night 2026-09-19"]  # lab a's in hindsight, lab b's nightly's own
    assert seen["card"][0] == 1 and "(lab-a)" in seen["card"][1]
    assert all((out / f"{name}.png").stat().st_size > 10_000 for name in seen)


def test_a_store_that_is_not_there_is_refused_not_made_empty(tmp_path, capsys):
    assert main(["site", str(tmp_path / "site"), "--store", str(tmp_path / "typo.sqlite")]) == 2
    assert "typo.sqlite: <root>: no history store here" in capsys.readouterr().err
    assert not (tmp_path / "typo.sqlite").exists() and not (tmp_path / "site").exists()
