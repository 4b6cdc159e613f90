"""`specatlas validate`: the catalog's problems, one line each (or JSON, or GitHub Actions
annotations). Exit status 0 when clean, 1 when any problem is found."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from specatlas.catalog.validate import github_annotation, validate


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", type=Path, metavar="PATH", help="record files or folders (default: the whole catalog)")
    parser.add_argument("--format", choices=("text", "json", "github"), default="text",
                        help="text: file:line: field: message; json: machine-readable; github: Actions annotations")


def execute(args: argparse.Namespace) -> int:
    problems, records, taxonomy = validate(args.paths or None)
    if args.format == "json":
        json.dump({"ok": not problems, "records": len(records), "problems": [p.__dict__ for p in problems]}, sys.stdout, indent=2)
        print()
    else:
        for problem in problems:
            if args.format == "github":
                print(github_annotation(problem))
            else:
                print(problem)
        n_nodes = len(taxonomy.all_nodes())
        summary = (f"{len(problems)} problem(s) in {len({p.file for p in problems})} file(s)" if problems
                   else f"ok: {len(records)} records, {n_nodes} taxonomy nodes")
        print(summary, file=sys.stderr)
    return 1 if problems else 0
