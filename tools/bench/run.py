"""`specatlas bench`: measure methods against the autoregressive baseline in one session.

Its arguments and their checks are `specatlas.bench_arguments`, the measurement's protocol
`specatlas.bench.protocol`.
"""

from __future__ import annotations

import argparse
import sys

from specatlas.bench import questions as qs
from specatlas.bench.protocol import BenchError
from specatlas.bench_arguments import add_arguments, bench
from specatlas.cli import disk_error, printable
from specatlas.fsutil import WriteError
from specatlas.impls.engine.errors import ModelLoadError
from specatlas.impls.registry import METHODS


def configure(parser: argparse.ArgumentParser) -> None:
    add_arguments(parser)


def execute(args: argparse.Namespace) -> int:
    try:
        if args.list:
            return list_ids()
        path = bench(args)
    except (BenchError, qs.QuestionsError, ModelLoadError, WriteError) as exc:
        print(f"specatlas bench: {printable(str(exc))}", file=sys.stderr)
        return 2
    except OSError as exc:  # a full disk while appending a measurement: the lines before it are whole
        print(f"specatlas bench: {printable(disk_error(exc))}", file=sys.stderr)
        return 1
    print(f"results written to {path}")
    return 0


def list_ids() -> int:
    from specatlas.bench.contenders import PEERS

    for spec in METHODS.values():
        print(f"{spec.id:24} {spec.name}" + (f" (aliases: {', '.join(spec.aliases)})" if spec.aliases else ""))
    for peer_id, name in PEERS.items():
        print(f"{peer_id:24} {name} (peer)")
    return 0
