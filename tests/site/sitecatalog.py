"""Catalogs for the site tests: a catalog root built from tests/site/fixtures (always present)
with the real taxonomy, and an unvalidated loader for records the validator would refuse."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from specatlas.bench.published import SPEC_BENCH_FILE
from specatlas.catalog.schema import BibtexOverrides, Paper, ReportedResult, TaxonomyTags
from specatlas.catalog.taxonomy import load_taxonomy
from specatlas.paths import repo_root
from specatlas.site.catalog import Catalog

FIXTURE_PAPERS = Path(__file__).parent / "fixtures" / "papers"
PUBLISHED = SPEC_BENCH_FILE.parent


def make_root(directory: Path, papers: Path | None = FIXTURE_PAPERS) -> Path:
    """A catalog root at `directory`: the real taxonomy, published results and CONTRIBUTING.md,
    plus `papers`."""
    real = repo_root()
    shutil.copytree(real / "taxonomy", directory / "taxonomy")
    shutil.copytree(real / PUBLISHED, directory / PUBLISHED)
    shutil.copy(real / "CONTRIBUTING.md", directory / "CONTRIBUTING.md")
    if papers:
        shutil.copytree(papers, directory / "papers")
    else:
        (directory / "papers").mkdir()
    return directory


def load_unvalidated(root: Path) -> Catalog:
    """Every record under root/papers as a Paper built without validation (model_construct), so
    that the site can be tested on records the validator refuses."""
    papers = []
    for path in sorted((root / "papers").glob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        data["taxonomy"] = TaxonomyTags.model_construct(**data.get("taxonomy", {}))
        data["reported_results"] = [ReportedResult.model_construct(**r) for r in data.get("reported_results", [])]
        if data.get("bibtex"):
            data["bibtex"] = BibtexOverrides.model_construct(**data["bibtex"])
        defaults = {name: field.get_default(call_default_factory=True)
                    for name, field in Paper.model_fields.items() if not field.is_required()}
        papers.append(Paper.model_construct(**{**defaults, **data}))
    implemented = frozenset(p.id for p in papers if p.implementation)
    return Catalog(root, papers, load_taxonomy(root / "taxonomy"), implemented)
