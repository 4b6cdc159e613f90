"""The timeline figure: papers per quarter, stacked by drafting family, as an inline SVG."""

from __future__ import annotations

from dataclasses import dataclass

from specatlas.site.catalog import Catalog, posted
from specatlas.site.text import attr

# Colour-blind-safe (Okabe-Ito); the last colour is for papers without a drafting tag.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#999999")
NO_FAMILY = "No drafting tag"
BAR, GAP, LEFT, TOP, PLOT_H, LEGEND_ROW = 18, 6, 40, 14, 220, 18


@dataclass
class Figure:
    families: list[str]  # legend order
    rows: list[tuple[str, list[int]]]  # ("2024 Q1", count per family), every quarter in range
    svg: str


def build(catalog: Catalog) -> Figure:
    drafting = catalog.taxonomy.facets.get("drafting")
    roots = drafting.children(None) if drafting else []
    families = [n.name for n in roots] + [NO_FAMILY]
    column = {n.id: i for i, n in enumerate(roots)}
    counts: dict[tuple[int, int], list[int]] = {}
    for paper in catalog.papers:
        year, month = posted(paper)
        quarter = (year, ((month or 1) - 1) // 3 + 1)
        family = catalog.family(paper)
        counts.setdefault(quarter, [0] * len(families))[column.get(family, len(families) - 1)] += 1
    quarters = _quarter_range(min(counts), max(counts)) if counts else []
    rows = [(f"{y} Q{q}", counts.get((y, q), [0] * len(families))) for y, q in quarters]
    return Figure(families, rows, _svg(families, rows))


def _quarter_range(first: tuple[int, int], last: tuple[int, int]) -> list[tuple[int, int]]:
    out, (year, quarter) = [], first
    while (year, quarter) <= last:
        out.append((year, quarter))
        year, quarter = (year + 1, 1) if quarter == 4 else (year, quarter + 1)
    return out


def _svg(families: list[str], rows: list[tuple[str, list[int]]]) -> str:
    peak = max((sum(c) for _, c in rows), default=0) or 1
    step = 10 ** max(0, len(str(peak)) - 1)
    tick = step if peak / step >= 4 else max(1, step // 2)
    scale = PLOT_H / peak
    width = LEFT + len(rows) * (BAR + GAP) + GAP
    legend_y = TOP + PLOT_H + 40
    height = legend_y + LEGEND_ROW * ((len(families) + 2) // 3)
    base = TOP + PLOT_H
    colours = [PALETTE[i % (len(PALETTE) - 1)] for i in range(len(families) - 1)] + [PALETTE[-1]]
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {max(width, 480)} {height}" '
             f'role="img" aria-label="Papers per quarter by drafting family" class="sa-timeline-svg">']
    for value in range(0, peak + 1, tick):
        y = base - value * scale
        parts.append(f'<line x1="{LEFT - 4}" x2="{width}" y1="{y:.1f}" y2="{y:.1f}" class="sa-grid"/>'
                     f'<text x="{LEFT - 8}" y="{y + 4:.1f}" text-anchor="end">{value}</text>')
    for i, (label, counts) in enumerate(rows):
        x = LEFT + GAP + i * (BAR + GAP)
        y = base
        for family, count, colour in zip(families, counts, colours):
            if not count:
                continue
            h = count * scale
            y -= h
            parts.append(f'<rect x="{x}" y="{y:.1f}" width="{BAR}" height="{h:.1f}" fill="{colour}">'
                         f'<title>{attr(label)}, {attr(family)}: {count}</title></rect>')
        if label.endswith("Q1") or (i == 0 and label[-1] in "12"):  # no clash with the next Q1
            parts.append(f'<text x="{x}" y="{base + 16}">{attr(label[:4])}</text>')
    for k, (family, colour) in enumerate(zip(families, colours)):
        lx, ly = LEFT + (k % 3) * 200, legend_y + (k // 3) * LEGEND_ROW
        parts.append(f'<rect x="{lx}" y="{ly - 10}" width="12" height="12" fill="{colour}"/>'
                     f'<text x="{lx + 18}" y="{ly}">{attr(family)}</text>')
    parts.append("</svg>")
    return "".join(parts)
