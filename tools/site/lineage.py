"""The lineage diagrams, laid out at build time as inline SVG (no graph library in the browser):
one diagram per connected family of the `builds_on` graph, methods in columns by generation
(longest chain of ancestors within the family), ordered in each column to keep edges short
(barycentre sweeps, as in Sugiyama-style layered drawing). Every node links to its paper page.
"""

from __future__ import annotations

from collections import defaultdict

from specatlas.catalog.schema import Paper
from specatlas.site.catalog import Catalog, chronological, posted, short_name
from specatlas.site.text import attr

COLUMN, ROW, BOX_W, BOX_H, PAD = 190, 34, 160, 24, 10
LABEL_CHARS = 24
SWEEPS = 6


def components(catalog: Catalog) -> list[list[str]]:
    """Weakly connected components of the builds_on graph, singletons left out, largest first;
    each in chronological order."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for paper in catalog.papers:
        for up in paper.builds_on:
            if up in catalog.by_id:
                parent[find(paper.id)] = find(up)
    groups: dict[str, set[str]] = {}
    for node in list(parent):
        groups.setdefault(find(node), set()).add(node)
    ordered = sorted(groups.values(), key=lambda g: (-len(g), min(g)))
    return [sorted(g, key=lambda i: chronological(catalog.by_id[i])) for g in ordered]


def label(paper: Paper) -> str:
    text = f"{short_name(paper)} ({posted(paper)[0]})"
    return text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 1] + "…"


def layout(catalog: Catalog, members: list[str]) -> dict[str, tuple[int, int]]:
    """paper id -> (column, row)."""
    inside = set(members)
    parents = {i: [p for p in catalog.by_id[i].builds_on if p in inside] for i in members}
    children: dict[str, list[str]] = defaultdict(list)
    for child, ups in parents.items():
        for up in ups:
            children[up].append(child)
    # Generation: longest chain of ancestors. Members are chronological, and a record builds on
    # earlier work, so one pass in that order almost always settles it; a few more passes cover
    # a parent posted later than its child, and the bound stops a (malformed) cycle.
    column = dict.fromkeys(members, 0)
    for _ in range(len(members)):
        changed = False
        for i in members:
            want = max((column[p] + 1 for p in parents[i]), default=0)
            if want != column[i] and want < len(members):
                column[i], changed = want, True
        if not changed:
            break
    layers: dict[int, list[str]] = defaultdict(list)
    for i in members:
        layers[column[i]].append(i)
    position = {i: k for layer in layers.values() for k, i in enumerate(layer)}
    for sweep in range(SWEEPS):
        forward = sweep % 2 == 0
        for c in sorted(layers) if forward else sorted(layers, reverse=True):
            neighbours = parents if forward else children

            def centre(i: str) -> float:
                near = neighbours.get(i, [])
                return sum(position[n] for n in near) / len(near) if near else position[i]

            layers[c].sort(key=centre)
            position.update({i: k for k, i in enumerate(layers[c])})
    return {i: (column[i], position[i]) for i in members}


def svg(catalog: Catalog, members: list[str], href: str) -> str:
    """The family as an SVG whose nodes link to `href.format(paper id)`."""
    places = layout(catalog, members)
    columns = max(c for c, _ in places.values()) + 1
    rows = max(r for _, r in places.values()) + 1
    width, height = PAD * 2 + (columns - 1) * COLUMN + BOX_W, PAD * 2 + (rows - 1) * ROW + BOX_H

    def xy(i: str) -> tuple[int, int]:
        c, r = places[i]
        return PAD + c * COLUMN, PAD + r * ROW

    edges, nodes = [], []
    for i in members:
        x, y = xy(i)
        for up in catalog.by_id[i].builds_on:
            if up in places:
                ux, uy = xy(up)
                x1, y1, x2, y2 = ux + BOX_W, uy + BOX_H / 2, x, y + BOX_H / 2
                bend = max(30, (x2 - x1) / 2)
                edges.append(f'<path d="M{x1} {y1}C{x1 + bend} {y1} {x2 - bend} {y2} {x2} {y2}" class="sa-edge"/>')
        paper = catalog.by_id[i]
        nodes.append(f'<a href="{attr(href.format(i))}" class="sa-node"><title>{attr(paper.title)}</title>'
                     f'<rect x="{x}" y="{y}" width="{BOX_W}" height="{BOX_H}" rx="5"/>'
                     f'<text x="{x + BOX_W / 2}" y="{y + BOX_H / 2 + 4}" text-anchor="middle">{attr(label(paper))}</text></a>')
    root = catalog.by_id[members[0]]
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
            f'role="img" aria-label="Lineage of {attr(root.title)}" class="sa-lineage-svg">'
            + "".join(edges) + "".join(nodes) + "</svg>")
