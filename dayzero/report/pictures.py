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


def positions(count: int, gaps: Sequence[int] = ()) -> list[int]:
    """Each point's night among all nights: the nights in `gaps` (broken, invalid or contended:
    no point) are skipped."""
    skip = set(gaps)
    return [night for night in range(count + len(skip)) if night not in skip][:count]


def sparkline(
    values: Sequence[float], marks: Sequence[int] = (), title: str = "", gaps: Sequence[int] = ()
) -> str:
    """A small inline SVG of a series; `marks` are the change points' nights (red ticks), `gaps`
    the nights with no point (the line breaks there). A series longer than two points a pixel is
    drawn by the means of that many buckets: a year's 365 points in 72 pixels were most of a
    720-sparkline grid's 2.7 MB."""
    at_night = positions(len(values), gaps)
    full: list[float | None] = [None] * (len(values) + len(set(gaps)))
    for night, v in zip(at_night, values, strict=True):
        full[night] = v
    marks = [at_night[m] for m in marks if m < len(at_night)]
    if len(values) < 2:
        return ""
    if len(full) > SPARK_POINTS:
        step = len(full) / SPARK_POINTS
        cuts = [round(i * step) for i in range(SPARK_POINTS + 1)]
        buckets = [[v for v in full[a:b] if v is not None] for a, b in zip(cuts, cuts[1:], strict=False)]
        full = [sum(b) / len(b) if b else None for b in buckets]
        marks = [bisect.bisect_right(cuts, m) - 1 for m in marks]  # the bucket holding the night
    known = [v for v in full if v is not None]
    lo, hi = min(known), max(known)
    span = (hi - lo) or 1.0

    def at(i: int, v: float) -> tuple[float, float]:
        return 1 + i * (SPARK_W - 2) / (len(full) - 1), SPARK_H - 2 - (v - lo) / span * (SPARK_H - 4)

    runs: list[list[str]] = [[]]
    for i, v in enumerate(full):
        if v is None:
            runs.append([])
        else:
            runs[-1].append("{:.1f},{:.1f}".format(*at(i, v)))
    lines = "".join(
        f'<polyline fill="none" stroke="#2563eb" stroke-width="1.2" points="{" ".join(r)}"/>'
        for r in runs
        if r
    )
    ticks = "".join(
        f'<line class="change" x1="{at(i, lo)[0]:.1f}" y1="0" x2="{at(i, lo)[0]:.1f}" y2="{SPARK_H}" '
        'stroke="#dc2626" stroke-width="1.5"/>'
        for i in marks
    )
    return (
        f'<svg class="spark" xmlns="http://www.w3.org/2000/svg" width="{SPARK_W}" height="{SPARK_H}" '
        f'viewBox="0 0 {SPARK_W} {SPARK_H}"><title>{html.escape(title)}</title>{ticks}{lines}</svg>'
    )


def series_chart(
    cell: str,
    series: str,
    points: Sequence[SeriesPoint],
    found: Sequence[SeriesChange],
    gaps: Sequence[int] = (),
) -> str:
    """A series night by night (each night's interval as an error bar where the store has one),
    the level it held between change points, each change point marked with its night, its size
    and what changed with it (the marker's tooltip), and the nights with no point (`gaps`:
    broken, invalid or contended) marked at the foot of the chart."""
    night = positions(len(points), gaps)
    index = {p.run_id: i for i, p in enumerate(points)}
    cuts = [index[c.run_id] for c in found]
    edges = [0, *cuts, len(points)]
    level = []
    for a, b in zip(edges, edges[1:], strict=False):
        mean = sum(p.value for p in points[a:b]) / (b - a)
        level += [(float(night[a]), mean), (float(night[b - 1]), mean)]
    marks = tuple((float(night[index[c.run_id]]), points[index[c.run_id]].value) for c in found)
    floor = min((p.value for p in points), default=0.0)
    holes = tuple((float(g), floor) for g in sorted(set(gaps)))
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
                tuple((float(night[i]), p.value) for i, p in enumerate(points)),
                radius=1.5,
                bars=bars if any(bars) else (),
            ),
            plots.Series("level between changes", tuple(level), colour=6, dashed=True, radius=0),
            plots.Series("change point", marks, colour=1, labels=labels, line=False, radius=6),
            *(
                [plots.Series("no point (broken, invalid, contended)", holes, colour=3, line=False, radius=3)]
                if holes
                else []
            ),
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
    higher is better, points, lab, gaps: the nights of the lab's runs with no point in it) or
    None when the cell has no runs there."""
    lab = lab or store.latest_lab(cell)
    found = trends.clean_series(store, cell, lab=lab) if lab else {}
    series = main_series([(name, higher) for (_, name), (higher, pts) in found.items() if pts])
    if series is None:
        return None
    higher, points = found[(lab, series)]
    seen = {p.run_id for p in points}
    runs = [r for r in store.runs(cell, lab) if r["vendor"] is None]
    return series, higher, points, lab, [i for i, r in enumerate(runs) if r["run_id"] not in seen]


def sparklines(store, cells: Sequence[str], lab: str | None = None) -> dict[str, str]:
    """cell -> its main series' sparkline in one lab's runs (None: each cell's newest run's lab),
    change points marked, nights without a point as gaps (cells without runs left out)."""
    out = {}
    for cell in cells:
        main = _main(store, cell, lab)
        if main is None:
            continue
        series, higher, points, run_lab, gaps = main
        found = trends.found(cell, series, higher, points, run_lab)
        out[cell] = series_spark(series, run_lab, points, found, gaps)
    return out


def series_spark(
    series: str,
    lab: str,
    points: Sequence[SeriesPoint],
    found: Sequence[SeriesChange],
    gaps: Sequence[int] = (),
) -> str:
    """A series' sparkline, its change points marked, its title the nights, latest value and changes."""
    index = {p.run_id: i for i, p in enumerate(points)}
    last = f"{points[-1].value:g}" if points else "-"
    title = f"{series} ({lab}): {len(points)} night(s), latest {last}" + "".join(
        f"; {c.finished[:10]} {c.change_pct:+.1f}%" for c in found
    )
    if gaps:
        title += f"; {len(gaps)} night(s) with no point (broken, invalid or contended)"
    return sparkline([p.value for p in points], [index[c.run_id] for c in found], title, gaps)


def charts(store, cells: Sequence[str], lab: str | None = None) -> list[str]:
    """Each cell's main series (one lab's, as `sparklines`) as a chart with its change points."""
    out = []
    for cell in cells:
        main = _main(store, cell, lab)
        if main is not None:
            series, higher, points, run_lab, gaps = main
            found = trends.found(cell, series, higher, points, run_lab)
            out.append(series_chart(f"{cell} ({run_lab})", series, points, found, gaps))
    return out
