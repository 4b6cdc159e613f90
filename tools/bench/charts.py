"""Inline SVG charts for the leaderboard: plain markup from Python, no scripts, every text escaped.

Each chart is one <figure> block without blank lines, so Markdown passes it through as raw HTML.
Text and axes are drawn in `currentColor`, so they take the page's text colour and stay readable
in dark mode; only the data marks carry fixed colours, chosen to read on light and dark grounds.
"""

from __future__ import annotations

import math
from html import escape

WIDTH = 640  # the narrowest a chart is drawn; a chart widens to hold its longest label
LINE = 14  # px between label baselines: labels closer than this would overlap
CHAR = 7.2  # px: a generous width of one character at font-size 12 (wide glyphs, bold fallbacks)
FONT = 'font-family="sans-serif" font-size="12" fill="currentColor"'
FASTER, SLOWER, POINT = "#43a047", "#e53935", "#5c6bc0"


def _text(text: str) -> str:
    """Text for the markup, escaped and on one line: a line break inside the figure would let a
    label (a CPU's name, a model's) end the HTML block and start Markdown of its own."""
    return escape(" ".join(str(text).split()))


def _figure(svg: str, caption: str) -> str:
    return f'<figure class="specatlas-chart">{svg}<figcaption>{_text(caption)}</figcaption></figure>'


def text_width(text: str) -> float:
    """An upper estimate of the drawn width of `text` in the charts' font, so that every label
    can be placed inside the drawing area (the SVG clips whatever falls outside its viewBox)."""
    return len(text) * CHAR


def _svg_open(width: float, height: float, caption: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width:.0f} {height:.0f}" width="{width:.0f}" '
            f'height="{height:.0f}" role="img" aria-label="{_text(caption)}" {FONT}>')


def _ticks(low: float, high: float, count: int = 5) -> list[float]:
    step = (high - low) / count
    magnitude = 10 ** math.floor(math.log10(step))
    step = min((m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= step), default=step)
    first = math.ceil(low / step) * step
    return [round(first + i * step, 10) for i in range(int((high - first) / step + 1e-9) + 1)]


def speedup_bars(rows: list[tuple[str, float, float, float]], caption: str) -> str:
    """Horizontal bars, one per (label, mean speedup, lowest, highest), with the range over runs as
    a whisker and the baseline's 1x marked. The label column is as wide as the longest label."""
    row_height, value_room = 22, 60
    label_width = max([230.0, *(text_width(label) + 6 for label, *_ in rows)])
    bar_left = label_width + 10
    top = max([1.0, *(high for *_, high in rows)]) * 1.1
    plot = WIDTH - 240 - value_room
    width = bar_left + plot + value_room
    height = row_height * len(rows) + 30

    def x(value: float) -> float:
        return bar_left + plot * value / top

    parts = [_svg_open(width, height, caption)]
    for i, (label, value, low, high) in enumerate(rows):
        y = 8 + i * row_height
        parts.append(f'<text x="{label_width:.0f}" y="{y + 14}" text-anchor="end">{_text(label)}</text>'
                     f'<rect x="{bar_left}" y="{y + 2}" width="{x(value) - bar_left:.1f}" height="{row_height - 6}" '
                     f'fill="{FASTER if value >= 1 else SLOWER}"><title>{_text(label)}: {value:.2f}×'
                     f'{f" (runs: {low:.2f}–{high:.2f}×)" if high > low else ""}</title></rect>')
        if high > low:
            mid = y + row_height / 2 - 1
            parts.append(f'<path d="M{x(low):.1f} {mid:.1f}H{x(high):.1f}M{x(low):.1f} {mid - 4:.1f}v8'
                         f'M{x(high):.1f} {mid - 4:.1f}v8" stroke="currentColor" fill="none"/>')
        parts.append(f'<text x="{x(max(value, high)) + 4:.1f}" y="{y + 14}">{value:.2f}×</text>')
    bottom = 8 + len(rows) * row_height
    parts.append(f'<line x1="{x(1):.1f}" y1="4" x2="{x(1):.1f}" y2="{bottom}" stroke="currentColor" stroke-dasharray="4 3"/>'
                 f'<text x="{x(1):.1f}" y="{bottom + 14}" text-anchor="middle">1× (baseline)</text></svg>')
    return _figure("".join(parts), caption)


def spread_labels(wanted: list[float], low: float, high: float, gap: float = LINE) -> list[float]:
    """Positions as close as possible to `wanted` (in order) with at least `gap` between
    neighbours, inside [low, high] when they fit: a forward pass pushes down, a backward one up."""
    order = sorted(range(len(wanted)), key=lambda i: wanted[i])
    placed = [wanted[i] for i in order]
    for k in range(len(placed)):
        placed[k] = max(placed[k], low if k == 0 else placed[k - 1] + gap)
    for k in reversed(range(len(placed))):
        placed[k] = min(placed[k], high if k == len(placed) - 1 else placed[k + 1] - gap)
    for k in range(1, len(placed)):  # more labels than room: keep the gap, overflow downwards
        placed[k] = max(placed[k], placed[k - 1] + gap)
    out = [0.0] * len(wanted)
    for k, i in enumerate(order):
        out[i] = placed[k]
    return out


def accepted_vs_speedup(points: list[tuple[str, float, float]], caption: str) -> str:
    """Scatter of (label, mean accepted tokens, speedup): how much of the acceptance survives as
    speed. Labels sit in a column right of the plot, each joined to its point by a leader line,
    so they never overlap however close the points are; the column is as wide as the longest
    label, so none is cut at the chart's right edge."""
    left, top_pad, bottom_pad = 60, 20, 45
    label_column = max([200.0, *(16 + text_width(label) + 8 for label, *_ in points)])
    plot_h = max(255, LINE * len(points))
    height = top_pad + plot_h + bottom_pad
    xs = [p[1] for p in points] + [1.0]
    ys = [p[2] for p in points] + [1.0]
    x_low, x_high = min(xs) * 0.95, max(xs) * 1.05 + 0.05
    y_low, y_high = min(ys) * 0.9, max(ys) * 1.1 + 0.05
    plot_w = WIDTH - left - 200
    width = left + plot_w + label_column

    def px(value: float) -> float:
        return left + plot_w * (value - x_low) / (x_high - x_low)

    def py(value: float) -> float:
        return top_pad + plot_h * (1 - (value - y_low) / (y_high - y_low))

    parts = [_svg_open(width, height, caption),
             f'<rect x="{left}" y="{top_pad}" width="{plot_w}" height="{plot_h}" fill="none" stroke="currentColor" stroke-opacity="0.5"/>']
    for tick in _ticks(x_low, x_high):
        parts.append(f'<text x="{px(tick):.1f}" y="{top_pad + plot_h + 16}" text-anchor="middle">{tick:g}</text>')
    for tick in _ticks(y_low, y_high):
        parts.append(f'<text x="{left - 6}" y="{py(tick) + 4:.1f}" text-anchor="end">{tick:g}×</text>')
    parts.append(f'<line x1="{left}" y1="{py(1):.1f}" x2="{left + plot_w}" y2="{py(1):.1f}" stroke="currentColor" stroke-dasharray="4 3"/>'
                 f'<text x="{left + plot_w / 2}" y="{height - 8}" text-anchor="middle">mean accepted tokens per target forward</text>'
                 f'<text x="14" y="{top_pad + plot_h / 2}" text-anchor="middle" transform="rotate(-90 14 {top_pad + plot_h / 2})">speedup (×)</text>')
    label_x = left + plot_w + 16
    label_ys = spread_labels([py(s) + 4 for _, _, s in points], top_pad + 10, top_pad + plot_h)
    for (label, accepted, speedup), label_y in zip(points, label_ys):
        x, y = px(accepted), py(speedup)
        parts.append(f'<line x1="{x:.1f}" y1="{y:.1f}" x2="{label_x - 3}" y2="{label_y - 4:.1f}" stroke="currentColor" stroke-opacity="0.35"/>'
                     f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" fill="{POINT}"><title>{_text(label)}: '
                     f'{accepted:.2f} accepted, {speedup:.2f}×</title></circle>'
                     f'<text x="{label_x}" y="{label_y:.1f}" class="sa-point-label">{_text(label)}</text>')
    parts.append("</svg>")
    return _figure("".join(parts), caption)


def acceptance_by_data(series: dict[str, list[tuple[float, float]]], caption: str) -> str:
    """Lines of (training answer tokens, mean accepted tokens per step), one per series, the
    token axis logarithmic (the sizes grow by 4x): how much data a head needs."""
    left, top_pad, bottom_pad, plot_w, plot_h = 60, 20, 45, WIDTH - 60 - 200, 240
    width, height = WIDTH, top_pad + plot_h + bottom_pad
    points = [point for line in series.values() for point in line]
    x_low, x_high = (math.log10(min(p[0] for p in points)) - 0.1, math.log10(max(p[0] for p in points)) + 0.1)
    y_low, y_high = 1.0, max(p[1] for p in points) * 1.1 + 0.05

    def px(tokens: float) -> float:
        return left + plot_w * (math.log10(tokens) - x_low) / (x_high - x_low)

    def py(value: float) -> float:
        return top_pad + plot_h * (1 - (value - y_low) / (y_high - y_low))

    parts = [_svg_open(width, height, caption),
             f'<rect x="{left}" y="{top_pad}" width="{plot_w}" height="{plot_h}" fill="none" stroke="currentColor" stroke-opacity="0.5"/>']
    for exponent in range(math.ceil(x_low), math.floor(x_high) + 1):
        parts.append(f'<text x="{px(10 ** exponent):.1f}" y="{top_pad + plot_h + 16}" text-anchor="middle">1e{exponent}</text>')
    for tick in _ticks(y_low, y_high):
        parts.append(f'<text x="{left - 6}" y="{py(tick) + 4:.1f}" text-anchor="end">{tick:g}</text>')
    parts.append(f'<text x="{left + plot_w / 2}" y="{height - 8}" text-anchor="middle">training answer tokens (log scale)</text>'
                 f'<text x="14" y="{top_pad + plot_h / 2}" text-anchor="middle" transform="rotate(-90 14 {top_pad + plot_h / 2})">mean accepted tokens</text>')
    for (label, line), colour, row in zip(series.items(), (POINT, FASTER, SLOWER), range(len(series))):
        path = " ".join(f"{px(t):.1f},{py(a):.1f}" for t, a in sorted(line))
        parts.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
        parts.extend(f'<circle cx="{px(t):.1f}" cy="{py(a):.1f}" r="4" fill="{colour}"><title>{_text(label)}: '
                     f'{t:,.0f} tokens, {a:.2f} accepted</title></circle>' for t, a in line)
        parts.append(f'<text x="{left + plot_w + 16}" y="{top_pad + 14 + LINE * row}" fill="{colour}">{_text(label)}</text>')
    parts.append("</svg>")
    return _figure("".join(parts), caption)
