"""Small SVG charts for Allure attachments: throughput versus concurrency, latency quantiles.

Our own ~100 lines instead of matplotlib: the charts are two kinds of line plot, SVG is text
(so it can be redacted, diffed and embedded in a single-file report), and the harness stays
installable on lab controllers with nothing but the registries. Pure functions: data in, SVG out.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass

WIDTH, HEIGHT = 760, 360
MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 64, 250, 36, 48
COLOURS = ("#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#4b5563")


@dataclass(frozen=True)
class Series:
    name: str
    points: tuple[tuple[float, float], ...]
    colour: int | None = None  # index into COLOURS; default: the series' position
    dashed: bool = False
    labels: tuple[str, ...] = ()  # one per point: the marker's tooltip and `data-point`
    line: bool = True  # False: markers only (a scatter)
    radius: float = 3.5
    # one per point where given: the figure's interval (lo, hi) drawn as an error bar, or None
    # where the sample supports none (`checks.intervals`)
    bars: tuple[tuple[float, float] | None, ...] = ()


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values covering [lo, hi] (1, 2, 5 x 10^k steps)."""
    if hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / max(count, 1)
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    start = math.floor(lo / step) * step
    ticks = [round(start, 10)]
    while ticks[-1] < hi - step * 1e-9:
        ticks.append(round(ticks[-1] + step, 10))
    if len(ticks) == 1:
        ticks.append(round(start + step, 10))
    return ticks


def _fmt(value: float) -> str:
    return f"{value:g}" if abs(value) < 1e6 else f"{value:.2e}"


def line_chart(series: Sequence[Series], title: str, x_label: str, y_label: str) -> str:
    """One SVG document with axes, ticks, a legend and one polyline (plus markers) per series."""
    esc = html.escape
    points = [p for s in series for p in s.points]
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">',
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
        f'<text x="{WIDTH / 2}" y="20" text-anchor="middle" font-size="14">{esc(title)}</text>',
    ]
    if not points:
        parts.append(f'<text x="{WIDTH / 2}" y="{HEIGHT / 2}" text-anchor="middle">no data</text></svg>')
        return "\n".join(parts)
    xs = [p[0] for p in points]
    ys = [p[1] for p in points] + [y for s in series for bar in s.bars if bar for y in bar]
    x_ticks = nice_ticks(min(0.0, min(xs)), max(xs))
    y_ticks = nice_ticks(min(0.0, min(ys)), max(ys))
    x0, x1, y0, y1 = x_ticks[0], x_ticks[-1], y_ticks[0], y_ticks[-1]
    plot_w = WIDTH - MARGIN_LEFT - MARGIN_RIGHT
    plot_h = HEIGHT - MARGIN_TOP - MARGIN_BOTTOM

    def sx(x: float) -> float:
        return MARGIN_LEFT + (x - x0) / ((x1 - x0) or 1) * plot_w

    def sy(y: float) -> float:
        return MARGIN_TOP + plot_h - (y - y0) / ((y1 - y0) or 1) * plot_h

    bottom, right = MARGIN_TOP + plot_h, MARGIN_LEFT + plot_w
    parts.append(
        f'<g stroke="#999"><line x1="{MARGIN_LEFT}" y1="{bottom}" x2="{right}" y2="{bottom}"/>'
        f'<line x1="{MARGIN_LEFT}" y1="{MARGIN_TOP}" x2="{MARGIN_LEFT}" y2="{bottom}"/></g>'
    )
    for t in x_ticks:
        parts.append(
            f'<line x1="{sx(t):.1f}" y1="{bottom}" x2="{sx(t):.1f}" y2="{bottom + 4}" stroke="#999"/>'
            f'<text x="{sx(t):.1f}" y="{bottom + 16}" text-anchor="middle">{_fmt(t)}</text>'
        )
    for t in y_ticks:
        parts.append(
            f'<line x1="{MARGIN_LEFT}" y1="{sy(t):.1f}" x2="{right}" y2="{sy(t):.1f}" stroke="#eee"/>'
            f'<text x="{MARGIN_LEFT - 6}" y="{sy(t) + 4:.1f}" text-anchor="end">{_fmt(t)}</text>'
        )
    parts.append(
        f'<text x="{MARGIN_LEFT + plot_w / 2}" y="{HEIGHT - 10}" text-anchor="middle">{esc(x_label)}</text>'
        f'<text x="14" y="{MARGIN_TOP + plot_h / 2}" text-anchor="middle" '
        f'transform="rotate(-90 14 {MARGIN_TOP + plot_h / 2})">{esc(y_label)}</text>'
    )
    for i, s in enumerate(series):
        colour = COLOURS[(i if s.colour is None else s.colour) % len(COLOURS)]
        dash = ' stroke-dasharray="6 4"' if s.dashed else ""
        for (x, _), bar in zip(s.points, s.bars, strict=False):
            if bar:  # the interval: a vertical bar with caps, behind the marker
                x_at, lo, hi = sx(x), sy(bar[0]), sy(bar[1])
                parts.append(
                    f'<path class="error-bar" data-series="{esc(s.name)}" stroke="{colour}" '
                    f'stroke-width="1.5" d="M{x_at:.1f},{lo:.1f}V{hi:.1f}M{x_at - 4:.1f},{lo:.1f}'
                    f'h8M{x_at - 4:.1f},{hi:.1f}h8"/>'
                )
        labelled = sorted(zip(s.points, s.labels or [""] * len(s.points), strict=True))
        pts = [p for p, _ in labelled]
        if s.line:
            path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in pts)
            parts.append(
                f'<polyline class="series" data-name="{esc(s.name)}" fill="none" stroke="{colour}" '
                f'stroke-width="2"{dash} points="{path}"/>'
            )
        for (x, y), label in labelled:
            mark = f' class="point" data-series="{esc(s.name)}" data-point="{esc(label)}"' if label else ""
            tip = f"<title>{esc(label)}: {_fmt(round(x, 3))}, {_fmt(round(y, 3))}</title>" if label else ""
            at = f'cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="{s.radius}"'
            parts.append(f'<circle{mark} {at} fill="{colour}">{tip}</circle>')
        ly = MARGIN_TOP + 8 + 18 * i
        parts.append(
            f'<line x1="{right + 12}" y1="{ly - 4}" x2="{right + 28}" y2="{ly - 4}" stroke="{colour}" '
            f'stroke-width="3"{dash}/><text x="{right + 34}" y="{ly}">{esc(s.name)}</text>'
        )
    parts.append("</svg>")
    return "\n".join(parts)


def throughput_chart(points: Sequence[tuple]) -> str:
    """(series name, concurrency, tok/s[, (lo, hi) or None]) from a cell's throughput floors ->
    one line per series, each point with its interval's error bar where it has one."""
    by_series: dict[str, list[tuple[tuple[float, float], tuple[float, float] | None]]] = {}
    for name, concurrency, value, *bar in points:
        by_series.setdefault(name, []).append(((float(concurrency), float(value)), bar[0] if bar else None))
    series = [
        Series(name, tuple(p for p, _ in ps), bars=tuple(b for _, b in ps)) for name, ps in by_series.items()
    ]
    return line_chart(
        series, "Throughput versus concurrency (error bars: 95% interval)", "concurrency", "tokens/s"
    )


def latency_cdf_chart(quantiles: dict[str, dict[str, Sequence[tuple[float, float]]]]) -> str:
    """Load run -> {"ttft": [(ms, share)], "e2e": [...]} -> one colour per run, TTFT dashed.

    The points are the quantiles the evidence keeps (median, p90, p99), so the curve is the
    CDF through them, not every request."""
    series = []
    for i, (run, kinds) in enumerate(quantiles.items()):
        for kind, points in kinds.items():
            if points:
                series.append(Series(f"{run} {kind}", tuple(points), colour=i, dashed=kind == "ttft"))
    return line_chart(
        series, "Latency CDF at p50/p90/p99 (TTFT dashed, end-to-end solid)", "ms", "share of requests"
    )
