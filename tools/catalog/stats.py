"""`specatlas stats`: the catalog's coverage at a glance."""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter

from specatlas.catalog.taxonomy import FACETS, Taxonomy
from specatlas.catalog.validate import validate


def implemented_ids() -> set[str]:
    """Paper ids with a reference implementation (the registry imports without torch)."""
    try:
        from specatlas.impls.registry import implemented_ids as registered
    except ImportError:
        return set()
    return set(registered())


def compute(records, taxonomy: Taxonomy) -> dict:
    papers = [r.paper for r in records if r.paper]
    implemented = implemented_ids()
    direct = Counter(tag for p in papers for facet in FACETS for tag in getattr(p.taxonomy, facet))
    # A node's count includes papers tagged with any of its descendants, counted once each.
    subtree = Counter()
    for p in papers:
        reached = set()
        for facet in FACETS:
            for tag in getattr(p.taxonomy, facet):
                if tag in taxonomy.facets[facet].nodes:
                    reached.update([tag, *taxonomy.facets[facet].ancestors(tag)])
        subtree.update(reached)
    return {
        "records": len(papers),
        "taxonomy": {
            facet: [
                {"id": n.id, "depth": len(taxonomy.facets[facet].ancestors(n.id)), "tagged": direct[n.id], "with_descendants": subtree[n.id]}
                for n in _tree_order(taxonomy, facet)
            ]
            for facet in FACETS
        },
        "year": dict(sorted(Counter(p.year for p in papers).items())),
        "venue": dict(Counter(p.venue for p in papers).most_common()),
        "lossless": {str(k).lower(): v for k, v in Counter(p.lossless for p in papers).most_common()},
        "with_code": sum(bool(p.code) for p in papers),
        "implemented": sum(p.id in implemented or bool(p.implementation) for p in papers),
        "untagged_axes": {facet: sum(not getattr(p.taxonomy, facet) for p in papers) for facet in FACETS},
    }


def _tree_order(taxonomy: Taxonomy, facet: str):
    out = []

    def walk(parent):
        for node in taxonomy.facets[facet].children(parent):
            out.append(node)
            walk(node.id)

    walk(None)
    return out


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def execute(args: argparse.Namespace) -> int:
    problems, records, taxonomy = validate()
    stats = compute(records, taxonomy)
    if args.json:
        json.dump(stats, sys.stdout, indent=2)
        print()
        return 0
    n = stats["records"]
    print(f"{n} records ({len(problems)} validation problems)")
    for facet in FACETS:
        print(f"\n{facet} (papers tagged / including descendants)")
        for row in stats["taxonomy"][facet]:
            print(f"  {'  ' * row['depth']}{row['id']:<{34 - 2 * row['depth']}} {row['tagged']:>4} {row['with_descendants']:>5}")
        print(f"  {'(no tag on this axis)':<34} {stats['untagged_axes'][facet]:>4}")
    print("\nyear    " + "  ".join(f"{y}: {c}" for y, c in stats["year"].items()))
    print("venue   " + "  ".join(f"{v}: {c}" for v, c in stats["venue"].items()))
    print("lossless " + "  ".join(f"{k}: {v}" for k, v in stats["lossless"].items()))
    print(f"with code: {stats['with_code']}/{n}   implemented: {stats['implemented']}/{n}")
    return 0
