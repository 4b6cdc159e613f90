"""The timeline figure: papers per quarter, stacked by drafting family, as an inline SVG."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date

import yaml

from specatlas.catalog.capture_recapture import SWEEPS, estimate, latest_round, read_sweep
from specatlas.escaping import attr
from specatlas.site.catalog import Catalog, posted

# The sweeps' record of how completely each posted month was searched (see the file's header).
COVERAGE_FILE = "tools/catalog/sweep/coverage.yaml"
CANDIDATES_FILE = "tools/catalog/sweep/candidates.yaml"
STATUSES = {"complete": "complete", "searched": "searched", "thin": "thin", None: "not swept yet"}
_MONTH = re.compile(r"^(\d{4})-(0[1-9]|1[0-2])$")
_ARXIV = re.compile(r"^(\d{2})(\d{2})\.\d{4,5}$")

# Colour-blind-safe (Okabe-Ito); the last colour is for papers without a drafting tag.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#999999")
NO_FAMILY = "No drafting tag"
BAR, GAP, LEFT, TOP, PLOT_H, LEGEND_ROW = 18, 6, 40, 14, 220, 18


@dataclass
class Period:
    """Posted months first..last (inclusive, (year, month)), how completely they were swept."""

    first: tuple[int, int]
    last: tuple[int, int]
    status: str | None  # a key of STATUSES; None: after the last swept period (how: the sweep's own notes, not shown)
    papers: int = 0  # records posted in the period
    candidates: int = 0  # papers seen in it but not yet records (candidates.yaml)

    @property
    def label(self) -> str:
        first, last = (f"{y}-{m:02d}" for y, m in (self.first, self.last))
        if self.status is None:
            return f"{first} onward"
        return first if first == last else f"{first} to {last}"


@dataclass
class Coverage:
    swept: str | None  # the date of the last sweep
    periods: list[Period] = field(default_factory=list)

    def status(self, year: int, month: int) -> str | None:
        """The status of a posted month; None when no period holds it (not swept yet)."""
        for period in self.periods:
            if period.first <= (year, month) <= period.last:
                return period.status
        return None


@dataclass
class Figure:
    families: list[str]  # legend order
    rows: list[tuple[str, list[int]]]  # ("2024 Q1", count per family), every quarter in range
    svg: str
    coverage: Coverage | None = None  # None: the catalog has no sweep record
    row_status: list[str] = field(default_factory=list)  # per row: how completely its months were swept


def _month(value: object, where: str) -> tuple[int, int]:
    match = _MONTH.match(str(value))
    if not match:
        raise ValueError(f"{COVERAGE_FILE}: {where}: {value!r} is not a month (YYYY-MM)")
    return int(match.group(1)), int(match.group(2))


def coverage(catalog: Catalog) -> Coverage | None:
    """The sweep record (COVERAGE_FILE) with each period's paper and candidate counts, or None
    when the catalog has none. A malformed record fails the build: the page would mislead."""
    path = catalog.root / COVERAGE_FILE
    if not path.is_file():
        return None
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if not isinstance(data, dict) or not isinstance(data.get("periods"), list):
        raise ValueError(f"{COVERAGE_FILE}: expected a mapping with a list of periods")
    swept = data.get("swept")
    periods = []
    for i, item in enumerate(data["periods"]):
        if not isinstance(item, dict) or item.get("status") not in STATUSES or item.get("status") is None:
            raise ValueError(f"{COVERAGE_FILE}: period {i + 1}: needs from, to, how and a status of "
                             f"{', '.join(k for k in STATUSES if k)}")
        first, last = _month(item.get("from"), f"period {i + 1}"), _month(item.get("to"), f"period {i + 1}")
        if last < first or (periods and first <= periods[-1].last):
            raise ValueError(f"{COVERAGE_FILE}: period {i + 1}: periods must run forward without overlap")
        periods.append(Period(first, last, item["status"]))
    result = Coverage(str(swept) if isinstance(swept, (str, date)) else None, periods)
    if periods:  # the months after the last period, to the newest posted record or candidate
        after = (periods[-1].last[0] + (periods[-1].last[1] == 12), periods[-1].last[1] % 12 + 1)
        result.periods.append(Period(after, after, None))
    seen = [posted(p) for p in catalog.papers] + [(y, m) for y, m in _candidate_months(catalog)]
    for year, month in seen:
        for period in result.periods:
            if period.status is None and (year, month or 1) >= period.first:
                period.last = max(period.last, (year, month or 1))
    for paper in catalog.papers:
        year, month = posted(paper)
        for period in result.periods:
            if period.first <= (year, month or 1) <= period.last:
                period.papers += 1
    for year, month in _candidate_months(catalog):
        for period in result.periods:
            if period.first <= (year, month) <= period.last:
                period.candidates += 1
    return result


def _candidate_months(catalog: Catalog) -> list[tuple[int, int]]:
    """Posted months (from the arXiv id) of the papers the sweeps saw but could not yet confirm."""
    path = catalog.root / CANDIDATES_FILE
    if not path.is_file():
        return []
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    items = (data.get("candidates") or []) if isinstance(data, dict) else []
    out = []
    for item in items:
        match = _ARXIV.match(str(item.get("arxiv") or "")) if isinstance(item, dict) else None
        if match and 1 <= int(match.group(2)) <= 12:
            out.append((2000 + int(match.group(1)), int(match.group(2))))
    return out


def _quarter_status(record: Coverage | None, year: int, quarter: int) -> str:
    """How completely a quarter's months were swept: the weakest of its months."""
    if record is None:
        return ""
    order = ["complete", "searched", "thin", None]
    worst = max((record.status(year, m) for m in range(3 * quarter - 2, 3 * quarter + 1)), key=order.index)
    return STATUSES[worst]


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
    record = coverage(catalog)
    row_status = [_quarter_status(record, y, q) for y, q in quarters]
    return Figure(families, rows, _svg(families, rows, row_status), record, row_status)


def _quarter_range(first: tuple[int, int], last: tuple[int, int]) -> list[tuple[int, int]]:
    out, (year, quarter) = [], first
    while (year, quarter) <= last:
        out.append((year, quarter))
        year, quarter = (year + 1, 1) if quarter == 4 else (year, quarter + 1)
    return out


def _svg(families: list[str], rows: list[tuple[str, list[int]]], row_status: list[str] | None = None) -> str:
    """`row_status`: per quarter, how completely it was swept; a quarter that is not complete is
    marked above its bar (a thin quarter is not a quiet one)."""
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
        status = row_status[i] if row_status else ""
        if status in (STATUSES["thin"], STATUSES[None]):
            parts.append(f'<text x="{x + BAR / 2}" y="{y - 3:.1f}" text-anchor="middle" class="sa-thin">?'
                         f'<title>{attr(label)}: coverage {attr(status)}</title></text>')
        if label.endswith("Q1") or (i == 0 and label[-1] in "12"):  # no clash with the next Q1
            parts.append(f'<text x="{x}" y="{base + 16}">{attr(label[:4])}</text>')
    for k, (family, colour) in enumerate(zip(families, colours)):
        lx, ly = LEFT + (k % 3) * 200, legend_y + (k // 3) * LEGEND_ROW
        parts.append(f'<rect x="{lx}" y="{ly - 10}" width="12" height="12" fill="{colour}"/>'
                     f'<text x="{lx + 18}" y="{ly}">{attr(family)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def measured_recall(catalog: Catalog) -> dict | None:
    """The catalog's recall per quarter from the newest round of committed capture-recapture sweeps
    (`catalog.capture_recapture`); None when the repository holds no pair of sweeps."""
    folder = latest_round(catalog.root / SWEEPS.relative_to(SWEEPS.parents[2]))
    sweeps = sorted(folder.glob("sweep-*.yaml")) if folder else []
    if len(sweeps) != 2:
        return None
    return estimate(catalog.papers, [read_sweep(path) for path in sweeps]) | {"round": folder.name}
