"""Page generation on the fixture catalog (tests/site/fixtures/papers)."""

import json
import re

import pytest

from specatlas.catalog.taxonomy import FACETS
from specatlas.site import pages
from specatlas.site.catalog import posted
from specatlas.site.timeline import NO_FAMILY


@pytest.fixture(scope="module")
def generated(fixture_catalog):
    return pages.generate(fixture_catalog)


def test_one_page_per_paper_and_per_node(fixture_catalog, generated):
    expected = {f"papers/{p.id}.md" for p in fixture_catalog.papers}
    expected |= {f"taxonomy/{n.id}.md" for n in fixture_catalog.taxonomy.all_nodes()}
    expected |= {"index.md", "catalog.md", "taxonomy/index.md", "timeline.md", "lineage.md",
                 "leaderboard.md", "contributing.md", "papers.bib"}
    assert set(generated) == expected


def test_paper_page(generated):
    page = generated["papers/cai2024medusa.md"]
    assert "\n# Medusa: Simple LLM Inference Acceleration Framework with Multiple Decoding Heads\n" in page
    assert "[Extra decoding heads](../taxonomy/extra-heads.md){ .sa-badge }" in page
    assert "**Builds on:** [Blockwise Parallel Decoding for Deep Autoregressive Models](stern2018blockwise.md)" in page
    assert "**Built upon by:** [EAGLE: Speculative Sampling Requires Rethinking Feature Uncertainty](li2024eagle.md)" in page
    assert "| speedup | 2\\.18× | Vicuna\\-7B |" in page
    assert "specatlas run cai2024medusa" in page
    assert "@inproceedings{cai2024medusa," in page and "{M}edusa: {S}imple {LLM}" in page
    assert "Lossy" in page and "[Code](https://github.com/FasterDecoding/Medusa)" in page
    assert re.search(r'tags:\n  - "Extra decoding heads"', page)


def test_paper_without_implementation_has_no_run_command(generated):
    assert "specatlas run" not in generated["papers/li2024eagle.md"]
    assert "Not a decoding method" in generated["papers/xia2024unlocking.md"]


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
    assert {"extra-heads", "self-drafting", "token-tree", "draft-structure"} <= set(medusa["nodes"])
    assert medusa["code"] and medusa["implemented"] and medusa["lossless"] is False
    assert rows["xia2024unlocking"]["lossless"] is None
    assert [f["id"] for f in data["facets"]] == list(FACETS)
    counts = {n["id"]: n["count"] for f in data["facets"] for n in f["nodes"]}
    assert counts["token-tree"] == 2 and counts["survey"] == 1


def test_lineage_shows_connected_papers_only(generated):
    page = generated["lineage.md"]
    assert page.count("```mermaid") == 1
    assert '["medusa (2024)"]' in page and "n0 --> n1" in page and "n1 --> n2" in page
    assert "xia2024unlocking" not in page


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
    assert "| Lossless methods | 2 |" in home and "| Runnable here (reference implementations) | 1 |" in home
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
    assert sum(uri.startswith("papers/") for uri in generated) == 40
    assert "```mermaid" in generated["lineage.md"]
