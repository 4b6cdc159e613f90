"""The real catalog: clean, fast to validate, every taxonomy node described and used."""

import time
from collections import Counter

from specatlas.catalog.schema_export import SCHEMA_FILE, render
from specatlas.catalog.taxonomy import FACETS
from specatlas.catalog.validate import validate
from specatlas.paths import repo_root


def test_catalog_is_clean_and_fast():
    # CPU time, not wall time: the bound catches a quadratic slip (it takes ~1 s), not machine load.
    start = time.process_time()
    problems, records, _ = validate()
    elapsed = time.process_time() - start
    assert [str(p) for p in problems] == []
    assert records
    assert elapsed < 10.0, f"validating {len(records)} records took {elapsed:.2f}s of CPU time"


def test_every_taxonomy_node_is_described_and_used_or_reserved():
    problems, records, taxonomy = validate()
    assert not taxonomy.problems
    used = Counter(tag for r in records for facet in FACETS for tag in getattr(r.paper.taxonomy, facet))
    for node in taxonomy.all_nodes():
        assert len(node.description) >= 40, f"{node.id}: describe the node in a full sentence"
        children = taxonomy.facets[node.facet].children(node.id)
        if node.reserved:
            assert not used[node.id], f"{node.id} is used by {used[node.id]} records: drop its `reserved` marker"
        else:
            assert used[node.id] or children, f"{node.id} is used by no record: tag papers with it or mark it reserved (with why)"


def test_json_schema_file_is_current():
    committed = (repo_root() / SCHEMA_FILE).read_text(encoding="utf-8")
    assert committed == render(), "paper.schema.json is stale: run `specatlas schema`"


def test_every_reported_number_says_how_it_aggregates():
    """A benchmark mean and an abstract's "up to" figure are different numbers: every result in the
    catalog says which it is (ReportedResult.statistic)."""
    _, records, _ = validate()
    missing = [f"{r.paper.id}: reported_results[{i}]" for r in records if r.paper
               for i, result in enumerate(r.paper.reported_results) if result.statistic is None]
    assert not missing, "set statistic (mean, up-to, setting or unqualified) on:\n" + "\n".join(missing)
