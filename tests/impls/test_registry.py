"""The registry is the taxonomy made executable: its tags must be the paper records' tags."""

import subprocess
import sys

import pytest

from specatlas.catalog.records import read_record
from specatlas.catalog.taxonomy import load_taxonomy
from specatlas.impls.registry import METHODS, implemented_ids, resolve
from specatlas.paths import papers_dir, taxonomy_dir

PAPER_METHODS = [spec for spec in METHODS.values() if spec.has_paper]


def test_registry_imports_without_torch():
    code = "import sys, specatlas.impls.registry as r; r.implemented_ids(); assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_ids_and_aliases_resolve_uniquely():
    names = [name for spec in METHODS.values() for name in (spec.id, *spec.aliases)]
    assert len(names) == len(set(names))
    assert implemented_ids() == sorted(METHODS)
    assert resolve("PLD").id == "saxena2023prompt" and resolve("nope") is None


def test_declared_nodes_exist_in_their_facet():
    taxonomy = load_taxonomy(taxonomy_dir())
    for spec in METHODS.values():
        for facet, nodes in (("drafting", spec.drafting), ("verification", spec.verification)):
            unknown = set(nodes) - set(taxonomy.facets[facet].nodes)
            assert not unknown, f"{spec.id}: unknown {facet} nodes {unknown}"


@pytest.mark.parametrize("spec", PAPER_METHODS, ids=lambda spec: spec.id)
def test_method_implements_exactly_its_papers_tags(spec):
    path = papers_dir() / f"{spec.record_id}.yaml"
    assert path.exists(), f"{spec.id} is registered but papers/{spec.record_id}.yaml is missing"
    assert not spec.variant_of or spec.variant_of in METHODS, f"{spec.id}: a variant of an unregistered method"
    record, problems = read_record(path)
    assert not problems, [str(problem) for problem in problems]
    paper = record.paper
    assert set(spec.drafting) == set(paper.taxonomy.drafting)
    assert set(spec.verification) == set(paper.taxonomy.verification)
    if not spec.variant_of:  # a variant's aliases name the variant
        assert set(spec.aliases) == set(paper.aliases)
    if spec.variant:
        # The record's top-level flag covers every variant (false when any is lossy or trains the
        # target); the registry's flag is the implemented variant's.
        variants = {v.variant: v for v in paper.lossless_variants}
        assert spec.variant in variants, f"{spec.id}: variant {spec.variant!r} is not in the record's lossless_variants"
        assert spec.lossless == variants[spec.variant].lossless and not variants[spec.variant].modifies_target
    else:
        assert spec.lossless == paper.lossless


def test_every_builder_resolves_to_a_callable_taking_the_policy():
    """Without loading a model: every "module:function" names a builder that takes (target, draft
    model, DraftLengthPolicy), positionally as `specatlas bench` calls it or by keyword."""
    import inspect

    from specatlas.impls.engine.draft_length import DraftLengthPolicy

    for spec in METHODS.values():
        builder = spec.builder_function()
        assert callable(builder), spec.builder
        signature = inspect.signature(builder)
        assert list(signature.parameters)[:3] == ["target", "draft_model", "policy"], spec.builder
        signature.bind(object(), None, DraftLengthPolicy.cost_aware())
        signature.bind(object(), policy=DraftLengthPolicy.fixed(3))
