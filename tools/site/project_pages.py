"""The pages about the project rather than one paper: training data and heads, resources, Run it,
coverage, Contributing, and robots.txt; with the repository files they read (a malformed one is a
`RepositoryFileError`, one line naming it, when the site builds).
"""

from __future__ import annotations

import json
from pathlib import Path

from markupsafe import Markup

from specatlas.bench.measured import measured_rows
from specatlas.bench.published import load_spec_bench
from specatlas.catalog.citations import public_url
from specatlas.catalog.schema import ENGINE_NAMES, Paper
from specatlas.catalog.taxonomy import FACETS
from specatlas.escaping import safe_url
from specatlas.site import choose, reported
from specatlas.site.catalog import Catalog, chronological, newest_first, trainable_families
from specatlas.site.templating import render, render_page


RUN_PROMPT = "Explain speculative decoding in two sentences."


class RepositoryFileError(ValueError):
    """A file the project writes and a page reads (a manifest, a model card, a training result) is
    broken: the build stops with this one line naming it."""


def repository_json(path: Path) -> dict:
    """A JSON file the project writes (a manifest, a model card, a curve); a broken one fails the build."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RepositoryFileError(f"{path}: cannot be read ({exc})") from None


def _held_out_methods(path: Path) -> dict:
    """The methods' entries of a `specatlas train-eval` results file."""
    from specatlas.head_training import ENTRY_KEYS, is_results

    results = repository_json(path)
    if not is_results(results):
        raise RepositoryFileError(f"{path}: not a held-out acceptance file (`specatlas train-eval`): every method's "
                                  f"entry holds {', '.join(ENTRY_KEYS)}")
    return results["methods"]


def schedule_label(curve: dict) -> str:
    """How an acceptance-vs-data curve was trained: the same epochs at every size, or the same steps
    (a file written before the label existed is fixed-steps: its name carries the steps)."""
    if curve.get("schedule") == "epochs":
        return f"{curve['epochs']} epochs at every size (steps grow with the data)"
    steps = curve.get("steps") or (curve["points"][0]["steps"] if curve["points"] else "?")
    return f"fixed {steps} steps at every size (a larger set is drawn fewer times)"


def spec_bench_accepted(catalog: Catalog) -> dict[str, str]:
    """Spec-Bench's published mean accepted tokens by registry method, on the smallest target the
    leaderboard lists for the method's record (the first such row): what the papers' own heads reach
    on 7B-33B targets, beside what the heads shipped here reach."""
    from specatlas.impls.registry import METHODS

    rows = [row for row in reported.spec_bench_rows(catalog, load_spec_bench(catalog.root))
            if row.paper_id and row.accepted is not None]
    smallest = {}
    for row in sorted(rows, key=lambda row: reported.billions(row.target)):  # stable: the file's order among equals
        smallest.setdefault(row.paper_id, f"{row.accepted} ({row.method} on {row.target})")
    return {spec.id: smallest[spec.record_id] for spec in METHODS.values() if spec.record_id in smallest}


def training_page(catalog: Catalog) -> str:
    """The data the heads learn from (the train-data manifests), the shipped heads' model cards, their
    methods' held-out acceptance and the acceptance-vs-data curves (results/training/), each read
    from the repository's files."""
    from specatlas.bench.charts import acceptance_by_data

    impls = catalog.root / "reference_impls"
    manifests = [(path.parent.name, repository_json(path)) for path in sorted((impls / "training_data").glob("*/manifest.json"))]
    heads = [(path.parent.name, repository_json(path)) for path in sorted((impls / "trained_heads").glob("*/training.json"))]
    curves = []
    for path in sorted((catalog.root / "results" / "training").glob("*-acceptance-vs-data.json")):
        curve = repository_json(path)
        try:
            points = curve["points"]
            series = {"top-1 chain": [(p["train_answer_tokens"], p["chain"]["mean_accepted_tokens_chain"]) for p in points],
                      f"{points[0]['paper_method']['method']}, paper settings" if points else "paper method":
                          [(p["train_answer_tokens"], p["paper_method"]["mean_accepted_tokens"]) for p in points]}
        except (KeyError, TypeError, IndexError) as exc:
            raise RepositoryFileError(f"{path}: not an acceptance-vs-data curve (`specatlas train-curve`): "
                                      f"{type(exc).__name__} {exc}") from None
        chart = acceptance_by_data(series, f"{curve['family']} on {curve['model']}: held-out mean accepted tokens "
                                           f"by training data size, {schedule_label(curve)}") if points else None
        curves.append((path.name, curve, schedule_label(curve), Markup(chart) if chart else None))
    evaluations = [(path.name, path.name.removesuffix("-held-out-acceptance.json"), _held_out_methods(path))
                   for path in sorted((catalog.root / "results" / "training").glob("*-held-out-acceptance.json"))]
    published = spec_bench_accepted(catalog) if evaluations else {}
    sources = {model: [(source, counts.get("read", 0), counts.get("kept", 0),
                        "; ".join(f"{why.removeprefix('dropped: ')} {n:,}" for why, n in counts.items()
                                  if why.startswith("dropped")) or "–")
                       for source, counts in manifest.get("sources", {}).items()] for model, manifest in manifests}
    return render_page("training.md.j2", manifests=manifests, heads=heads, curves=curves, sources=sources,
                 evaluations=evaluations, published=published)


RESOURCES_FILE = Path(__file__).resolve().parent / "resources.yaml"


def resources_page(catalog: Catalog) -> str:
    """Where to learn the field: the catalog's surveys, tutorials and benchmarks, recorded talks, the
    serving engines' documentation its records cite, and the blog posts and project pages of a public
    paper list (resources.yaml, with its source and licence)."""
    import yaml

    try:
        listed = yaml.safe_load(RESOURCES_FILE.read_text(encoding="utf-8"))
        posts = [(str(p["title"]), str(p["posted"]), [(k, v) for k, v in p["links"].items() if safe_url(v)])
                 for p in listed["posts"]]
        talks = [{key: str(t[key]) for key in ("title", "speaker", "host", "about", "link")} for t in listed["talks"]
                 if safe_url(str(t["link"]))]
    except (OSError, yaml.YAMLError, KeyError, TypeError) as exc:
        raise RepositoryFileError(f"{RESOURCES_FILE}: needs source, licence, posts of title, posted and links, and "
                                  f"talks of title, speaker, host, about and link ({type(exc).__name__}: {exc})") from None
    node = lambda node_id: newest_first(catalog.by_id[i] for i in catalog.node_papers.get(node_id, []))  # noqa: E731
    engines: dict[str, dict[str, list[Paper]]] = {}
    for paper in catalog.papers:
        for support in paper.serving_engines:
            engines.setdefault(ENGINE_NAMES[support.engine], {}).setdefault(str(support.source), []).append(paper)
    surveys = node("survey")
    return render_page("resources.md.j2", surveys=surveys, benchmarks=node("benchmark"),
                 writing=newest_first(p for p in catalog.papers if p.kind != "paper" and p not in surveys), engines=sorted(engines.items()),
                 posts=sorted(posts, key=lambda post: post[1], reverse=True), talks=talks, source=listed["source"],
                 licence=listed["licence"], url=public_url, name=choose.method_name)


def robots(site_url: str | None) -> str:
    """Every page may be crawled; the sitemap is named only where the site's address is configured."""
    lines = ["User-agent: *", "Allow: /"]
    if site_url and safe_url(site_url):
        lines.append(f"Sitemap: {site_url.rstrip('/')}/sitemap.xml")
    return "\n".join(lines) + "\n"


def run_page(catalog: Catalog, repo_url: str | None = None, site_url: str | None = None) -> str:
    """How to get the code and run a method: on the embedded model, on your own model and GPU,
    with published checkpoints, a head you train, and a benchmark run to contribute."""
    from specatlas.impls.registry import METHODS

    methods = [(METHODS.get(method_id), method_id, paper) for method_id, paper in catalog.runnable]
    families = [(name, (paper_id, catalog.by_id.get(paper_id))) for name, paper_id in trainable_families()]
    return render_page("run.md.j2", addresses=_addresses(repo_url, site_url), repo_url=safe_url(repo_url) if repo_url else None,
                 methods=methods, families=families,
                 run_prompt=RUN_PROMPT, example="pld",
                 draft_example=next((s.aliases[0] for s in METHODS.values() if s.uses_draft_model and s.aliases), "sps"))


def coverage_page(catalog: Catalog, loaded=None) -> str:
    """Each taxonomy node: the papers on it, the methods that run here (the registry's compositions,
    their drafting and verification nodes with the ones above them; alignment and scope from their
    records), the head families `specatlas train` trains for it, which methods have measured results,
    and why the idea cannot run here when that is a limit of the engine."""
    from specatlas.impls.coverage import NOT_RUNNABLE
    from specatlas.impls.registry import METHODS

    nodes = {n.id: n for n in catalog.taxonomy.all_nodes()}
    unknown = sorted(set(NOT_RUNNABLE) - set(nodes))
    if unknown:
        raise ValueError(f"reference_impls/coverage.py names taxonomy nodes that do not exist: {', '.join(unknown)}")

    def with_ancestors(node_ids) -> set[str]:
        out = set()
        for node_id in node_ids:
            if node_id in nodes:
                facet = catalog.taxonomy.facets[nodes[node_id].facet]
                out |= {node_id, *facet.ancestors(node_id)}
        return out

    runs: dict[str, list[Paper]] = {}
    for spec in METHODS.values():
        paper = catalog.by_id.get(spec.id)
        if paper is None:
            continue
        records = [t for t in catalog.expanded_tags(paper) if nodes.get(t) and nodes[t].facet in ("alignment", "scope")]
        for node_id in with_ancestors((*spec.drafting, *spec.verification)) | set(records):
            runs.setdefault(node_id, []).append(paper)
    trains: dict[str, list[str]] = {}
    for name, paper_id in trainable_families():
        paper = catalog.by_id.get(paper_id)
        for node_id in catalog.expanded_tags(paper) if paper else []:
            trains.setdefault(node_id, []).append(name)
    measured = {row.method_id for row in measured_rows(catalog.root / "results", loaded)} if loaded else set()
    facets = []
    for facet_id in FACETS:
        facet = catalog.taxonomy.facets.get(facet_id)
        if facet is None:
            continue
        rows = []

        def walk(parent: str | None, depth: int) -> None:
            for node in facet.children(parent):
                methods = sorted(runs.get(node.id, []), key=chronological)
                rows.append({"node": node, "depth": depth, "papers": len(catalog.node_papers.get(node.id, [])),
                             "methods": methods, "measured": [p for p in methods if p.id in measured],
                             "trains": trains.get(node.id, []), "why": NOT_RUNNABLE.get(node.id)})
                walk(node.id, depth + 1)

        walk(None, 0)
        facets.append((facet, rows))
    return render_page("coverage.md.j2", facets=facets, implemented=len(catalog.runnable),
                 measured=len(measured & set(catalog.by_id)), name=choose.method_name)


def contributing_page(catalog: Catalog, repo_url: str | None = None, site_url: str | None = None) -> str:
    """CONTRIBUTING.md as it is, then where to send a contribution (the configured addresses)."""
    source = catalog.root / "CONTRIBUTING.md"
    guide = source.read_text(encoding="utf-8").rstrip() if source.is_file() else render_page("contributing.md.j2").rstrip()
    where = _addresses(repo_url, site_url)
    return guide + "\n" + (render("addresses.md.j2", addresses=where) if where else "")


def _addresses(repo_url: str | None, site_url: str | None) -> dict[str, str]:
    """The configured repository and site addresses (`specatlas.site.urls`), those that are safe to link."""
    found = {"repository": safe_url(repo_url) if repo_url else None, "site": safe_url(site_url) if site_url else None}
    return {name: url for name, url in found.items() if url}
