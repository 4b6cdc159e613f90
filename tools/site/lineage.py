"""The lineage diagrams, laid out at build time as inline SVG (no graph library in the browser):
one diagram per connected family of the `builds_on` graph, methods in columns by generation
(longest chain of ancestors within the family), ordered in each column to keep edges short
(barycentre sweeps, as in Sugiyama-style layered drawing). Every node links to its paper page.
"""

from __future__ import annotations

from collections import defaultdict

from specatlas.catalog.schema import Paper
from specatlas.escaping import attr
from specatlas.site.catalog import Catalog, chronological, posted

COLUMN, ROW, BOX_W, BOX_H, PAD = 200, 56, 170, 46, 10
LINE_CHARS, LINES, LINE_H = 26, 3, 13  # a box's label: up to 3 lines of about 26 characters
SWEEPS = 6
# A paper page's neighbourhood: two boxes a row, at most this many of each kind drawn.
HOOD_W, HOOD_COLUMNS, HOOD_GAP = 360, 2, 12
HOOD_MAX = {"parents": 6, "siblings": 5, "children": 8}


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


def name(paper: Paper) -> str:
    """The method's name as a reader knows it: the title's head before a colon (Medusa, EAGLE-2),
    else the whole title; never the record id."""
    head, colon, _ = paper.title.partition(":")
    return head.strip() if colon and len(head.strip()) <= 60 else paper.title


def label(paper: Paper) -> str:
    return f"{name(paper)} ({posted(paper)[0]})"


def wrap(text: str, width: int = LINE_CHARS, lines: int = LINES) -> list[str]:
    """`text` in at most `lines` lines of about `width` characters, broken between words (a word
    longer than a line is cut); an ellipsis ends the last line only when the text does not fit."""
    out: list[str] = []
    for word in text.split():
        while len(word) > width:
            out, word = out + [word[: width - 1] + "-"], word[width - 1:]
        if out and len(out[-1]) + 1 + len(word) <= width:
            out[-1] += " " + word
        else:
            out.append(word)
    if len(out) > lines:
        out = out[:lines]
        out[-1] = (out[-1] if len(out[-1]) < width else out[-1][: width - 1]) + "…"
    return out


def _text(x: float, y: float, lines: list[str]) -> str:
    """Centred lines around y (escaped)."""
    top = y - (len(lines) - 1) * LINE_H / 2 + 4
    spans = "".join(f'<tspan x="{x:g}" y="{top + k * LINE_H:g}">{attr(line)}</tspan>' for k, line in enumerate(lines))
    return f'<text text-anchor="middle">{spans}</text>'


def _node(paper: Paper, href: str, x: float, y: float, w: float, h: float, css: str = "sa-node") -> str:
    return (f'<a href="{attr(href)}" class="{css}" data-id="{attr(paper.id)}"><title>{attr(paper.title)}</title>'
            f'<rect x="{x:g}" y="{y:g}" width="{w:g}" height="{h:g}" rx="5"/>{_text(x + w / 2, y + h / 2, wrap(label(paper)))}</a>')


def _edge(up: str, down: str, d: str, css: str = "sa-edge") -> str:
    return f'<path d="{d}" class="{css}" data-from="{attr(up)}" data-to="{attr(down)}"/>'


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
                edges.append(_edge(up, i, f"M{x1} {y1}C{x1 + bend} {y1} {x2 - bend} {y2} {x2} {y2}"))
        nodes.append(_node(catalog.by_id[i], href.format(i), x, y, BOX_W, BOX_H))
    root = catalog.by_id[members[0]]
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
            f'role="img" aria-label="Lineage of {attr(root.title)}" class="sa-lineage-svg">'
            + "".join(edges) + "".join(nodes) + "</svg>")


def family(catalog: Catalog, paper: Paper) -> list[str]:
    """The paper's drafting family as a path of at most two nodes, from the top: its first drafting
    tag's top-level node and the node just below it on the way to the tag ([] without a tag)."""
    facet = catalog.taxonomy.facets.get("drafting")
    first = next(iter(catalog.tags(paper, "drafting")), None)
    if facet is None or first not in facet.nodes:
        return []
    return list(reversed([first, *facet.ancestors(first)]))[:2]


def families(catalog: Catalog) -> list[tuple[list[str], list[str]]]:
    """The papers with a lineage edge grouped by drafting family (`family`), largest first, each
    chronological."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for members in components(catalog):
        for paper_id in members:
            groups.setdefault(tuple(family(catalog, catalog.by_id[paper_id])), []).append(paper_id)
    ordered = sorted(groups.items(), key=lambda item: (-len(item[1]), not item[0], item[0]))
    return [(list(path), sorted(members, key=lambda i: chronological(catalog.by_id[i]))) for path, members in ordered]


# One paper's neighbourhood --------------------------------------------------------------------

def neighbourhood(catalog: Catalog, paper: Paper) -> dict[str, list[Paper]]:
    """The paper's parents (what it builds on), children (what builds on it) and siblings (other
    papers building on one of its parents and not on the paper itself, those sharing more parents
    first), newest first except parents (oldest first)."""
    parents = sorted((catalog.by_id[i] for i in paper.builds_on if i in catalog.by_id), key=chronological)
    children = sorted((catalog.by_id[i] for i in catalog.built_upon_by.get(paper.id, []) if i in catalog.by_id),
                      key=chronological, reverse=True)
    shared: dict[str, int] = defaultdict(int)
    below = {child.id for child in children}
    for parent in parents:
        for sibling in catalog.built_upon_by.get(parent.id, []):
            if sibling != paper.id and sibling not in below and sibling in catalog.by_id:
                shared[sibling] += 1
    siblings = sorted((catalog.by_id[i] for i in shared), key=lambda p: chronological(p), reverse=True)
    siblings.sort(key=lambda p: -shared[p.id])  # stable: newest first among equals
    return {"parents": parents, "siblings": siblings, "children": children}


def _hood_document(height: float, elements: list[str]) -> str:
    """The neighbourhood graph's <svg>: its edges first, so the boxes are drawn over them."""
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {HOOD_W} {height:g}" '
            'role="img" aria-label="Lineage neighbourhood: what this paper builds on, and what builds on it" '
            'class="sa-lineage-svg sa-hood-svg">' + "".join(elements) + "</svg>")


def neighbourhood_svg(catalog: Catalog, paper: Paper, href: str, hood: dict[str, list[Paper]] | None = None) -> str | None:
    """A small top-to-bottom graph that reads at phone width: the papers it builds on (two boxes a
    row), the paper across the width, the papers building on it (two a row), then its siblings
    (dashed, no edges: the caption says what they share). Edges run along a spine between the two
    columns, so none crosses a box. None when the paper has no parent and no child in the catalog.
    `hood`: `neighbourhood`'s answer, when the caller has it."""
    hood = hood or neighbourhood(catalog, paper)
    if not hood["parents"] and not hood["children"]:
        return None
    box_w = (HOOD_W - 2 * PAD - HOOD_GAP) / 2
    spine = PAD + box_w + HOOD_GAP / 2
    row_h, caption = BOX_H + HOOD_GAP, 16
    parts, edges, y = [], [], PAD
    shown = {kind: hood[kind][: HOOD_MAX[kind]] for kind in HOOD_MAX}

    def title(text: str, kind: str) -> None:
        nonlocal y
        total, drawn = len(hood[kind]), len(shown[kind])
        more = f" (the first {drawn} of {total})" if total > drawn else ""
        parts.append(f'<text x="{PAD}" y="{y + 11:g}" class="sa-hood-caption">{attr(text + more)}</text>')
        y += caption

    def grid(papers: list[Paper], css: str) -> dict[str, tuple[float, float, bool]]:
        """Two a row; paper id -> (x of the side facing the spine, y of its middle, on the left?)."""
        nonlocal y
        places = {}
        for k, member in enumerate(papers):
            left = k % 2 == 0
            x, top = PAD + (0 if left else box_w + HOOD_GAP), y + (k // 2) * row_h
            parts.append(_node(member, href.format(member.id), x, top, box_w, BOX_H, css))
            places[member.id] = (x + box_w if left else x, top + BOX_H / 2, left)
        y += -(-len(papers) // 2) * row_h
        return places

    def stub(up: str, down: str, from_y: float, place: tuple[float, float, bool]) -> None:
        x, middle, _ = place
        edges.append(_edge(up, down, f"M{spine:g} {from_y:g}V{middle:g}H{x:g}"))

    above = {}
    if shown["parents"]:
        title("Builds on", "parents")
        above = grid(shown["parents"], "sa-node")
    self_top = y
    parts.append(_node(paper, "#", PAD, y, HOOD_W - 2 * PAD, BOX_H, "sa-node sa-self"))
    y += row_h
    for parent_id, place in above.items():
        stub(parent_id, paper.id, self_top, place)
    if shown["children"]:
        title("Built upon by", "children")
        for child_id, place in grid(shown["children"], "sa-node").items():
            stub(paper.id, child_id, self_top + BOX_H, place)
    if shown["siblings"]:
        y += HOOD_GAP / 2
        title("Siblings: also building on " + " or ".join(name(p) for p in hood["parents"][:3])
              + (" …" if len(hood["parents"]) > 3 else ""), "siblings")
        grid(shown["siblings"], "sa-node sa-sibling")
    return _hood_document(y - HOOD_GAP + PAD, edges + parts)
