"""A `builds_on` chain a thousand records deep (each paper building on the next) is
validated, counted and drawn without reaching Python's recursion limit; a cycle at its end is
still reported."""

import random
import sys

import pytest
from corpus import preload, run_cli

from specatlas.catalog.validate import validate
from specatlas.site import lineage
from specatlas.site.catalog import load_catalog

DEPTH = 1_000
WORDS = ("draft", "verify", "token", "tree", "head", "cache", "layer", "batch", "model", "sample", "accept", "exact",
         "parallel", "lookahead", "retrieval", "medusa", "eagle", "window", "jacobi", "ngram", "cascade", "staged")


def chain_record(i: int, rng: random.Random) -> str:
    title = " ".join(rng.choice(WORDS) for _ in range(8)).title()
    parent = f"[chain2024n{i + 1}]" if i < DEPTH - 1 else "[]"  # n0 -> n1 -> ...: the first id is the deepest
    return f"""id: chain2024n{i}
title: {title} {i}
authors:
  - Ada Alpha
year: 2024
venue: arXiv
url: https://example.org/chain/{i}
taxonomy:
  drafting: [independent-tuning-free]
  verification: [speculative-sampling]
  scope: [llm-text-generation]
lossless: true
builds_on: {parent}
summary: >-
  Record {i} of a long chain of papers, each building on the next one, for the lineage tests.
no_result_reason: not-yet-recorded
"""


@pytest.fixture
def deep_catalog(make_catalog):
    root = make_catalog()
    rng = random.Random(0)
    for i in range(DEPTH):
        (root / "papers" / f"chain2024n{i}.yaml").write_text(chain_record(i, rng), encoding="utf-8")
    return root


def test_a_thousand_deep_lineage_validates_counts_and_draws(deep_catalog):
    assert DEPTH > sys.getrecursionlimit() - 100  # deep enough that recursion would fail
    problems, records, _ = validate(root=deep_catalog)
    assert not problems, problems[:3]
    assert len(records) == DEPTH + 2
    preload()
    (deep_catalog.parent / "run").mkdir()
    code, out, err = run_cli(["stats"], deep_catalog, deep_catalog.parent / "run", 60)
    assert code == 0 and "Traceback" not in err, err
    catalog = load_catalog(deep_catalog)
    family = lineage.components(catalog)[0]  # the largest; the base records form another
    assert len(family) == DEPTH
    places = lineage.layout(catalog, family)
    assert max(column for column, _ in places.values()) == DEPTH - 1
    assert lineage.svg(catalog, family, "{}.html").count('class="sa-node"') == DEPTH


def test_a_cycle_at_the_end_of_a_deep_chain_is_reported(deep_catalog):
    last = deep_catalog / "papers" / f"chain2024n{DEPTH - 1}.yaml"
    last.write_text(last.read_text().replace("builds_on: []", "builds_on: [chain2024n0]"))
    problems, _, _ = validate(root=deep_catalog)
    cycles = [p for p in problems if "lineage cycle" in str(p)]
    assert len(cycles) == DEPTH and all(str(p).count("->") == DEPTH for p in cycles[:1])
