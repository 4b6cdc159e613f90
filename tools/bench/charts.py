"""Inline SVG charts for the leaderboard: plain markup from Python, no scripts, every text escaped.

Each chart is one <figure> block without blank lines, so Markdown passes it through as raw HTML.
"""

from __future__ import annotations

import math
from html import escape

WIDTH = 640
FONT = 'font-family="sans-serif" font-size="12"'


def _figure(svg: str, caption: str) -> str:
    return f'<figure class="specatlas-chart">{svg}<figcaption>{escape(caption)}</figcaption></figure>'


def _ticks(low: float, high: float, count: int = 5) -> list[float]:
    step = (high - low) / count
    magnitude = 10 ** math.floor(math.log10(step))
    step = min((m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= step), default=step)
    first = math.ceil(low / step) * step
    return [round(first + i * step, 10) for i in range(int((high - first) / step + 1e-9) + 1)]


def speedup_bars(rows: list[tuple[str, float]], caption: str) -> str:
    """Horizontal bars, one per (label, speedup), with the baseline's 1x marked."""
    label_width, bar_left, row_height = 230, 240, 22
    top = max([1.0, *(value for _, value in rows)]) * 1.1
    plot = WIDTH - bar_left - 50
    height = row_height * len(rows) + 30

    def x(value: float) -> float:
        return bar_left + plot * value / top

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" '
             f'height="{height}" role="img" aria-label="{escape(caption)}" {FONT}>']
    for i, (label, value) in enumerate(rows):
        y = 8 + i * row_height
        color = "#4caf50" if value >= 1 else "#e57373"
        parts.append(f'<text x="{label_width}" y="{y + 14}" text-anchor="end">{escape(label)}</text>'
                     f'<rect x="{bar_left}" y="{y + 2}" width="{x(value) - bar_left:.1f}" height="{row_height - 6}" fill="{color}"/>'
                     f'<text x="{x(value) + 4:.1f}" y="{y + 14}">{value:.2f}×</text>')
    bottom = 8 + len(rows) * row_height
    parts.append(f'<line x1="{x(1):.1f}" y1="4" x2="{x(1):.1f}" y2="{bottom}" stroke="#333" stroke-dasharray="4 3"/>'
                 f'<text x="{x(1):.1f}" y="{bottom + 14}" text-anchor="middle">1× (baseline)</text></svg>')
    return _figure("".join(parts), caption)


def accepted_vs_speedup(points: list[tuple[str, float, float]], caption: str) -> str:
    """Scatter of (label, mean accepted tokens, speedup): how much of the acceptance survives as speed."""
    left, right, top_pad, bottom_pad, height = 60, 170, 20, 45, 320
    xs = [p[1] for p in points] + [1.0]
    ys = [p[2] for p in points] + [1.0]
    x_low, x_high = min(xs) * 0.95, max(xs) * 1.05 + 0.05
    y_low, y_high = min(ys) * 0.9, max(ys) * 1.1 + 0.05
    plot_w, plot_h = WIDTH - left - right, height - top_pad - bottom_pad

    def px(value: float) -> float:
        return left + plot_w * (value - x_low) / (x_high - x_low)

    def py(value: float) -> float:
        return top_pad + plot_h * (1 - (value - y_low) / (y_high - y_low))

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" '
             f'height="{height}" role="img" aria-label="{escape(caption)}" {FONT}>',
             f'<rect x="{left}" y="{top_pad}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#999"/>']
    for tick in _ticks(x_low, x_high):
        parts.append(f'<text x="{px(tick):.1f}" y="{top_pad + plot_h + 16}" text-anchor="middle">{tick:g}</text>')
    for tick in _ticks(y_low, y_high):
        parts.append(f'<text x="{left - 6}" y="{py(tick) + 4:.1f}" text-anchor="end">{tick:g}×</text>')
    parts.append(f'<line x1="{left}" y1="{py(1):.1f}" x2="{left + plot_w}" y2="{py(1):.1f}" stroke="#333" stroke-dasharray="4 3"/>'
                 f'<text x="{left + plot_w / 2}" y="{height - 8}" text-anchor="middle">mean accepted tokens per target forward</text>'
                 f'<text x="14" y="{top_pad + plot_h / 2}" text-anchor="middle" transform="rotate(-90 14 {top_pad + plot_h / 2})">speedup</text>')
    for i, (label, accepted, speedup) in enumerate(sorted(points, key=lambda p: (p[1], p[2]))):
        x, y = px(accepted), py(speedup)
        parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" fill="#3f51b5"><title>{escape(label)}: '
                     f'{accepted:.2f} accepted, {speedup:.2f}×</title></circle>'
                     f'<text x="{x + 6:.1f}" y="{y - 4 - 10 * (i % 2):.1f}">{escape(label)}</text>')
    parts.append("</svg>")
    return _figure("".join(parts), caption)
