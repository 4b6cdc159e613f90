"""`specatlas schema`: write paper.schema.json, the JSON Schema editors use for completion.

The file is generated from `specatlas.catalog.schema.Paper`; a test fails when it is stale.
"""

from __future__ import annotations

import argparse
import sys
import json
from pathlib import Path

from specatlas.catalog.schema import json_schema
from specatlas.fsutil import WriteError, atomic_write
from specatlas.paths import repo_root

SCHEMA_FILE = "paper.schema.json"


def render() -> str:
    return json.dumps(json_schema(), indent=2, ensure_ascii=False) + "\n"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed file is stale")


def execute(args: argparse.Namespace) -> int:
    path: Path = repo_root() / SCHEMA_FILE
    text = render()
    if args.check:
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            print(f"{SCHEMA_FILE} is stale; run `specatlas schema`")
            return 1
        return 0
    try:
        atomic_write(path, text)
    except WriteError as exc:
        print(f"specatlas schema: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {SCHEMA_FILE}")
    return 0
