"""Pictures of the history: a sparkline per cell in the acceptance grid, a cell's series with its
change points in the benchmark card (their SVG, as the pages carry it; the pages were looked at in
headless Chromium when made: see the issue note)."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("ruptures", reason="the 'history' extra (tools/setup installs it)")

from dayzero import evidence  # noqa: E402
from dayzero.cli import main  # noqa: E402
from dayzero.history.store import open_store  # noqa: E402
from dayzero.report import (
    nightly,  # noqa: E402
    pictures,  # noqa: E402
)

from .conftest import REPO  # noqa: E402
from .history_nights import CELL, series_docs  # noqa: E402

FLAT = "smollm2-135m/cpu+llama.cpp/low_latency/ngram_spec"
WOBBLE = (1.0, 1.02, 0.98, 1.01, 0.99, 1.0, 0.985, 1.015)


def nights(level_after: float, at: int = 20, count: int = 40) -> list[float]:
    return [(100.0 if i < at else level_after) * WOBBLE[i % len(WOBBLE)] for i in range(count)]


@pytest.fixture
def lab(tmp_path):
    """A store with two cells' nights (one slowed at night 20 with its recipe) and their latest evidence."""
    with open_store(tmp_path / "h.sqlite") as store:
        for cell, after in ((CELL, 80.0), (FLAT, 100.0)):
            docs = series_docs(
                nights(after), changes={20: {"recipe": "slower"}} if after != 100 else None, cell=cell
            )
            store.ingest((str(i), d) for i, d in enumerate(docs))
            evidence.write(tmp_path / "reports", docs[-1])
    return tmp_path


def drawn(lab, verb: str, *more: str) -> int:
    """`dayzero VERB --history` over the lab's reports and store."""
    return main(
        [
            "--matrix",
            str(REPO / "matrix"),
            verb,
            "--reports",
            str(lab / "reports"),
            "--history",
            str(lab / "h.sqlite"),
            *more,
        ]
    )


def test_a_sparkline_marks_each_change_point_at_its_night():
    svg = pictures.sparkline(nights(80.0), [20], "t <x>")
    (x,) = re.findall(r'class="change" x1="([\d.]+)"', svg)
    assert float(x) == pytest.approx(1 + 20 * (pictures.SPARK_W - 2) / 39, abs=0.1)
    assert "<title>t &lt;x&gt;</title>" in svg and pictures.sparkline([1.0]) == ""


def test_the_acceptance_grid_draws_each_cells_trend_under_its_badge(lab, capsys):
    assert drawn(lab, "acceptance") == 0
    page = (lab / "reports" / "acceptance.html").read_text()
    slowed = re.search(rf'<td data-cell="{re.escape(CELL)}".*?</td>', page).group(0)
    flat = re.search(rf'<td data-cell="{re.escape(FLAT)}".*?</td>', page).group(0)
    assert slowed.count('class="change"') == 1 and "-20.1%" in slowed
    assert 'class="spark"' in flat and 'class="change"' not in flat
    assert page.count('class="spark"') == 2  # cells without history have none


def test_the_benchmark_card_draws_each_series_with_its_change_points(lab, capsys):
    assert drawn(lab, "card", "--model", "smollm2-135m") == 0
    page = (lab / "reports" / "cards" / "smollm2-135m" / "cpu.html").read_text()
    history = page.split('<div id="history">', 1)[1]
    assert history.count("<svg") == 2
    (mark,) = re.findall(r'data-series="change point" data-point="([^"]+)"', history)
    assert mark.startswith("2026-09-21 -20.1%") and "recipe 370a065910226f54 -&gt; slower" in mark


def test_a_night_is_drawn_with_its_trends_and_the_cards_of_the_models_that_ran(lab):
    from dayzero.spec.matrix import load_matrix

    drawn = nightly.draw_night(lab / "h.sqlite", lab / "reports", load_matrix(REPO / "matrix"), [CELL])
    assert (
        drawn[0].endswith("acceptance.md")
        and 'class="spark"' in (lab / "reports" / "acceptance.html").read_text()
    )
    assert [p.rsplit("/", 2)[-2] for p in drawn[1:]] == ["smollm2-135m"]  # only the model that ran
    assert '<div id="history">' in (lab / "reports" / "cards" / "smollm2-135m" / "cpu.html").read_text()


def test_a_years_sparkline_is_drawn_by_bucket_means_with_its_change_point_in_place():
    values = [100.0] * 200 + [80.0] * 165
    svg = pictures.sparkline(values, [200])
    drawn = svg.split('points="')[1].split('"')[0].split()
    assert len(drawn) == pictures.SPARK_POINTS
    tick = float(svg.split('class="change" x1="')[1].split('"')[0])
    first_low = next(i for i, xy in enumerate(drawn) if float(xy.split(",")[1]) > pictures.SPARK_H / 2)
    assert tick == float(drawn[first_low].split(",")[0])  # the tick on the first bucket at the new level


def test_a_night_with_no_point_is_a_gap_in_the_sparkline_and_the_chart(tmp_path):
    docs = series_docs(nights(100.0, count=20))
    docs[8]["verdict"] = "broken"  # its numbers 30% off: a gap, not a dip
    docs[8]["checks"][0]["details"]["summaries"][0]["output_throughput"] = 70.0
    with open_store(tmp_path / "h.sqlite") as store:
        store.ingest((str(i), d) for i, d in enumerate(docs))
        spark = pictures.sparklines(store, [CELL])[CELL]
        (chart,) = pictures.charts(store, [CELL])
    assert spark.count("<polyline") == 2 and "1 night(s) with no point" in spark
    assert "no point (broken, invalid, contended)" in chart
    assert pictures.positions(4, [1]) == [0, 2, 3, 4]
