"""Pictures of a history: a sparkline per cell for the acceptance grid, and a series with its
change points (and the level between them) for the benchmark card. `sparkline` and
`series_chart` are pure (data in, SVG out); `sparklines` and `charts` read a store for them."""

from __future__ import annotations

import bisect
import html
from collections.abc import Sequence

from dayzero.history import trends
from dayzero.history.store import SeriesPoint
from dayzero.history.trends import SeriesChange
from dayzero.report import plots

SPARK_W, SPARK_H = 72, 18
SPARK_POINTS = 2 * SPARK_W


def sparkline(values: Sequence[float], marks: Sequence[int] = (), title: str = "") -> str:
    """A small inline SVG of a series; `marks` are the change points' nights (red ticks). A
    series longer than two points a pixel is drawn by the means of that many buckets: a year's
    365 points in 72 pixels were most of a 720-sparkline grid's 2.7 MB."""
    if len(values) < 2:
        return ""
    if len(values) > SPARK_POINTS:
        step = len(values) / SPARK_POINTS
        cuts = [round(i * step) for i in range(SPARK_POINTS + 1)]
        values = [sum(values[a:b]) / (b - a) for a, b in zip(cuts, cuts[1:], strict=False)]
        marks = [bisect.bisect_right(cuts, m) - 1 for m in marks]  # the bucket holding the night
    lo, hi = min(values), max(values)
    span = (hi - lo) or 1.0

    def at(i: int, v: float) -> tuple[float, float]:
        return 1 + i * (SPARK_W - 2) / (len(values) - 1), SPARK_H - 2 - (v - lo) / span * (SPARK_H - 4)

    path = " ".join("{:.1f},{:.1f}".format(*at(i, v)) for i, v in enumerate(values))
    ticks = "".join(
        f'<line class="change" x1="{at(i, lo)[0]:.1f}" y1="0" x2="{at(i, lo)[0]:.1f}" y2="{SPARK_H}" '
        'stroke="#dc2626" stroke-width="1.5"/>'
        for i in marks
    )
    return (
        f'<svg class="spark" xmlns="http://www.w3.org/2000/svg" width="{SPARK_W}" height="{SPARK_H}" '
        f'viewBox="0 0 {SPARK_W} {SPARK_H}"><title>{html.escape(title)}</title>{ticks}'
        f'<polyline fill="none" stroke="#2563eb" stroke-width="1.2" points="{path}"/></svg>'
    )


def series_chart(cell: str, series: str, points: Sequence[SeriesPoint], found: Sequence[SeriesChange]) -> str:
    """A series night by night (each night's interval as an error bar where the store has one),
    the level it held between change points, and each change point marked with its night, its
    size and what changed with it (the marker's tooltip)."""
    index = {p.run_id: i for i, p in enumerate(points)}
    cuts = [index[c.run_id] for c in found]
    edges = [0, *cuts, len(points)]
    level = []
    for a, b in zip(edges, edges[1:], strict=False):
        mean = sum(p.value for p in points[a:b]) / (b - a)
        level += [(float(a), mean), (float(b - 1), mean)]
    marks = tuple((float(index[c.run_id]), points[index[c.run_id]].value) for c in found)
    labels = tuple(
        f"{c.finished[:10]} {c.change_pct:+.1f}% "
        + (", ".join(f"{k} {a} -> {b}" for k, (a, b) in c.changed.items()) or "nothing recorded changed")
        for c in found
    )
    bars = tuple((p.lo, p.hi) if p.lo is not None and p.hi is not None else None for p in points)
    return plots.line_chart(
        [
            plots.Series(
                "each night (error bars: its interval)" if any(bars) else "each night",
                tuple((float(i), p.value) for i, p in enumerate(points)),
                radius=1.5,
                bars=bars if any(bars) else (),
            ),
            plots.Series("level between changes", tuple(level), colour=6, dashed=True, radius=0),
            plots.Series("change point", marks, colour=1, labels=labels, line=False, radius=6),
        ],
        f"{cell}: {series}",
        f"night (first: {points[0].finished[:10]})" if points else "night",
        series,
    )


def main_series(names: Sequence[tuple[str, bool]]) -> str | None:
    """The series a cell is pictured by: its first output throughput, else its first series."""
    ordered = sorted(names, key=lambda n: (not n[0].startswith("output_throughput@"), n[0]))
    return ordered[0][0] if ordered else None


def _main(store, cell: str, lab: str | None):
    """A cell's main series in one lab's runs (None: the lab of its newest run): (series,
    higher is better, points, lab) or None when the cell has no runs there."""
    lab = lab or store.latest_lab(cell)
    found = store.cell_series(cell, lab=lab) if lab else {}
    series = main_series([(name, higher) for (_, name), (higher, _) in found.items()])
    if series is None:
        return None
    higher, points = found[(lab, series)]
    return series, higher, points, lab


def sparklines(store, cells: Sequence[str], lab: str | None = None) -> dict[str, str]:
    """cell -> its main series' sparkline in one lab's runs (None: each cell's newest run's lab),
    change points marked (cells without runs left out)."""
    out = {}
    for cell in cells:
        main = _main(store, cell, lab)
        if main is None:
            continue
        series, higher, points, run_lab = main
        out[cell] = series_spark(series, run_lab, points, trends.found(cell, series, higher, points, run_lab))
    return out


def series_spark(series: str, lab: str, points: Sequence[SeriesPoint], found: Sequence[SeriesChange]) -> str:
    """A series' sparkline, its change points marked, its title the nights, latest value and changes."""
    index = {p.run_id: i for i, p in enumerate(points)}
    last = f"{points[-1].value:g}" if points else "-"
    title = f"{series} ({lab}): {len(points)} night(s), latest {last}" + "".join(
        f"; {c.finished[:10]} {c.change_pct:+.1f}%" for c in found
    )
    return sparkline([p.value for p in points], [index[c.run_id] for c in found], title)


def charts(store, cells: Sequence[str], lab: str | None = None) -> list[str]:
    """Each cell's main series (one lab's, as `sparklines`) as a chart with its change points."""
    out = []
    for cell in cells:
        main = _main(store, cell, lab)
        if main is not None:
            series, higher, points, run_lab = main
            found = trends.found(cell, series, higher, points, run_lab)
            out.append(series_chart(f"{cell} ({run_lab})", series, points, found))
    return out
