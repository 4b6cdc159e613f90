"""`specatlas leaderboard`: writes results/LEADERBOARD.md from the result files (or checks it), prints
the full page, one run's speed targets, or the fastest lossless method measured here.

The rows are `specatlas.bench.aggregate`'s, the page `specatlas.bench.leaderboard_page`'s, the
targets `specatlas.bench.targets`'.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from specatlas.bench.aggregate import load_all
from specatlas.bench.leaderboard_page import PAGE_FILE, PAGE_START, measured_markdown, render_markdown
from specatlas.bench.measured import fastest_here
from specatlas.bench.provenance import label
from specatlas.bench.published import PublishedDataError
from specatlas.bench.result_files import write_atomic
from specatlas.bench.targets import targets_markdown
from specatlas.bench.validate_results import History, check_files
from specatlas.fsutil import WriteError, output_file, output_place, starts_with
from specatlas.impls.engine.draft_length import PAPER as PAPER_POLICY
from specatlas.paths import repo_root

def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--results", type=Path, default=None, help="results folder (default: results/ in the repository)")
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--check", action="store_true",
                        help=f"exit 1 if results/{PAGE_FILE} differs from what the result files say")
    action.add_argument("--print", action="store_true", help="print the full page (with reported numbers) instead")
    action.add_argument("--targets", type=Path, metavar="RESULT",
                        help="print, as Markdown, the speed targets (best lossless speedup, tuned rows per category, "
                             "8-token forward cost, per-step overhead, peers) measured on one result file")
    action.add_argument("--fastest", action="store_true",
                        help="print, as `specatlas run` arguments, the lossless method measured fastest on the embedded "
                             "model on this hardware (else on any, said so on stderr); exit 1 when none is (make demo)")


def execute(args: argparse.Namespace) -> int:
    if args.targets:
        verdict, _ = check_files([args.targets])[args.targets]
        if verdict.run is None:  # the file the leaderboard would refuse: what `results check` says first
            print(f"specatlas leaderboard: {args.targets}: {verdict.problems[0]}", file=sys.stderr)
            return 1
        run = verdict.run
        sys.stdout.write(targets_markdown(run, args.targets.name) + "\n")
        return 0
    results_dir = args.results or repo_root() / "results"
    if not results_dir.is_dir():
        print(f"specatlas leaderboard: no results folder at {results_dir}", file=sys.stderr)
        return 2
    if args.fastest:
        return _print_fastest(results_dir)
    if args.print:
        try:
            page = render_markdown(results_dir)
        except PublishedDataError as exc:
            print(f"specatlas leaderboard: {exc}", file=sys.stderr)
            return 1
        sys.stdout.write(page + "\n")
        return 0
    page, expected = results_dir / PAGE_FILE, measured_markdown(results_dir) + "\n"
    if args.check:
        if page.is_file() and page.read_text(encoding="utf-8") == expected:
            return 0
        print(f"specatlas leaderboard: {page} is out of date; run `specatlas leaderboard`", file=sys.stderr)
        return 1
    default = repo_root() / "results"
    try:  # the page goes into a results folder, never the checkout or a record folder, over its own only
        output_place(results_dir, "the leaderboard", allowed=default)
        write_atomic(output_file(page, "the leaderboard", starts_with(PAGE_START), allowed=default), expected)
    except WriteError as exc:
        print(f"specatlas leaderboard: {exc}", file=sys.stderr)
        return 1
    _, failed = load_all(results_dir)
    for name, why in failed:
        print(f"{results_dir / name}: {why}", file=sys.stderr)
    for note in History.of(results_dir).notes:  # what the validator could not check there
        print(f"{results_dir}: {note}", file=sys.stderr)
    print(f"leaderboard written to {page}")
    return 0


def _print_fastest(results_dir: Path) -> int:
    from specatlas.bench.provenance import hardware
    from specatlas.impls.engine.models import EMBEDDED, pick_device

    device = pick_device()
    found = fastest_here(results_dir, label(hardware(device)), device.type, EMBEDDED)
    if found is None:
        print(f"specatlas leaderboard: no result in {results_dir} ranks a lossless method on {EMBEDDED} on {device.type}",
              file=sys.stderr)
        return 1
    row, here = found
    where = "this hardware" if here else f"{row.hardware}, not this machine (no result was measured here)"
    print(f"specatlas leaderboard: the fastest lossless method measured on {where}: {row.method_id} ({row.policy}), "
          f"{row.speedup:.2f}× on {row.table.prompt_set}, {row.table.sample_size}", file=sys.stderr)
    print(row.method_id + (f" --draft-length {row.policy}" if row.policy != PAPER_POLICY else ""))
    return 0
