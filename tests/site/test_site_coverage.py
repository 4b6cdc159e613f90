"""The coverage page: every taxonomy node with its papers, the registered methods that run it, the
families trained for it, which of them were measured, and why the engine cannot run it when known."""

import re
import shutil

import pytest

from sitecatalog import make_root
from specatlas.bench.aggregate import load_all
from specatlas.impls import coverage
from specatlas.impls.registry import METHODS
from specatlas.paths import repo_root
from specatlas.site import project_pages
from specatlas.site.catalog import load_catalog

RUN = "2026-12-03-smollm2-135m-instruct-cpu-9abfbd69.json"


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    root = make_root(tmp_path_factory.mktemp("coverage"))
    shutil.copy(repo_root() / "results" / RUN, root / "results")
    return project_pages.coverage_page(load_catalog(root), load_all(root / "results"))


def row(page, node_id):
    return re.search(rf"^\|[^\n]*\(taxonomy/{node_id}\.md\)[^\n]*$", page, re.M).group(0)


def test_every_node_has_a_row(fixture_catalog, page):
    for node in fixture_catalog.taxonomy.all_nodes():
        assert f"(taxonomy/{node.id}.md)" in page


def test_a_node_lists_the_methods_that_run_it_and_which_were_measured(page):
    heads = row(page, "extra-heads")
    assert "(papers/cai2024medusa.md)" in heads and "(papers/stern2018blockwise.md)" in heads
    assert "`specatlas train medusa`" in heads
    assert "| 2 of 2 |" in heads  # both measured in the committed run
    # the registry's verification nodes count too (Medusa's typical acceptance)
    assert "(papers/cai2024medusa.md)" in row(page, "typical-acceptance")


def test_why_an_idea_cannot_run_here(page):
    assert "encoder\\-decoder targets" in row(page, "seq2seq")
    assert row(page, "learnable-draft-tokens").endswith("| 0 | – | – | – |")  # no papers: nothing to say
    assert "Surveys are not decoding methods" in row(page, "survey")


def test_reasons_name_real_nodes_and_are_not_about_registered_ones(fixture_catalog):
    nodes = {n.id for n in fixture_catalog.taxonomy.all_nodes()}
    assert set(coverage.NOT_RUNNABLE) <= nodes
    registered = {node for spec in METHODS.values() for node in (*spec.drafting, *spec.verification)}
    assert not set(coverage.NOT_RUNNABLE) & registered


@pytest.fixture(scope="module")
def real_page(tmp_path_factory):
    """The page for the real catalog, measured by the committed run above (made before SpecTr,
    MCSD and SpecHub were registered)."""
    root = make_root(tmp_path_factory.mktemp("real"), papers=repo_root() / "papers")
    shutil.copy(repo_root() / "results" / RUN, root / "results")
    return project_pages.coverage_page(load_catalog(root), load_all(root / "results"))


def test_every_registered_method_is_on_the_row_of_each_node_it_runs(real_page):
    """Each method of the registry (a labelled variant as its paper's record) is listed on every
    drafting and verification node the registry gives it."""
    for spec in METHODS.values():
        if spec.has_paper:
            for node in (*spec.drafting, *spec.verification):
                assert f"(papers/{spec.record_id}.md)" in row(real_page, node), f"{spec.id} missing from {node}"


def test_a_row_names_the_methods_not_measured_yet(real_page):
    """On the multi-draft node the committed run measured SpecInfer only."""
    measured, unmeasured = row(real_page, "multi-draft").split(" (not yet: ")
    assert re.search(r"\| 1 of \d+$", measured)
    assert "(papers/miao2024specinfer.md)" not in unmeasured
    for method in ("sun2023spectr", "yang2024multi", "sun2024spechub"):
        assert f"(papers/{method}.md)" in unmeasured


def test_a_node_the_engine_cannot_run_says_why(page):
    assert "decoder\\-only causal language models" in row(page, "seq2seq")
