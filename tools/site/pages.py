"""Markdown for every page that is derived from the catalog.

`generate(catalog)` returns {path under docs/: content}: the Markdown pages plus papers.bib. It is
a pure function of the catalog, linear in its size. This module gathers each page's data; its
markup is in templates/*.md.j2 (see `specatlas.site.templating`), where every value is escaped
for where it lands. Links between pages are relative links to .md files, so MkDocs checks every
one of them.
"""

from __future__ import annotations

import re
from collections import Counter
from urllib.parse import urlencode

from markupsafe import Markup

from specatlas.bench.aggregate import load_all
from specatlas.bench.leaderboard_page import page_context
from specatlas.bench.measured import measured_by_method, measured_rows
from specatlas.bench.published import load_spec_bench
from specatlas.catalog.bibtex import render as render_bib
from specatlas.catalog.capture_recapture import SweepError
from specatlas.catalog.citations import public_url
from specatlas.catalog.schema import ID_PATTERN, Paper
from specatlas.catalog.taxonomy import FACETS, Node
from specatlas.catalog.venues import VENUES
from specatlas.escaping import safe_url, tag_name
from specatlas.site import choose, lineage, reported, timeline
from specatlas.site.catalog import Catalog, chronological, newest_first, posted, trainable_families
from specatlas.site.project_pages import (RUN_PROMPT, RepositoryFileError, contributing_page, coverage_page, repository_json,
                                          resources_page, robots, run_page, training_page)
from specatlas.site.templating import render_page, venue

_ID = re.compile(ID_PATTERN)
_NODE_ID = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")

METRIC_UNITS = {"speedup": "×", "throughput-gain": "×"}
RAW_RESULTS = "runs"  # the site folder of the result files under results/
NODE_SEARCH_BOOST = 4  # Material search: a taxonomy node's page scores this many times a paper's


def generate(catalog: Catalog, *, directory_urls: bool = True, repo_url: str | None = None,
             site_url: str | None = None) -> dict[str, str]:
    """`repo_url` and `site_url`: the configured addresses (`specatlas.site.urls`), or None."""
    for paper in catalog.papers:  # ids and node ids become file names
        if not _ID.fullmatch(paper.id):
            raise ValueError(f"paper id {paper.id!r} cannot name a page")
    for node in catalog.taxonomy.all_nodes():
        if not _NODE_ID.fullmatch(node.id) or node.id == "index":
            raise ValueError(f"taxonomy node id {node.id!r} cannot name a page")
    loaded = measured_results(catalog)
    whole_bib = render_bib(catalog.papers)
    entries = bib_entries(whole_bib)
    pages = {
        "index.md": home(catalog, loaded),
        "catalog.md": catalog_page(catalog, directory_urls, entries),
        "taxonomy/index.md": taxonomy_index(catalog),
        "timeline.md": timeline_page(catalog),
        "lineage.md": lineage_page(catalog, directory_urls),
        "leaderboard.md": leaderboard_page(catalog, loaded),
        "results.md": results_page(catalog, directory_urls),
        "choose.md": choose_page(catalog, loaded, directory_urls),
        "run.md": run_page(catalog, repo_url, site_url),
        "coverage.md": coverage_page(catalog, loaded),
        "training.md": training_page(catalog),
        "resources.md": resources_page(catalog),
        "robots.txt": robots(site_url),
        "contributing.md": contributing_page(catalog, repo_url, site_url),
        "papers.bib": whole_bib,
    }
    measured = measured_by_method(loaded) if loaded else {}
    third_party = spec_bench_by_paper(catalog)
    trained = trained_here(catalog)
    for paper in catalog.papers:
        pages[f"papers/{paper.id}.md"] = paper_page(catalog, paper, entries[paper.id], measured.get(paper.id, []),
                                                    directory_urls, third_party.get(paper.id, []), trained, repo_url)
        pages[f"papers/{paper.id}.bib"] = entries[paper.id] + "\n"
    for node in catalog.taxonomy.all_nodes():
        pages[f"taxonomy/{node.id}.md"] = node_page(catalog, node, directory_urls)
    for _, name in loaded[0] if loaded else []:  # the raw result files the leaderboard links to
        pages[f"{RAW_RESULTS}/{name}"] = (catalog.root / "results" / name).read_text(encoding="utf-8")
    return pages


def allowed_tags(catalog: Catalog) -> list[str]:
    """Material tags allowed on pages: one per taxonomy node, its name."""
    return sorted({tag_name(node.name) for node in catalog.taxonomy.all_nodes()})


def bib_entries(bibtex: str) -> dict[str, str]:
    """id -> that paper's entry, cut from the whole file (one bibtexparser pass, not one per paper)."""
    chunks = re.split(r"\n(?=@)", bibtex.strip())
    return {re.match(r"@\w+\{([^,]*),", chunk).group(1): chunk.strip() for chunk in chunks}


# Home ----------------------------------------------------------------------------------------

def home(catalog: Catalog, loaded=None) -> str:
    """The first screen says what the site offers: the methods that run and were measured here,
    with the pages that rank, run and map them; the catalog follows."""
    papers = catalog.papers
    # by name: speedups from different hardware tables are never ranked against each other
    measured = {row.method_id for row in measured_rows(catalog.root / "results", loaded)} if loaded else set()
    benchmarked = sorted((catalog.by_id[i] for i in measured & set(catalog.by_id)), key=lambda p: choose.method_name(p).lower())
    third_party = len(spec_bench_by_paper(catalog))
    drafting = catalog.taxonomy.facets.get("drafting")
    glance = {
        "papers": len(papers),
        "lossless": sum(p.lossless is True for p in papers),
        "lossy": sum(p.lossless is False for p in papers),
        "code": sum(bool(p.code) for p in papers),
        "runnable": len(catalog.runnable),
        "venues": len({p.venue for p in papers}),
        "used_nodes": sum(1 for ids in catalog.node_papers.values() if ids),
        "nodes": len(catalog.taxonomy.all_nodes()),
    }
    return render_page(
        "home.md.j2", glance=glance, years=Counter(posted(p)[0] for p in papers),
        families=[(node, len(catalog.node_papers.get(node.id, []))) for node in (drafting.children(None) if drafting else [])],
        runnable=sorted(catalog.runnable), run_prompt=RUN_PROMPT,
        benchmarked=benchmarked, third_party=third_party, name=choose.method_name,
        unmeasured=sorted((catalog.by_id[i] for i in catalog.implemented - measured), key=lambda p: choose.method_name(p).lower()))


# One page per paper --------------------------------------------------------------------------

def spec_bench_by_paper(catalog: Catalog) -> dict[str, list[reported.ResultRow]]:
    """Spec-Bench's published rows per record they measure (a combined method, 'SAMD[EAGLE2]', under
    each record it combines), by hardware, then best speedup first (hardware is never ranked across)."""
    by_alias, rows = reported.aliases(catalog), {}
    for row in reported.spec_bench_rows(catalog, load_spec_bench(catalog.root)):
        for paper_id in reported.components(row.method, by_alias):
            rows.setdefault(paper_id, []).append(row)
    return {key: sorted(value, key=lambda r: (r.hardware, -(r.speedup or 0))) for key, value in rows.items()}


def paper_page(catalog: Catalog, paper: Paper, bibtex: str, measured: list | None = None,
               directory_urls: bool = True, third_party: list | None = None, trained: dict | None = None,
               repo_url: str | None = None) -> str:
    """`measured`: the method's rows in the leaderboard's tables (see `measured.measured_by_method`);
    `third_party`: Spec-Bench's published rows for it (`spec_bench_by_paper`); `trained`: `trained_here`."""
    from specatlas.impls.registry import METHODS

    specs = [METHODS[i] for i, record in catalog.runnable if record.id == paper.id and i in METHODS]
    runs = [(spec, choose.own_model_command(spec, _example_model(spec))[0],
             (trained or {}).get(spec.trained_head) if spec.trained_head else None) for spec in specs]
    neighbours = lineage.neighbourhood(catalog, paper)
    hood = lineage.neighbourhood_svg(catalog, paper, "../{}/" if directory_urls else "{}.html", neighbours)
    facets = []
    for facet_id in FACETS:
        facet = catalog.taxonomy.facets.get(facet_id)
        nodes = [facet.nodes[t] for t in catalog.tags(paper, facet_id) if facet and t in facet.nodes]
        if nodes:
            facets.append((facet, nodes))
    venue = VENUES.get(paper.venue)
    return render_page(
        "paper.md.j2", paper=paper, tags=sorted({node.name for _, nodes in facets for node in nodes}), facets=facets,
        venue_name=venue.name if venue else paper.venue, links=_links(paper),
        parents=[catalog.by_id[i] for i in paper.builds_on if i in catalog.by_id],
        children=newest_first(catalog.by_id[i] for i in catalog.built_upon_by.get(paper.id, [])),
        siblings=neighbours["siblings"],
        hood=Markup(hood) if hood else None,  # lineage.py escapes every text it draws
        results=_result_cells(paper), implemented=paper.id in catalog.implemented, run_prompt=RUN_PROMPT, bibtex=bibtex,
        measured=measured or [], raw_results=RAW_RESULTS, third_party=third_party or [], runs=runs,
        repo_url=safe_url(repo_url) if repo_url else None)


def _example_model(spec) -> str | None:
    """A target with a drafter published for the method (Spec-Bench's 7B, when there is one), else None."""
    drafters = choose.published_drafters()["drafters"]
    family = spec.trained_head or ("draft-model" if spec.uses_draft_model else None)
    return next(iter(drafters.get(family, {})), None) if family else "lmsys/vicuna-7b-v1.3"


def trained_here(catalog: Catalog) -> dict[str, dict[str, list[str]]]:
    """head family -> {"heads": the shipped heads' folders under reference_impls/trained_heads/,
    "curves": its acceptance-vs-data files under results/training/}: where a paper page points for
    the head trained here."""
    out: dict[str, dict[str, list[str]]] = {}
    for name, _ in trainable_families():
        heads = sorted(p.parent.name for p in (catalog.root / "reference_impls" / "trained_heads").glob(f"*-{name}/training.json"))
        out[name] = {"heads": heads, "curves": []}
    for path in sorted((catalog.root / "results" / "training").glob("*-acceptance-vs-data.json")):
        family = repository_json(path).get("family")
        if family in out:
            out[family]["curves"].append(path.name)
    return out


def _links(paper: Paper) -> list[tuple[str, str]]:
    """(label, URL) of every link of the record; the template shows an unsafe URL as its bare label."""
    links = []
    if paper.arxiv:
        links.append((f"arXiv:{paper.arxiv}", f"https://arxiv.org/abs/{paper.arxiv}"))
    if paper.url:
        links.append(("Paper", paper.url))
    if paper.pdf:
        links.append(("PDF", paper.pdf))
    if paper.doi:
        links.append((f"DOI {paper.doi}", f"https://doi.org/{paper.doi}"))
    links.extend(("Code" if len(paper.code) == 1 else f"Code {i}", url) for i, url in enumerate(paper.code, 1))
    links.extend((name.capitalize(), url) for name, url in paper.links.items())
    return links


def _quick_links(paper: Paper) -> list[tuple[str, str]]:
    """(label, safe URL) for the catalog's one-click badges: arXiv, PDF, code."""
    links = []
    if paper.arxiv:
        links.append(("arXiv", f"https://arxiv.org/abs/{paper.arxiv}"))
    pdf = paper.pdf or (f"https://arxiv.org/pdf/{paper.arxiv}" if paper.arxiv else None)
    if pdf:
        links.append(("PDF", pdf))
    if not paper.arxiv and paper.url:
        links.append(("Paper", paper.url))
    links.extend(("Code", url) for url in paper.code[:1])
    return [(label, url) for label, url in ((label, safe_url(url)) for label, url in links) if url]


def _result_cells(paper: Paper) -> list[list[str]]:
    """The paper's reported numbers as table cells (plain text), the last the source as (text, public URL)."""
    rows = []
    for r in paper.reported_results:
        setting = [r.hardware or "hardware not stated"]
        if r.batch_size is not None:
            setting.append(f"batch {r.batch_size}")
        if r.temperature is not None:
            setting.append(f"T={r.temperature:g}")
        rows.append([r.metric, f"{r.value:g}{METRIC_UNITS.get(r.metric, '')}", r.benchmark, r.target_model,
                     r.drafter or "–", ", ".join(setting), (reported.source_text(r), public_url(paper))])
    return rows


# Taxonomy ------------------------------------------------------------------------------------

def taxonomy_index(catalog: Catalog) -> str:
    facets = [catalog.taxonomy.facets[f] for f in FACETS if f in catalog.taxonomy.facets]
    return render_page("taxonomy.md.j2", facets=facets, count=_counter(catalog))


def node_page(catalog: Catalog, node: Node, directory_urls: bool = True) -> str:
    facet = catalog.taxonomy.facets[node.facet]
    # a raw link: MkDocs keeps a .md link's anchor but not the query the catalog's filters read
    filtered = ("../../catalog/" if directory_urls else "../catalog.html") + "?" + urlencode({"node": node.id})
    return render_page("node.md.j2", node=node, facet=facet, count=_counter(catalog), search_boost=NODE_SEARCH_BOOST,
                 catalog_href=filtered,
                 ancestors=[facet.nodes[a] for a in reversed(facet.ancestors(node.id))], children=facet.children(node.id),
                 papers=newest_first(catalog.by_id[i] for i in catalog.node_papers.get(node.id, [])))


def _counter(catalog: Catalog):
    """node id -> how many papers it and the nodes below it have."""
    return lambda node_id: len(catalog.node_papers.get(node_id, []))


# Catalog table -------------------------------------------------------------------------------

def catalog_page(catalog: Catalog, directory_urls: bool, entries: dict[str, str] | None = None) -> str:
    """`entries`: each record's BibTeX as papers.bib has it (`bib_entries`), for the filtered download."""
    entries = entries if entries is not None else bib_entries(render_bib(catalog.papers))
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
    node_href = "../taxonomy/{}/" if directory_urls else "taxonomy/{}.html"
    rows = []
    for paper in catalog.papers:
        year, month = posted(paper)
        best = reported.best_speedup(paper)
        rows.append({
            "id": paper.id,
            "href": href.format(paper.id),
            "title": paper.title,
            "authors": paper.authors,
            "aliases": paper.aliases,
            "year": paper.year,
            "posted": f"{year}-{month or 0:02d}",
            "venue": venue(paper),
            "tags": [{"id": t, "name": names.get(t, t), "href": node_href.format(t)}
                     for facet in ("drafting", "verification", "alignment") for t in catalog.tags(paper, facet)],
            "nodes": catalog.expanded_tags(paper),
            "links": [{"label": label, "url": url} for label, url in _quick_links(paper)],
            "speedup": best[0] if best else None,
            "speedup_setting": best[1] if best else None,
            "lossless": paper.lossless,
            "code": bool(paper.code),
            "implemented": paper.id in catalog.implemented,
            "bibtex": entries[paper.id],
        })
    return render_page("catalog.md.j2", data={"facets": facets, "papers": rows})


# Timeline ------------------------------------------------------------------------------------

def timeline_page(catalog: Catalog) -> str:
    figure = timeline.build(catalog)
    try:
        recall = timeline.measured_recall(catalog)
    except SweepError as exc:
        raise RepositoryFileError(str(exc)) from None
    # timeline.py escapes every text it draws into the SVG
    return render_page("timeline.md.j2", svg=Markup(figure.svg), families=figure.families, rows=figure.rows,
                 coverage=figure.coverage, row_status=figure.row_status, statuses=timeline.STATUSES,
                 recall=recall)


# Lineage -------------------------------------------------------------------------------------

def lineage_page(catalog: Catalog, directory_urls: bool) -> str:
    """One collapsible section per drafting family: its diagram (edges inside the family) and every
    member by its full title with what it builds on (in any family)."""
    href = "../papers/{}/" if directory_urls else "papers/{}.html"
    nodes = {n.id: n for n in catalog.taxonomy.all_nodes()}
    families = [{
        "name": " › ".join(nodes[n].name for n in path if n in nodes) or "No drafting family",
        "slug": "family-" + ("-".join(path[-1:]) or "none"),
        "members": [(catalog.by_id[i], posted(catalog.by_id[i])[0],
                     [catalog.by_id[u] for u in catalog.by_id[i].builds_on if u in catalog.by_id]) for i in members],
        "svg": Markup(lineage.svg(catalog, members, href)),  # lineage.py escapes every text it draws
    } for path, members in lineage.families(catalog)]
    return render_page("lineage.md.j2", families=families)


# Leaderboard ---------------------------------------------------------------------------------

def measured_results(catalog: Catalog):
    """The result files under results/ as `specatlas.bench.aggregate.load_all` reads them, or
    None when there are none."""
    results = catalog.root / "results"
    if not results.is_dir():
        return None
    loaded = load_all(results)
    return loaded if loaded[0] or loaded[1] else None


def leaderboard_page(catalog: Catalog, loaded=None) -> str:
    """The measured tables and reported numbers (the templates results/LEADERBOARD.md renders from
    too, see `specatlas.bench.leaderboard_page`), linked to the site's paper pages and the raw files."""
    if not loaded:
        return render_page("leaderboard.md.j2", measured=None)
    from specatlas.impls.registry import METHODS

    def link(method_id: str) -> str | None:  # a registry variant (hu2025sam-eagle2) links its paper's record
        record = METHODS[method_id].record_id if method_id in METHODS else method_id
        return f"papers/{record}.md" if record in catalog.by_id else None

    return render_page("leaderboard.md.j2", **page_context(catalog.root / "results", link=link, papers=catalog.by_id,
                                                     loaded=loaded, raw=lambda name: f"{RAW_RESULTS}/{name}"))


# Reported results compared -------------------------------------------------------------------

RESULT_COLUMNS = ("Method", "Speedup (×)", "Mean accepted tokens", "Other metric", "Target model", "Drafter",
                  "Hardware", "Batch", "Temp.", "Measured by", "Source")


def results_page(catalog: Catalog, directory_urls: bool) -> str:
    rows = reported.collect(catalog, load_spec_bench(catalog.root))
    by_benchmark: dict[str, list[reported.ResultRow]] = {}
    for row in rows:
        by_benchmark.setdefault(row.benchmark, []).append(row)
    order = [name for name, _ in reported.BENCHMARKS if name in by_benchmark]
    order += [reported.MIXED] if reported.MIXED in by_benchmark else []
    tables = [{
        "name": name, "slug": "results-" + re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-"),
        "columns": [*RESULT_COLUMNS[:1], *(("Benchmark",) if name == reported.MIXED else ()), *RESULT_COLUMNS[1:]],
        "show_benchmark": name == reported.MIXED,
        "rows": sorted(by_benchmark[name], key=lambda r: (r.speedup is None, -(r.speedup or 0), r.method)),
    } for name in order]
    third = sum(r.measured_by == reported.THIRD_PARTY for r in rows)
    return render_page("results.md.j2", tables=tables, papers=len({r.source_id for r in rows if r.measured_by == reported.OWN}),
                 settings=len(rows) - third, third=third, mixed=reported.MIXED, third_party=reported.THIRD_PARTY,
                 href="../papers/{}/" if directory_urls else "papers/{}.html", num=_num, sort_num=_sort_num,
                 size_order=[label for _, label in reported.SIZE_BUCKETS] + [reported.NOT_STATED])


def _num(value: float | int | None, suffix: str) -> str:
    return "–" if value is None else f"{value:g}{suffix}"


def _sort_num(value: float | int | None) -> str:
    return "" if value is None else f"{value:g}"


# Which method should I use? ------------------------------------------------------------------

SHORTLIST = 12
# Needs that no benchmark table here measures: (title, what it means, scope or drafting nodes).
NEEDS = (
    ("Long context", "Long prompts or long generations, where the KV cache dominates.", ("long-context",)),
    ("Multimodal", "Vision-language and other multimodal generation.", ("multimodal",)),
    ("Code edits and outputs that copy the input",
     "Rewriting code or documents, retrieval-augmented answers: drafts copied from the context or a "
     "datastore are often long and cost almost nothing.", ("context-copy", "retrieval-drafting")),
    ("Reasoning models", "Long chains of thought from reasoning models.", ("reasoning",)),
)


def choose_page(catalog: Catalog, loaded=None, directory_urls: bool = True) -> str:
    names = {n.id: n for n in catalog.taxonomy.all_nodes()}
    needs = []
    for title, meaning, nodes in NEEDS:
        fits = [p for p in catalog.papers if p.lossless is not None and set(catalog.expanded_tags(p)) & set(nodes)]
        fits.sort(key=lambda p: (p.id not in catalog.implemented, tuple(-x for x in chronological(p)[:2])))
        needs.append({"title": title, "meaning": meaning, "fit": len(fits), "papers": fits[:SHORTLIST],
                      "best": reported.best_speedup, "browse": [names[n] for n in nodes if n in names]})
    serving, serving_total = choose.serving(catalog)
    return render_page("choose.md.j2", settings=choose.settings(catalog, loaded, load_spec_bench(catalog.root)),
                 serving=serving, serving_total=serving_total, needs=needs, implemented=catalog.implemented,
                 engine_column=choose.has_engine_data(catalog), engines=choose.engines, needs_of=lambda p: choose.needs(catalog, p),
                 num=_num, count=_counter(catalog), serving_node=names.get("serving-systems"),
                 page_href=lambda md_path: _page_href(md_path, directory_urls))


def _page_href(md_path: str, directory_urls: bool) -> str:
    """The URL of a top-level page (`results.md`) from another top-level page, as MkDocs writes it."""
    stem = md_path.removesuffix(".md")
    return f"../{stem}/" if directory_urls else f"{stem}.html"
