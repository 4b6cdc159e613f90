"""`specatlas audit`: draw records for a blind audit, reproducibly.

The draw depends only on the seed, the count and the set of record ids (file names under
papers/), so anyone with the same checkout draws the same records: write the seed and the
commit down with the audit. The records are listed in the order drawn; the auditor then checks
each against its sources (title, authors, arXiv id, date, venue, code, lossless claim, tags).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys

from specatlas.catalog.schema import ID_PATTERN
from specatlas.paths import papers_dir


def draw(ids: list[str], seed: int, count: int) -> list[str]:
    """`count` distinct ids out of `ids`, chosen by `random.Random(seed)` from the sorted list."""
    population = sorted(set(ids))
    return random.Random(seed).sample(population, min(count, len(population)))


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seed", type=int, required=True, help="seed of the draw; write it down with the audit")
    parser.add_argument("--count", type=int, default=30, help="how many records to draw (default 30)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def execute(args: argparse.Namespace) -> int:
    if args.count < 1:
        from specatlas.cli import CommandError
        raise CommandError("--count must be at least 1")
    names = [path.stem for path in papers_dir().glob("*.yaml")]
    ids = [name for name in names if re.fullmatch(ID_PATTERN, name)]
    if len(ids) < len(names):  # such a file is no record (validate says so) and could break the list's lines
        print(f"specatlas audit: left out {len(names) - len(ids)} file(s) not named <record id>.yaml", file=sys.stderr)
    chosen = draw(ids, args.seed, args.count)
    if args.json:
        json.dump({"seed": args.seed, "population": len(set(ids)), "records": chosen}, sys.stdout, indent=2)
        print()
        return 0
    print(f"seed {args.seed}: {len(chosen)} of {len(set(ids))} records")
    for number, record_id in enumerate(chosen, 1):
        print(f"{number:>3}  {record_id}")
    return 0
