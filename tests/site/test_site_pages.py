"""Page generation on the fixture catalog (tests/site/fixtures/papers)."""

import json
import re

import pytest

from specatlas.bench.published import SPEC_BENCH_FILE
from specatlas.catalog.taxonomy import FACETS
from specatlas.site import pages, project_pages
from specatlas.site.catalog import posted
from specatlas.site.timeline import NO_FAMILY


@pytest.fixture(scope="module")
def generated(fixture_catalog):
    return pages.generate(fixture_catalog)


def test_one_page_per_paper_and_per_node(fixture_catalog, generated):
    expected = {f"papers/{p.id}.{ext}" for p in fixture_catalog.papers for ext in ("md", "bib")}
    expected |= {f"taxonomy/{n.id}.md" for n in fixture_catalog.taxonomy.all_nodes()}
    expected |= {"index.md", "catalog.md", "taxonomy/index.md", "timeline.md", "lineage.md",
                 "leaderboard.md", "results.md", "choose.md", "run.md", "coverage.md", "training.md", "resources.md", "contributing.md", "papers.bib", "robots.txt"}
    assert set(generated) == expected


def test_paper_page(generated):
    page = generated["papers/cai2024medusa.md"]
    assert "\n# Medusa: Simple LLM Inference Acceleration Framework with Multiple Decoding Heads\n" in page
    assert "[Extra decoding heads](../taxonomy/extra-heads.md){ .sa-badge }" in page
    assert "**Builds on:** [Blockwise Parallel Decoding for Deep Autoregressive Models](stern2018blockwise.md)" in page
    assert "**Built upon by:** [EAGLE: Speculative Sampling Requires Rethinking Feature Uncertainty](li2024eagle.md)" in page
    assert "| speedup | 2\\.18× |" in page and "| Vicuna\\-7B |" in page
    assert "specatlas run cai2024medusa" in page
    assert "@inproceedings{cai2024medusa," in page and "{Medusa}: Simple {LLM}" in page
    assert "**Lossless:** no: relaxed acceptance" in page and "Lossless: Lossless" not in page
    assert "[Code](https://github.com/FasterDecoding/Medusa)" in page
    # Tags feed search, but their chips are hidden: the linked badges already show them.
    assert re.search(r'tags:\n  - "Extra decoding heads"', page) and "hide:\n  - navigation\n  - tags" in page
    assert '[cai2024medusa.bib](cai2024medusa.bib){ download="cai2024medusa.bib" }' in page
    assert "## BibTeX { data-search-exclude }" in page


def test_per_paper_bib_is_that_papers_entry(fixture_catalog, generated):
    entry = generated["papers/cai2024medusa.bib"]
    assert entry.startswith("@inproceedings{cai2024medusa,") and entry.count("\n@") == 0
    assert entry.strip() in generated["papers.bib"]


def test_paper_without_implementation_has_no_run_command(generated):
    assert "specatlas run" not in generated["papers/xia2024unlocking.md"]
    assert "**Lossless:** not applicable: not a decoding method" in generated["papers/xia2024unlocking.md"]


def test_taxonomy_counts_include_sub_nodes(fixture_catalog, generated):
    # extra-heads: blockwise + medusa; self-drafting (its parent) adds eagle's feature-level tag.
    assert "- [Extra decoding heads](extra-heads.md) (2)" in generated["taxonomy/index.md"]
    assert "- [Self-drafting](self-drafting.md) (3)" in generated["taxonomy/index.md"].replace("\\-", "-")
    node = generated["taxonomy/self-drafting.md"]
    assert "## Papers (3)" in node and "](../papers/li2024eagle.md)" in node
    assert "## Papers (0)" in generated["taxonomy/judge-acceptance.md"]


def test_catalog_data(fixture_catalog, generated):
    page = generated["catalog.md"]
    data = json.loads(re.search(r'id="sa-catalog-data">(.*?)</script>', page).group(1))
    rows = {row["id"]: row for row in data["papers"]}
    assert set(rows) == {p.id for p in fixture_catalog.papers}
    medusa = rows["cai2024medusa"]
    assert medusa["href"] == "../papers/cai2024medusa/"
    assert medusa["authors"][0] == "Tianle Cai" and medusa["aliases"] == ["medusa"]
    assert medusa["year"] == 2024 and medusa["posted"] == "2024-01"  # venue year, arXiv month
    assert medusa["speedup"] == 2.18 and "Vicuna-7B" in medusa["speedup_setting"]
    assert [t["id"] for t in medusa["tags"]][:2] == ["extra-heads", "token-tree"] and "self-distilled-data" in [t["id"] for t in medusa["tags"]]
    assert medusa["tags"][0]["href"] == "../taxonomy/extra-heads/"
    assert [link["label"] for link in medusa["links"]] == ["arXiv", "PDF", "Code"]
    assert medusa["links"][1]["url"] == "https://arxiv.org/pdf/2401.10774"
    assert {"extra-heads", "self-drafting", "token-tree", "draft-structure"} <= set(medusa["nodes"])
    assert medusa["code"] and medusa["implemented"] and medusa["lossless"] is False
    assert rows["xia2024unlocking"]["lossless"] is None
    assert [f["id"] for f in data["facets"]] == list(FACETS)
    counts = {n["id"]: n["count"] for f in data["facets"] for n in f["nodes"]}
    assert counts["token-tree"] == 2 and counts["survey"] == 1


def test_lineage_is_drawn_at_build_time_with_linked_nodes(fixture_catalog, generated):
    page = generated["lineage.md"]
    # one diagram per drafting family: extra heads (blockwise, Medusa), feature-level (EAGLE)
    assert page.count("<svg") == 2 and "mermaid" not in page and "<script" not in page
    assert "## Self\\-drafting › Extra decoding heads (2 papers)" in page
    for paper_id in ("stern2018blockwise", "cai2024medusa", "li2024eagle"):
        assert f'<a href="../papers/{paper_id}/" class="sa-node" data-id="{paper_id}">' in page
    # full names, wrapped, never truncated ids; the edge inside the family is drawn
    assert ">Medusa (2024)</tspan>" in page and page.count('class="sa-edge"') == 1
    assert 'data-from="stern2018blockwise" data-to="cai2024medusa"' in page
    # the list names every member by its full title, with what it builds on in any family
    assert "[EAGLE: Speculative Sampling Requires Rethinking Feature Uncertainty](papers/li2024eagle.md) (2024): builds on [Medusa" in page
    assert "xia2024unlocking" not in page
    # generations left to right: blockwise, then medusa, then eagle
    from specatlas.site import lineage

    places = lineage.layout(fixture_catalog, ["stern2018blockwise", "cai2024medusa", "li2024eagle"])
    assert [places[i][0] for i in ("stern2018blockwise", "cai2024medusa", "li2024eagle")] == [0, 1, 2]


def test_timeline_uses_arxiv_month(fixture_catalog, generated):
    medusa = fixture_catalog.by_id["cai2024medusa"]
    assert posted(medusa) == (2024, 1)  # arXiv 2401.x, although the venue year-month is 2024-07
    page = generated["timeline.md"]
    assert "<svg" in page and "2024 Q1, Self-drafting: 2" in page  # medusa and eagle
    assert f"2024 Q1, {NO_FAMILY}: 1" in page  # the survey
    assert "| 2018 Q4 | 0 | 1 | 0 | 0 | 0 | 1 |" in page


def test_home_numbers(generated):
    home = generated["index.md"]
    assert "| Papers, posts and releases | **4** |" in home
    assert "| Lossless methods | 2 |" in home and "| Runnable here (reference implementations) | 3 |" in home
    assert "specatlas run cai2024medusa" in home


def test_leaderboard_without_results_says_so(generated):
    assert "No measured results exist yet" in generated["leaderboard.md"]
    assert "specatlas bench" in generated["leaderboard.md"]


def test_contributing_is_the_repository_file(fixture_catalog, generated):
    assert generated["contributing.md"] == (fixture_catalog.root / "CONTRIBUTING.md").read_text(encoding="utf-8")


def test_allowed_tags_are_the_taxonomy_node_names(fixture_catalog):
    assert pages.allowed_tags(fixture_catalog) == sorted({n.name for n in fixture_catalog.taxonomy.all_nodes()})


def test_unsafe_ids_cannot_name_pages(fixture_catalog):
    evil = fixture_catalog.papers[0].model_copy(update={"id": "../../etc/passwd2024x"})
    catalog = type(fixture_catalog)(fixture_catalog.root, [evil], fixture_catalog.taxonomy)
    with pytest.raises(ValueError, match="cannot name a page"):
        pages.generate(catalog)


def test_synthetic_catalog_for_the_benchmark():
    from specatlas.site.benchmark import synthetic_catalog

    catalog = synthetic_catalog(40)
    generated = pages.generate(catalog)
    assert sum(uri.startswith("papers/") and uri.endswith(".md") for uri in generated) == 40
    assert "sa-lineage-svg" in generated["lineage.md"]


def _with_results(catalog, paper_id, results):
    from specatlas.catalog.schema import ReportedResult

    papers = [p.model_copy(update={"reported_results": [ReportedResult.model_validate(r) for r in results]})
              if p.id == paper_id else p for p in catalog.papers]
    return type(catalog)(catalog.root, papers, catalog.taxonomy, catalog.implemented)


EAGLE_RESULTS = [
    {"metric": "speedup", "value": 3.0, "target_model": "Vicuna-13B", "benchmark": "MT-bench", "hardware": "A100 80GB",
     "batch_size": 1, "temperature": 0, "source": "Table 1"},
    {"metric": "mean-accepted-tokens", "value": 3.9, "target_model": "Vicuna-13B", "benchmark": "MT-bench",
     "hardware": "A100 80GB", "batch_size": 1, "temperature": 0, "source": "Table 1"},
    {"metric": "speedup", "value": 1.5, "target_model": "LLaMA2-Chat 70B", "benchmark": "MT-bench, HumanEval, GSM8K",
     "source": "Abstract", "batch_size": 4},
]


def test_results_page_groups_by_benchmark_and_merges_a_settings_metrics(fixture_catalog):
    catalog = _with_results(fixture_catalog, "li2024eagle", EAGLE_RESULTS)
    page = pages.results_page(catalog, directory_urls=True)
    mt = page[page.index("## MT\\-Bench"):page.index("## Several")]
    rows = re.findall(r"<tr data-family.*?</tr>", mt)
    # sorted by speedup: EAGLE's 3.0x (with its mean accepted tokens, one row) above Medusa's 2.18x
    assert len(rows) == 2 and ">EAGLE</a>" in rows[0] and "cai2024medusa" in rows[1]
    assert '<td data-sort="3">3×</td><td data-sort="3.9">3.9</td>' in rows[0]
    assert 'data-family="Vicuna" data-size="10–20B" data-hardware="A100" data-by="paper&#x27;s own"' in rows[0]
    assert 'data-size="3–10B" data-hardware="not stated"' in rows[1]
    mixed = page[page.index("## Several"):]
    assert "MT-bench, HumanEval, GSM8K" in mixed and 'data-family="Llama" data-size="≥ 40B"' in mixed


def test_results_page_shows_third_party_measurements_apart(tmp_path):
    from sitecatalog import make_root
    from specatlas.site.catalog import load_catalog

    catalog = load_catalog(make_root(tmp_path / "repo"))
    (catalog.root / SPEC_BENCH_FILE).write_text(json.dumps({
        "source": "Spec-Bench Leaderboard.md", "url": "https://example.org/Leaderboard.md", "licence": "Apache-2.0",
        "settings": "greedy, FP16, batch size 1",
        "hardware": {"A100": "1x A100 80GB"},
        "rows": [{"device": "A100", "target_model": "Vicuna-7B-v1.3", "method": "EAGLE", "Overall": 2.1,
                  "#Mean Accepted Tokens": 3.58},
                 {"device": "A100", "target_model": "Vicuna-7B-v1.3", "method": "Unknown<b>", "Overall": 1.2}]}))
    page = pages.results_page(catalog, directory_urls=True)
    spec = page[page.index("## Spec\\-Bench"):page.index("## MT")]
    rows = re.findall(r"<tr data-family.*?</tr>", spec)
    assert len(rows) == 2 and 'data-by="third party"' in rows[0]
    assert 'href="../papers/li2024eagle/" title="EAGLE: Speculative' in rows[0] and "3.58" in rows[0] and "1x A100 80GB" in rows[0]
    assert '>Spec-Bench leaderboard: <a href="https://example.org/Leaderboard.md">Spec-Bench Leaderboard.md</a><' in rows[0]
    assert "Unknown&lt;b&gt;" in rows[1] and "<b>" not in spec


def test_catalog_reports_the_best_speedup(fixture_catalog):
    catalog = _with_results(fixture_catalog, "li2024eagle", EAGLE_RESULTS)
    data = json.loads(re.search(r'<script type="application/json" id="sa-catalog-data">(.*?)</script>',
                                pages.catalog_page(catalog, True), re.S).group(1))
    eagle = next(row for row in data["papers"] if row["id"] == "li2024eagle")
    assert eagle["speedup"] == 3.0 and eagle["speedup_setting"] == "Vicuna-13B, MT-bench, A100 80GB"


def test_a_paper_page_draws_its_neighbourhood(fixture_catalog, generated):
    from specatlas.site import lineage

    page = generated["papers/cai2024medusa.md"]
    hood = page[page.index('<div class="sa-lineage sa-hood">'):page.index("</svg>", page.index("sa-hood"))]
    # what it builds on above, the paper itself, what builds on it below, each linked by its name
    assert '<a href="../stern2018blockwise/" class="sa-node" data-id="stern2018blockwise">' in hood
    assert 'class="sa-node sa-self" data-id="cai2024medusa"' in hood
    assert '<a href="../li2024eagle/" class="sa-node" data-id="li2024eagle">' in hood
    assert hood.index("Builds on") < hood.index("sa-self") < hood.index("Built upon by")
    assert 'data-from="stern2018blockwise" data-to="cai2024medusa"' in hood
    assert 'data-from="cai2024medusa" data-to="li2024eagle"' in hood
    assert "The whole family: [Lineage](../lineage.md)" in page
    # no parent and no child: no diagram
    assert lineage.neighbourhood_svg(fixture_catalog, fixture_catalog.by_id["xia2024unlocking"], "{}") is None


def test_siblings_share_a_parent_and_exclude_children(fixture_catalog):
    from specatlas.site import lineage

    papers = [p.model_copy(update={"builds_on": ["stern2018blockwise"]}) if p.id == "li2024eagle" else p
              for p in fixture_catalog.papers]
    catalog = type(fixture_catalog)(fixture_catalog.root, papers, fixture_catalog.taxonomy, fixture_catalog.implemented)
    hood = lineage.neighbourhood(catalog, catalog.by_id["cai2024medusa"])
    assert [p.id for p in hood["siblings"]] == ["li2024eagle"] and hood["children"] == []
    assert "Siblings: also building on Blockwise" in lineage.neighbourhood_svg(catalog, catalog.by_id["cai2024medusa"], "{}")


# Issue 28's smaller fixes ---------------------------------------------------------------------

def test_home_first_screen_offers_the_runnable_methods_before_the_catalog(generated):
    first = generated["index.md"].split("\n## ")[0]  # everything above the first section
    for link in ("(choose.md)", "(leaderboard.md)", "(run.md)", "(coverage.md)"):
        assert link in first, link
    assert first.index("(run.md)") < first.index("(catalog.md)")
    # the fixture has runnable methods and no results: each is listed as not yet measured
    assert "**Runnable, not yet measured**:" in first and "(papers/cai2024medusa.md)" in first
    assert "**Benchmarked here**" not in first


def test_home_lists_the_methods_benchmarked_here():
    from specatlas.paths import repo_root
    from specatlas.site.catalog import load_catalog

    catalog = load_catalog(repo_root())
    first = pages.home(catalog, pages.measured_results(catalog)).split("\n## ")[0]
    assert "**Benchmarked here**:" in first and "(papers/li2025eagle.md)" in first
    assert first.index("**Benchmarked here**") < first.index("(catalog.md)")


def test_timeline_without_a_sweep_record_says_so(generated):
    assert "No record says how completely each period was searched" in generated["timeline.md"]


def _sweep_root(tmp_path, coverage: str):
    from sitecatalog import make_root

    root = make_root(tmp_path / "catalog")
    sweep = root / "tools" / "catalog" / "sweep"
    sweep.mkdir(parents=True)
    (sweep / "coverage.yaml").write_text(coverage, encoding="utf-8")
    (sweep / "candidates.yaml").write_text(
        "candidates:\n  - {title: seen, arxiv: '2402.00001'}\n  - {title: no id, arxiv: null}\n", encoding="utf-8")
    return root


def test_timeline_says_how_complete_each_period_is(tmp_path):
    from specatlas.site.catalog import load_catalog

    root = _sweep_root(tmp_path, "swept: 2024-03-05\nperiods:\n"
                       "  - {from: 2018-01, to: 2023-12, status: complete, how: every list row}\n"
                       "  - {from: 2024-01, to: 2024-02, status: thin, how: 'few <b>pages</b>'}\n")
    page = pages.timeline_page(load_catalog(root))
    assert "the last on 2024\\-03\\-05" in page
    assert "| 2018-01 to 2023-12 | 1 | complete |  |" in page
    assert "| 2024-01 to 2024-02 | 3 | thin | 1 |" in page
    assert "| 2024-03 onward | 0 | not swept yet |  |" in page
    assert "every list row" not in page and "pages" not in page  # how a period was swept: the sweep's own notes
    assert "| 2024 Q1 | 0 | 2 | 0 | 0 | 1 | 3 | not swept yet |" in page  # its March is after the sweep
    assert "| 2018 Q4 | 0 | 1 | 0 | 0 | 0 | 1 | complete |" in page
    assert page.count('class="sa-thin"') == 1  # the thin quarter is marked in the figure


@pytest.mark.parametrize("periods", [
    "  - {from: 2018-01, to: 2018-13, status: complete, how: x}\n",  # not a month
    "  - {from: 2018-01, to: 2018-06, status: great, how: x}\n",  # unknown status
    "  - {from: 2018-01, to: 2018-06, status: thin, how: x}\n  - {from: 2018-05, to: 2018-09, status: thin, how: y}\n",
])
def test_a_malformed_sweep_record_fails_the_build(tmp_path, periods):
    from specatlas.site.catalog import load_catalog

    root = _sweep_root(tmp_path, "swept: 2024-03-05\nperiods:\n" + periods)
    with pytest.raises(ValueError, match="coverage.yaml"):
        pages.timeline_page(load_catalog(root))


def test_the_committed_sweep_record_reads(tmp_path):
    from specatlas.paths import repo_root
    from specatlas.site import timeline
    from specatlas.site.catalog import load_catalog

    catalog = load_catalog(repo_root())
    record = timeline.coverage(catalog)
    assert record is not None and record.periods[-1].status is None
    assert sum(p.papers for p in record.periods) == len(catalog.papers)  # every record in one period


def test_results_jump_counts_name_their_tables(fixture_catalog):
    page = pages.results_page(fixture_catalog, True)
    slugs = re.findall(r'\(<span class="sa-jump-count" data-table="([^"]+)">\d+</span>\)', page)
    assert slugs and all(f'<table class="sa-results sa-sortable" data-table="{slug}">' in page for slug in slugs)


def test_taxonomy_node_pages_are_boosted_in_search(generated):
    front = generated["taxonomy/extra-heads.md"].split("---\n")[1]
    # the node's name as its tag (hidden: the heading names it) and a search boost
    assert 'tags:\n  - "Extra decoding heads"' in front and "  - tags\n" in front
    assert f"search:\n  boost: {float(pages.NODE_SEARCH_BOOST)}\n" in front
    assert "search:" not in generated["papers/cai2024medusa.md"].split("---\n")[1]


def test_learning_resources_link_public_addresses_from_the_catalog_and_the_paper_list():
    from specatlas.paths import repo_root
    from specatlas.site.catalog import load_catalog

    catalog = load_catalog(repo_root())
    page = project_pages.resources_page(catalog)
    assert "(papers/xia2024unlocking.md) (2024-01, ACL\\-Findings): [public copy](https://arxiv.org/abs/2401.07851)" in page
    # an engine's documentation, as a record's serving_engines cites it (pinned to the version read)
    assert "(https://github.com/vllm-project/vllm/blob/002e77c1f0ef9b19cff8b9e21cfbd6feb3d6b443/vllm/config/speculative.py)" in page
    assert "[blog](https://lmsys.org/blog/2023-11-21-lookahead-decoding/)" in page  # from the public paper list
    assert "(https://github.com/hemingkx/SpeculativeDecodingPapers/blob/9e6b293/README.md) gives them (licence Apache\\-2\\.0)" in page
    talks = page.split("## Talks", 1)[1].split("## Benchmarks", 1)[0]  # recorded talks, each with speaker and host
    assert "[Speculative Decoding in LLMs](https://uditsaxena.bearblog.dev/spec-decode/), Udit Saxena (EleutherAI" in talks
    assert talks.count("\n- [") == 3
    links = re.findall(r"\]\(([^)]+)\)", page)
    assert links and all(link.startswith(("https://", "http://", "papers/", "results.md", "leaderboard.md")) for link in links)


def test_the_timeline_shows_the_measured_recall_of_every_quarter_the_sweeps_cover():
    from specatlas.catalog.capture_recapture import estimate, latest_round, read_sweeps
    from specatlas.paths import repo_root
    from specatlas.site.catalog import load_catalog

    catalog = load_catalog(repo_root())
    page = pages.timeline_page(catalog)
    result = estimate(catalog.papers, read_sweeps(latest_round()))
    assert f"posted {result['period'][0]} to {result['period'][1]}" in page
    for quarter, row in result["quarters"].items():
        r, low, high = (round(100 * x) for x in row["recall"])
        assert f"| {quarter} | {row['sweep_a']} | {row['sweep_b']} | {row['both']} | {row['found']} |" in page
        assert f"| {row['records']} | {r}% ({low}–{high}%) |" in page
