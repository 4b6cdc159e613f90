"""`specatlas stats`: the catalog's coverage at a glance."""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter

from specatlas.catalog.records import posted_month
from specatlas.catalog.schema import NO_RESULT_REASONS, RESULT_GAP
from specatlas.catalog.taxonomy import FACETS, Taxonomy
from specatlas.catalog.validate import validate


def implemented_ids() -> set[str]:
    """Paper ids with a reference implementation (the registry imports without torch)."""
    try:
        from specatlas.impls.registry import implemented_ids as registered
    except ImportError:
        return set()
    return set(registered())


def month_counts(papers) -> dict[str, int]:
    """Records per posted month, every month from the first to the last present (zeros included,
    so gaps in coverage show), plus 'unknown' for records without a month."""
    counts = Counter(posted_month(p) for p in papers)
    unknown = counts.pop(None, 0)
    out: dict[str, int] = {}
    if counts:
        year, month = map(int, min(counts).split("-"))
        last = tuple(map(int, max(counts).split("-")))
        while (year, month) <= last:
            key = f"{year}-{month:02d}"
            out[key] = counts.get(key, 0)
            year, month = (year + 1, 1) if month == 12 else (year, month + 1)
    if unknown:
        out["unknown"] = unknown
    return out


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
        "posted_month": month_counts(papers),
        "venue": dict(Counter(p.venue for p in papers).most_common()),
        "lossless": {str(k).lower(): v for k, v in Counter(p.lossless for p in papers).most_common()},
        "with_code": sum(bool(p.code) for p in papers),
        "implemented": sum(p.id in implemented or bool(p.implementation) for p in papers),
        "untagged_axes": {facet: sum(not getattr(p.taxonomy, facet) for p in papers) for facet in FACETS},
        "results": result_coverage(papers),
    }


def result_coverage(papers) -> dict:
    """Records with a reported result, and why the others have none; `gap` counts the records whose
    paper reports a result the catalog has not copied yet (no_result_reason: not-yet-recorded)."""
    reasons = Counter(p.no_result_reason for p in papers if not p.reported_results)
    return {
        "with_result": sum(bool(p.reported_results) for p in papers),
        "without_result": {reason or "(no reason)": reasons[reason] for reason in (*NO_RESULT_REASONS, None) if reasons[reason]},
        "gap": reasons[RESULT_GAP],
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
    print("\nposted month (arXiv id's month, else the record's year and month; '.' = none)")
    months = stats["posted_month"]
    for year in sorted({k[:4] for k in months if k != "unknown"}):
        row = [f"{months[f'{year}-{m:02d}']:>3}" if f"{year}-{m:02d}" in months else "   " for m in range(1, 13)]
        print(f"  {year} " + " ".join(c.replace("  0", "  .") for c in row) + f"   | {sum(v for k, v in months.items() if k.startswith(year))}")
    print("        " + " ".join(f"{m:>3}" for m in ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")))
    if "unknown" in months:
        print(f"  month unknown: {months['unknown']}")
    newest = max((k for k, v in months.items() if k != "unknown" and v), default=None)
    print(f"  newest posted month covered: {newest}\n")
    print("venue   " + "  ".join(f"{v}: {c}" for v, c in stats["venue"].items()))
    print("lossless " + "  ".join(f"{k}: {v}" for k, v in stats["lossless"].items()))
    print(f"with code: {stats['with_code']}/{n}   implemented: {stats['implemented']}/{n}")
    results = stats["results"]
    print(f"with a reported result: {results['with_result']}/{n}   without: "
          + "  ".join(f"{k}: {v}" for k, v in results["without_result"].items()))
    if results["gap"]:
        print(f"gap: {results['gap']} records report a result the catalog has not recorded yet (no_result_reason: {RESULT_GAP})")
    return 0
