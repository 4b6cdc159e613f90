"""Time the site: page generation alone and the full MkDocs build, for the real catalog and for
synthetic catalogs of any size (generation must stay linear in the number of records).

    python -m specatlas.site.benchmark --synthetic 5000 [--no-build]
"""

from __future__ import annotations

import argparse
import logging
import random
import tempfile
import time
from pathlib import Path

from specatlas.catalog.schema import Paper
from specatlas.catalog.taxonomy import FACETS
from specatlas.paths import repo_root
from specatlas.site.catalog import Catalog, load_catalog
from specatlas.site.mkdocs_build import build
from specatlas.site.pages import generate

WORDS = ("speculative decoding draft tree verification fast lossless adaptive parallel token heads "
         "cascade lookahead medusa eagle llama inference acceleration model large language").split()
VENUES = ("arXiv", "ICML", "NeurIPS", "ACL", "EMNLP-Findings", "ICLR", "TMLR", "blog")


def synthetic_catalog(size: int, seed: int = 0) -> Catalog:
    """`size` valid records on the real taxonomy: random tags, titles, dates and lineage."""
    rng = random.Random(seed)
    taxonomy = load_catalog(repo_root()).taxonomy
    nodes = {f: list(taxonomy.facets[f].nodes) for f in FACETS}
    papers: list[Paper] = []
    for i in range(size):
        year, month = rng.randint(2018, 2025), rng.randint(1, 12)
        title = " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 10))).title()
        earlier = papers[-200:]  # lineage edges to recent work, as in the real catalog
        papers.append(Paper.model_validate({
            "id": f"synth{year}n{i}",
            "title": f"{title} {i}",
            "authors": [f"Author {i} {k}" for k in range(rng.randint(1, 6))],
            "year": year, "month": month,
            "venue": rng.choice(VENUES),
            "arxiv": f"{year % 100:02d}{month:02d}.{i:05d}",
            "code": ["https://github.com/example/repo"] if rng.random() < 0.4 else [],
            "taxonomy": {f: rng.sample(nodes[f], rng.randint(0 if f != "drafting" else 1, 2)) for f in FACETS},
            "lossless": rng.choice((True, False, None)),
            "builds_on": [rng.choice(earlier).id] if earlier and rng.random() < 0.3 else [],
            "summary": "A synthetic record for the site benchmark. " * 2,
            "reported_results": [{"metric": "speedup", "value": round(rng.uniform(1, 4), 2), "target_model": "LLaMA-2-7B",
                                  "benchmark": "MT-Bench", "source": "Table 1"}],
        }))
    return Catalog(repo_root(), papers, taxonomy)


def measure(label: str, catalog: Catalog, full_build: bool) -> None:
    start = time.perf_counter()
    pages = generate(catalog)
    generation = time.perf_counter() - start
    line = f"{label:<28} {len(catalog.papers):>6} records {len(pages):>6} pages  generate {generation:6.2f} s"
    if full_build:
        with tempfile.TemporaryDirectory() as out:
            start = time.perf_counter()
            build(Path(out), catalog)
            line += f"  mkdocs build {time.perf_counter() - start:6.1f} s"
    print(line, flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--synthetic", type=int, nargs="*", default=[], metavar="N", help="synthetic catalog sizes")
    parser.add_argument("--no-build", action="store_true", help="time page generation only")
    args = parser.parse_args(argv)
    logging.getLogger("mkdocs").setLevel(logging.ERROR)
    start = time.perf_counter()
    real = load_catalog(repo_root())
    print(f"loading and validating the real catalog: {time.perf_counter() - start:.2f} s")
    measure("real catalog", real, not args.no_build)
    for size in args.synthetic:
        measure("synthetic", synthetic_catalog(size), not args.no_build)


if __name__ == "__main__":
    main()
