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


def test_settings_text_and_paper_draft_are_derived_from_the_constants():
    """A method's numbers are written once: change a constant and its settings text, its widest
    draft and what its builder runs all follow."""
    import dataclasses

    from specatlas.impls.engine.draft_length import DraftLengthPolicy

    spec = METHODS["fu2024break"]
    assert spec.paper_settings == "W = 15, N = 5, G = 15 (its 7B setting on an A100)" and spec.paper_draft == (4, 60)
    changed = dataclasses.replace(spec, constants={**spec.constants, "window": 7, "ngram": 4})
    assert changed.paper_settings == "W = 7, N = 4, G = 15 (its 7B setting on an A100)" and changed.paper_draft == (3, 45)
    assert changed.constants_for(DraftLengthPolicy.paper()).window == 7
    tree = METHODS["miao2024specinfer"]
    wider = dataclasses.replace(tree, constants={"widths": (1, 2, 2)})
    assert tree.paper_settings.startswith("token tree expansion <1, 1, 3, 1, 1, 1, 1, 1> (depth 8,")
    assert wider.paper_settings.startswith("token tree expansion <1, 2, 2> (depth 3,") and wider.paper_draft == (3, 7)


def test_every_constant_is_named_in_the_settings_text_or_used_by_its_draft():
    """A constant nobody reads would be a second, silent home for a number: each one appears in the
    settings text (`{name}`) or shapes `paper_draft`."""
    import string
    from types import SimpleNamespace

    for spec in METHODS.values():
        named = {field for _, field, spec_, _ in string.Formatter().parse(spec.settings) if field}
        for name, value in spec.constants.items():
            if name in named:
                continue
            nudged = SimpleNamespace(**{**spec.constants, name: value + ((1,) if isinstance(value, tuple) else 1)})
            assert callable(spec.draft) and spec.draft(nudged) != spec.paper_draft, f"{spec.id}: {name} is unused"


def test_the_cost_aware_policy_alone_runs_a_sized_structure_where_its_device_fits():
    """The hardware-sized structures are labelled variants chosen in one place (`constants_for`):
    the paper's and a fixed draft length run the paper's structure everywhere."""
    from types import SimpleNamespace

    from specatlas.impls.engine.draft_length import DraftLengthPolicy

    cpu, gpu = (SimpleNamespace(device=SimpleNamespace(type=kind)) for kind in ("cpu", "cuda"))
    sized = {spec.id: spec for spec in METHODS.values() if spec.sized}
    assert {"miao2024specinfer", "fu2024break", "luo2025turning", "he2024rest"} <= set(sized)
    for spec in sized.values():
        assert spec.sized.name and spec.sized.why
        for policy in (DraftLengthPolicy.paper(), DraftLengthPolicy.fixed(3)):
            assert spec.constants_for(policy, cpu) == spec.paper == spec.constants_for(policy, gpu)
        assert vars(spec.constants_for(DraftLengthPolicy.cost_aware(), cpu)).items() >= spec.sized.constants.items()
        on_gpu = spec.constants_for(DraftLengthPolicy.cost_aware(), gpu)
        assert on_gpu == spec.paper if spec.sized.cpu_only else on_gpu != spec.paper


def test_no_builder_module_holds_its_own_numbers():
    """The builders read every paper constant from the registry: `methods/*.py` assigns no module-level
    number or tuple of numbers (the way a constant would come to live in two places)."""
    import ast

    from specatlas.paths import repo_root

    def numeric(node) -> bool:
        if isinstance(node, ast.Constant):
            return isinstance(node.value, (int, float)) and not isinstance(node.value, bool)
        return isinstance(node, ast.Tuple) and any(numeric(item) for item in node.elts)

    for path in sorted((repo_root() / "reference_impls" / "methods").glob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None and numeric(node.value):
                raise AssertionError(f"{path.name}:{node.lineno}: a module-level number; define it in registry.py")
