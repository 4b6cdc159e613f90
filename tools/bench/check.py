"""`specatlas results check FILE...`: is a result file fit for the leaderboard, whichever machine
wrote it? It applies the leaderboard's own validator (`specatlas.bench.validate_results`, which
lists what a file must be), each file judged with the other result files of its folder.

Each problem is one line, `FILE: problem`; a passing file's line says `ok`, and what could not be
checked there (git history). The exit status is 0 when every file passes, else 1.
Given results/provenance/weights-of-earlier-runs.json, it checks that file instead (`earlier_weights.problems`).

`specatlas results backfill-weights` writes that file: the trained weights of result files written
before they recorded them, from git (`specatlas.bench.earlier_weights`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from specatlas.bench import earlier_weights
from specatlas.bench.provenance import GitError
from specatlas.bench.validate_results import check_files
from specatlas.cli import CommandError
from specatlas.fsutil import WriteError
from specatlas.paths import repo_root

MAX_PROBLEMS = 20  # per file: an edited file can be wrong in thousands of places


def check(path: Path) -> list[str]:
    """The problems of one result file, or of the weights of earlier runs; empty when fit for the leaderboard."""
    return _checked([path])[path][0]


def _checked(paths: list[Path]) -> dict[Path, tuple[list[str], list[str]]]:
    """Each path -> (its problems, what could not be checked)."""
    out = {path: (earlier_weights.problems(path), []) for path in paths if earlier_weights.is_earlier_weights_file(path)}
    results = [path for path in paths if path not in out]
    out.update((path, (verdict.problems, notes)) for path, (verdict, notes) in check_files(results).items())
    return out


# Command ---------------------------------------------------------------------------------------

def configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    checker = sub.add_parser("check", help="check result files written by `specatlas bench` on any machine",
                             description=__doc__.split("\n\n")[0])
    checker.add_argument("files", nargs="+", type=Path, metavar="FILE", help="result files (results/*.json)")
    backfill = sub.add_parser(
        "backfill-weights", help=f"write results/{earlier_weights.PLACE.as_posix()}: from git, the trained weights of result "
        "files written before they recorded them",
        description=f"For each result file whose methods do not record their trained weights, derive them once from "
        "git (each shipped head a method's setup names, as committed at the commit its sessions ran) and write them "
        f"to results/{earlier_weights.PLACE.as_posix()}, which the leaderboard reads instead of git. Entries already there "
        "are kept; those of result files no longer there are dropped.")
    backfill.add_argument("--results", type=Path, default=None, help="results folder (default: results/ in the repository)")


def execute(args: argparse.Namespace) -> int:
    if args.action == "backfill-weights":
        return _backfill(args.results or repo_root() / "results")
    failed = 0
    checked = _checked(args.files)
    for path in args.files:
        problems, notes = checked[path]
        if problems:
            failed += 1
            for problem in problems[:MAX_PROBLEMS]:
                print(_one_line(f"{path}: {problem}"), file=sys.stderr)
            if len(problems) > MAX_PROBLEMS:
                print(f"{path}: ... and {len(problems) - MAX_PROBLEMS} more problems", file=sys.stderr)
        else:
            print(_one_line(f"{path}: ok" + "".join(f"; {note}" for note in notes)))
    return 1 if failed else 0


def _backfill(folder: Path) -> int:
    if not folder.is_dir():
        raise CommandError(f"no results folder at {folder}")
    try:
        path, added, dropped = earlier_weights.backfill(folder)
    except (ValueError, GitError, WriteError) as exc:
        raise CommandError(str(exc), status=1) from None
    for name in added:
        print(_one_line(f"{path}: added {name}"))
    for name in dropped:
        print(_one_line(f"{path}: dropped {name} (no such result file)"))
    if not added and not dropped:
        print(f"{path}: up to date")
    return 0


def _one_line(text: str) -> str:
    """Ids and names come from the file: a newline in one must not start a line of its own."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
