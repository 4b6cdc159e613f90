"""Markdown for every page that is derived from the catalog.

`generate(catalog)` returns {path under docs/: content}: the Markdown pages plus papers.bib. It is
a pure function of the catalog, linear in its size, and all record text goes through
`specatlas.site.text` escaping. Links between pages are relative links to .md files, so MkDocs
checks every one of them.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

from specatlas import bib
from specatlas.catalog.schema import ID_PATTERN, Paper
from specatlas.catalog.taxonomy import FACETS, Node
from specatlas.catalog.venues import VENUES
from specatlas.site import timeline
from specatlas.site.catalog import Catalog, posted
from specatlas.site.text import attr, code_fence, md, md_link, md_prose, script_json

_ID = re.compile(ID_PATTERN)
_NODE_ID = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
_MERMAID_LABEL_DROP = re.compile(r"[^A-Za-z0-9 .+\-()]")

METRIC_UNITS = {"speedup": "×", "throughput-gain": "×"}
LOSSLESS_TEXT = {
    True: "Lossless: the output distribution is exactly the target model's",
    False: "Lossy: relaxed acceptance or an approximation changes the output distribution",
    None: "Not a decoding method (survey, benchmark or analysis)",
}
RUN_PROMPT = "Explain speculative decoding in two sentences."


def generate(catalog: Catalog, *, directory_urls: bool = True) -> dict[str, str]:
    for paper in catalog.papers:  # ids and node ids become file names
        if not _ID.fullmatch(paper.id):
            raise ValueError(f"paper id {paper.id!r} cannot name a page")
    for node in catalog.taxonomy.all_nodes():
        if not _NODE_ID.fullmatch(node.id) or node.id == "index":
            raise ValueError(f"taxonomy node id {node.id!r} cannot name a page")
    pages = {
        "index.md": home(catalog),
        "catalog.md": catalog_page(catalog, directory_urls),
        "taxonomy/index.md": taxonomy_index(catalog),
        "timeline.md": timeline_page(catalog),
        "lineage.md": lineage_page(catalog, directory_urls),
        "leaderboard.md": leaderboard_page(catalog),
        "contributing.md": contributing_page(catalog),
        "papers.bib": bib.render(catalog.papers),
    }
    entries = bib_entries(pages["papers.bib"])
    for paper in catalog.papers:
        pages[f"papers/{paper.id}.md"] = paper_page(catalog, paper, entries[paper.id])
    for node in catalog.taxonomy.all_nodes():
        pages[f"taxonomy/{node.id}.md"] = node_page(catalog, node)
    return pages


def allowed_tags(catalog: Catalog) -> list[str]:
    """Material tags allowed on pages: one per taxonomy node, its name."""
    return sorted({node.name for node in catalog.taxonomy.all_nodes()})


def bib_entries(bibtex: str) -> dict[str, str]:
    """id -> that paper's entry, cut from the whole file (one bibtexparser pass, not one per paper)."""
    chunks = re.split(r"\n(?=@)", bibtex.strip())
    return {re.match(r"@\w+\{([^,]*),", chunk).group(1): chunk.strip() for chunk in chunks}


# Shared pieces -------------------------------------------------------------------------------

def _paper_link(paper: Paper, prefix: str) -> str:
    return f"[{md(paper.title)}]({prefix}{paper.id}.md)"


def _node_link(node: Node, prefix: str) -> str:
    return f"[{md(node.name)}]({prefix}{node.id}.md)"


def _venue(paper: Paper) -> str:
    return paper.venue if paper.venue in VENUES else "?"


def _when(paper: Paper) -> str:
    year, month = posted(paper)
    return f"{year}-{month:02d}" if month else str(year)


def _chronological(paper: Paper) -> tuple[int, int, str]:
    year, month = posted(paper)
    return year, month or 0, paper.id


def _newest_first(papers: Iterable[Paper]) -> list[Paper]:
    return sorted(papers, key=_chronological, reverse=True)


def _paper_table(papers: list[Paper], prefix: str) -> str:
    rows = ["| Paper | Posted | Venue | Lossless |", "|---|---|---|---|"]
    for paper in papers:
        lossless = {True: "yes", False: "no", None: "–"}[paper.lossless]
        rows.append(f"| {_paper_link(paper, prefix)} | {_when(paper)} | {md(_venue(paper))} | {lossless} |")
    return "\n".join(rows)


def _front_matter(title: str, tags: list[str] | None = None, *, wide: bool = False) -> str:
    # Values are quoted YAML strings; the title is HTML-escaped because themes print it raw.
    lines = ["---", f"title: {_yaml_str(attr(title))}"]
    if wide:  # tables and figures get the whole width
        lines += ["hide:", "  - navigation", "  - toc"]
    if tags:
        lines.append("tags:")
        lines.extend(f"  - {_yaml_str(t)}" for t in tags)
    return "\n".join([*lines, "---", ""])


def _yaml_str(text: str) -> str:
    return '"' + " ".join(text.split()).replace("\\", "\\\\").replace('"', '\\"') + '"'


# Home ----------------------------------------------------------------------------------------

def home(catalog: Catalog) -> str:
    papers = catalog.papers
    years = Counter(posted(p)[0] for p in papers)
    used_nodes = sum(1 for ids in catalog.node_papers.values() if ids)
    glance = [
        "| In the catalog | |", "|---|---|",
        f"| Papers, posts and releases | **{len(papers)}** |",
        f"| Lossless methods | {sum(p.lossless is True for p in papers)} |",
        f"| Lossy (relaxed) methods | {sum(p.lossless is False for p in papers)} |",
        f"| With official code | {sum(bool(p.code) for p in papers)} |",
        f"| Runnable here (reference implementations) | {len(catalog.implemented)} |",
        f"| Venues | {len({p.venue for p in papers})} |",
        f"| Taxonomy nodes in use | {used_nodes} of {len(catalog.taxonomy.all_nodes())} |",
    ]
    if years:
        glance.append(f"| Years covered | {min(years)}–{max(years)} |")
    per_year = ["| Year | Papers |", "|---|---|"] + [f"| {y} | {n} |" for y, n in sorted(years.items(), reverse=True)]
    families = []
    drafting = catalog.taxonomy.facets.get("drafting")
    for node in drafting.children(None) if drafting else []:
        families.append(f"- {_node_link(node, 'taxonomy/')}: {len(catalog.node_papers.get(node.id, []))} papers")
    implemented = [catalog.by_id[i] for i in sorted(catalog.implemented)]
    runnable = "\n".join(f"- {_paper_link(p, 'papers/')}: `specatlas run {p.id}`" for p in implemented)
    example = implemented[0].id if implemented else "leviathan2023fast"
    return "\n".join([
        _front_matter("SpecAtlas"),
        "# SpecAtlas",
        "",
        "**Speculative decoding** makes a large language model generate several tokens per forward "
        "pass without changing what it writes. A cheap *drafter* (a small model, extra heads on the "
        "target, or plain text lookup) guesses the next few tokens; the large *target* model scores "
        "all the guesses in one parallel pass and keeps the longest prefix it agrees with, plus one "
        "token of its own. Because decoding is limited by memory bandwidth rather than arithmetic, "
        "checking several tokens costs about as much as generating one, so every accepted guess is "
        "time saved. With the right acceptance rule the output distribution is exactly the target's.",
        "",
        "SpecAtlas catalogs the papers on the survey taxonomy's axes (how drafts are made, how they "
        "are verified, how drafter and target are aligned), traces how methods build on each other, "
        "and runs reference implementations to measure how fast they really are.",
        "",
        "## At a glance",
        "",
        "\n".join(glance),
        "",
        "### Drafting families",
        "",
        "\n".join(families) or "No drafting taxonomy.",
        "",
        '??? note "Papers per year"',
        "",
        "\n".join("    " + line for line in per_year),
        "",
        "## Find papers",
        "",
        "- [Catalog](catalog.md): every paper in one table, filtered by taxonomy node, year, venue, "
        "lossless, code and implementation, sorted by any column.",
        "- [Taxonomy](taxonomy/index.md): each axis as a tree with counts, one page per node.",
        "- [Timeline](timeline.md): papers per quarter by drafting family.",
        "- [Lineage](lineage.md): which methods build on which.",
        "- [Leaderboard](leaderboard.md): speedups measured by `specatlas bench`.",
        "- [papers.bib](papers.bib): BibTeX for the whole catalog, keyed by record id.",
        "",
        "## Run a method",
        "",
        "Reference implementations run on the embedded SmolLM2-135M model, on a CPU:",
        "",
        code_fence(f'make setup\n.venv/bin/specatlas run {example} --prompt "{RUN_PROMPT}"', "bash"),
        "",
        runnable or "No reference implementations are registered yet.",
        "",
    ])


# One page per paper --------------------------------------------------------------------------

def paper_page(catalog: Catalog, paper: Paper, bibtex: str) -> str:
    tag_names = []
    badge_lines = []
    for facet_id in FACETS:
        facet = catalog.taxonomy.facets.get(facet_id)
        nodes = [facet.nodes[t] for t in catalog.tags(paper, facet_id) if facet and t in facet.nodes]
        if nodes:
            tag_names.extend(n.name for n in nodes)
            badges = " ".join(f"{_node_link(n, '../taxonomy/')}{{ .sa-badge }}" for n in nodes)
            badge_lines.append(f"- **{md(facet.name)}:** {badges}")
    venue = VENUES.get(paper.venue)
    venue_text = md(venue.name if venue else paper.venue)
    if paper.venue_note:
        venue_text += f" ({md(paper.venue_note)})"
    facts = [
        f"- **Authors:** {md(', '.join(paper.authors))}",
        f"- **Published:** {paper.year}{f'-{paper.month:02d}' if paper.month else ''}, {venue_text}",
    ]
    if paper.kind != "paper":
        facts.append(f"- **Kind:** {md(paper.kind)}")
    facts.append(f"- **Links:** {' · '.join(_links(paper)) or '–'}")
    facts.extend(badge_lines)
    facts.append(f"- **Lossless:** {LOSSLESS_TEXT[paper.lossless]}")
    if paper.aliases:
        facts.append(f"- **Also known as:** {md(', '.join(paper.aliases))}")

    parents = [catalog.by_id[i] for i in paper.builds_on if i in catalog.by_id]
    children = [catalog.by_id[i] for i in catalog.built_upon_by.get(paper.id, [])]
    lineage = [
        "**Builds on:** " + (", ".join(_paper_link(p, "") for p in parents) or "nothing in the catalog"),
        "",
        "**Built upon by:** " + (", ".join(_paper_link(p, "") for p in _newest_first(children)) or "nothing in the catalog yet"),
    ]
    if paper.id in catalog.implemented:
        run = code_fence(f'specatlas run {paper.id} --prompt "{RUN_PROMPT}"', "bash")
    else:
        run = "No reference implementation yet: see [Contributing](../contributing.md)."
    return "\n".join([
        _front_matter(paper.title, sorted(set(tag_names))),
        f"# {md(paper.title)}",
        "",
        "\n".join(facts),
        "",
        "## Summary",
        "",
        md_prose(paper.summary),
        "",
        "## Lineage",
        "",
        "\n".join(lineage),
        "",
        "## Reported results",
        "",
        _results_table(paper),
        "",
        "## Run it",
        "",
        run,
        "",
        "## BibTeX",
        "",
        code_fence(bibtex, "bibtex"),
        "",
        "The whole catalog: [papers.bib](../papers.bib).",
        "",
    ])


def _links(paper: Paper) -> list[str]:
    links = []
    if paper.arxiv:
        links.append(md_link(f"arXiv:{paper.arxiv}", f"https://arxiv.org/abs/{paper.arxiv}"))
    if paper.url:
        links.append(md_link("Paper", paper.url))
    if paper.pdf:
        links.append(md_link("PDF", paper.pdf))
    if paper.doi:
        links.append(md_link(f"DOI {paper.doi}", f"https://doi.org/{paper.doi}"))
    links.extend(md_link("Code" if len(paper.code) == 1 else f"Code {i}", url) for i, url in enumerate(paper.code, 1))
    links.extend(md_link(name.capitalize(), url) for name, url in paper.links.items())
    return links


def _results_table(paper: Paper) -> str:
    if not paper.reported_results:
        return "The record lists no reported numbers."
    rows = [
        "Numbers as the paper reports them; see the [leaderboard](../leaderboard.md) for measured ones.",
        "",
        "| Metric | Value | Target | Drafter | Hardware | Benchmark | Temp. | Batch | Source |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in paper.reported_results:
        cells = [r.metric, f"{r.value:g}{METRIC_UNITS.get(r.metric, '')}", r.target_model, r.drafter or "–",
                 r.hardware or "–", r.benchmark, "–" if r.temperature is None else f"{r.temperature:g}",
                 "–" if r.batch_size is None else r.batch_size, r.source + (f" ({r.note})" if r.note else "")]
        rows.append("| " + " | ".join(md(c) for c in cells) + " |")
    return "\n".join(rows)


# Taxonomy ------------------------------------------------------------------------------------

def taxonomy_index(catalog: Catalog) -> str:
    out = [_front_matter("Taxonomy"), "# Taxonomy", "",
           "Every paper is tagged on the survey's three axes (drafting, verification, alignment) "
           "and by scope. Counts include the papers of all nodes below; a paper with several tags "
           "counts once per node.", ""]
    for facet_id in FACETS:
        facet = catalog.taxonomy.facets.get(facet_id)
        if facet is None:
            continue
        out += [f"## {md(facet.name)}", "", md(facet.description), ""]

        def tree(parent: str | None, depth: int) -> None:
            for node in facet.children(parent):
                count = len(catalog.node_papers.get(node.id, []))
                out.append(f"{'    ' * depth}- {_node_link(node, '')} ({count})")
                tree(node.id, depth + 1)

        tree(None, 0)
        out.append("")
    return "\n".join(out)


def node_page(catalog: Catalog, node: Node) -> str:
    facet = catalog.taxonomy.facets[node.facet]
    trail = ["[Taxonomy](index.md)", md(facet.name)]
    trail += [_node_link(facet.nodes[a], "") for a in reversed(facet.ancestors(node.id))]
    papers = [catalog.by_id[i] for i in catalog.node_papers.get(node.id, [])]
    children = facet.children(node.id)
    out = [_front_matter(node.name), f"# {md(node.name)}", "", " › ".join(trail), "", md(node.description), ""]
    if children:
        out += ["**Sub-nodes:** " + ", ".join(
            f"{_node_link(c, '')} ({len(catalog.node_papers.get(c.id, []))})" for c in children), ""]
    out += [f"## Papers ({len(papers)})", ""]
    if papers:
        out.append(_paper_table(_newest_first(papers), "../papers/"))
    else:
        out.append(f"No paper is tagged here yet{f' (kept because: {md(node.reserved)})' if node.reserved else ''}.")
    return "\n".join(out) + "\n"


# Catalog table -------------------------------------------------------------------------------

def catalog_page(catalog: Catalog, directory_urls: bool) -> str:
    href = "../papers/{}/" if directory_urls else "papers/{}.html"
    facets = []
    for facet_id in FACETS:
        facet = catalog.taxonomy.facets.get(facet_id)
        if facet is None:
            continue
        nodes = []

        def walk(parent: str | None, depth: int) -> None:
            for node in facet.children(parent):
                nodes.append({"id": node.id, "name": node.name, "depth": depth,
                              "count": len(catalog.node_papers.get(node.id, []))})
                walk(node.id, depth + 1)

        walk(None, 0)
        facets.append({"id": facet_id, "name": facet.name, "nodes": nodes})
    names = {n.id: n.name for n in catalog.taxonomy.all_nodes()}
    rows = []
    for paper in catalog.papers:
        year, month = posted(paper)
        rows.append({
            "id": paper.id,
            "href": href.format(paper.id),
            "title": paper.title,
            "year": paper.year,
            "posted": f"{year}-{month or 0:02d}",
            "venue": _venue(paper),
            "drafting": [names.get(t, t) for t in catalog.tags(paper, "drafting")],
            "verification": [names.get(t, t) for t in catalog.tags(paper, "verification")],
            "nodes": catalog.expanded_tags(paper),
            "lossless": paper.lossless,
            "code": bool(paper.code),
            "implemented": paper.id in catalog.implemented,
        })
    data = {"facets": facets, "papers": rows}
    return "\n".join([
        _front_matter("Catalog", wide=True),
        "# Catalog",
        "",
        f"All {len(rows)} records. Filter by taxonomy node (a node includes the nodes below it), "
        "year, venue, lossless, code and reference implementation; click a column header to sort. "
        "The whole catalog as BibTeX: [papers.bib](papers.bib).",
        "",
        '<div id="sa-catalog" class="sa-catalog"><noscript>The catalog table needs JavaScript; '
        "the taxonomy pages list the same papers.</noscript></div>",
        "",
        f'<script type="application/json" id="sa-catalog-data">{script_json(data)}</script>',
        "",
    ])


# Timeline ------------------------------------------------------------------------------------

def timeline_page(catalog: Catalog) -> str:
    figure = timeline.build(catalog)
    table = ["| Quarter | " + " | ".join(md(name) for name in figure.families) + " | Total |",
             "|---" * (len(figure.families) + 2) + "|"]
    for quarter, counts in figure.rows:
        table.append(f"| {quarter} | " + " | ".join(str(c) for c in counts) + f" | {sum(counts)} |")
    return "\n".join([
        _front_matter("Timeline", wide=True),
        "# Timeline",
        "",
        "Papers per quarter, stacked by drafting family (the top-level drafting node of a paper's "
        "first drafting tag). The date is the arXiv posting (from the arXiv id) when there is one, "
        "else the record's year and month; a record without a month counts in its year's first quarter.",
        "",
        f'<div class="sa-timeline">{figure.svg}</div>',
        "",
        '??? note "The numbers"',
        "",
        "\n".join("    " + line for line in table),
        "",
    ])


# Lineage -------------------------------------------------------------------------------------

def lineage_page(catalog: Catalog, directory_urls: bool) -> str:
    components = _lineage_components(catalog)
    # Material renders Mermaid with the global `mermaid` when one is loaded, else from a CDN;
    # the vendored copy keeps the site self-contained.
    script = "../javascripts/vendor/mermaid.min.js" if directory_urls else "javascripts/vendor/mermaid.min.js"
    out = [
        _front_matter("Lineage", wide=True),
        "# Lineage",
        "",
        "An arrow runs from a method to the work that builds on it (the records' `builds_on`). "
        "Only papers with such an edge appear; each connected family has its own diagram, largest "
        "first, headed by its oldest paper.",
        "",
        f'<script src="{script}"></script>',
        "",
    ]
    if not components:
        out.append("No record lists `builds_on` yet.")
    for members in components:
        ordered = sorted(members, key=lambda i: _chronological(catalog.by_id[i]))
        ids = {paper_id: f"n{k}" for k, paper_id in enumerate(ordered)}
        lines = ["graph LR"]
        for paper_id in ordered:
            lines.append(f'  {ids[paper_id]}["{_mermaid_label(catalog.by_id[paper_id])}"]')
        for paper_id in ordered:
            for parent in catalog.by_id[paper_id].builds_on:
                if parent in ids:
                    lines.append(f"  {ids[parent]} --> {ids[paper_id]}")
        root = catalog.by_id[ordered[0]]
        out += [
            f"## {md(root.title)} ({len(ordered)} papers)",
            "",
            code_fence("\n".join(lines), "mermaid"),
            "",
            ", ".join(f"{_paper_link(catalog.by_id[i], 'papers/')} ({posted(catalog.by_id[i])[0]})" for i in ordered),
            "",
        ]
    return "\n".join(out)


def _lineage_components(catalog: Catalog) -> list[set[str]]:
    """Weakly connected components of the builds_on graph, singletons left out, largest first."""
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
    return sorted(groups.values(), key=lambda g: (-len(g), min(g)))


def _mermaid_label(paper: Paper) -> str:
    short = paper.aliases[0] if paper.aliases else paper.id
    return _MERMAID_LABEL_DROP.sub("", f"{short} ({posted(paper)[0]})")


# Leaderboard and contributing ----------------------------------------------------------------

def leaderboard_page(catalog: Catalog) -> str:
    results = catalog.root / "results"
    has_results = results.is_dir() and any(
        p.is_file() and not p.name.startswith(".") and not p.name.lower().startswith("readme")
        for p in results.rglob("*"))
    try:
        from specatlas.bench.leaderboard import render_markdown
    except ImportError:
        render_markdown = None
    head = [_front_matter("Leaderboard"), "# Leaderboard", ""]
    if render_markdown and has_results:
        return "\n".join([*head, render_markdown(results), ""])
    return "\n".join([
        *head,
        "No measured results exist yet. The leaderboard shows only runs that were actually "
        "executed, never numbers copied from papers (each paper page lists those as reported results).",
        "",
        "To produce results, run the benchmark; it writes them under `results/`, and the next site "
        "build renders them here:",
        "",
        code_fence("specatlas bench --help", "bash"),
        "",
    ])


def contributing_page(catalog: Catalog) -> str:
    source = catalog.root / "CONTRIBUTING.md"
    if not source.is_file():
        return _front_matter("Contributing") + "# Contributing\n\nSee the repository's CONTRIBUTING.md.\n"
    return source.read_text(encoding="utf-8")

