"""The `specatlas` command. Each subcommand lives in its own module, imported only when used,
so `specatlas validate` never pays for importing torch. Commands never import one another: what
they share (errors, argument checks and bounds) lives here."""

from __future__ import annotations

import argparse
import difflib
import importlib
import math
import re
import sys
from pathlib import Path

# name -> (module, one-line help). A module defines configure(parser) and execute(args) -> int.
COMMANDS: dict[str, tuple[str, str]] = {
    "validate": ("specatlas.catalog.validate_command", "check paper records (file:line: field: problem)"),
    "new": ("specatlas.catalog.scaffold", "scaffold a new paper record (--arxiv / --doi fill the facts from the web)"),
    "freshness": ("specatlas.catalog.freshness", "recent arXiv papers matching the field's queries that the catalog lacks"),
    "check-links": ("specatlas.catalog.links", "check that every url, pdf, code and links URL still answers"),
    "schema": ("specatlas.catalog.schema_export", "write the JSON Schema of paper records"),
    "site": ("specatlas.site.build", "build (or serve) the website from the catalog"),
    "bib": ("specatlas.bib", "write the catalog as BibTeX (papers.bib)"),
    "stats": ("specatlas.catalog.stats", "coverage of the catalog: counts per node, year, venue"),
    "recall": ("specatlas.catalog.recall", "the catalog's recall per quarter, by capture-recapture of two blind sweeps"),
    "audit": ("specatlas.catalog.audit", "draw records for a blind audit, reproducibly (--seed N --count 30)"),
    "list-coverage": ("specatlas.catalog.paperlist", "check that every row of a public paper list (--list PATH) has a record or a reasoned exclusion"),
    "bench": ("specatlas.bench.run", "measure methods against the baseline; results go to results/"),
    "leaderboard": ("specatlas.bench.leaderboard", "render results/ as the leaderboard page (or check it)"),
    "results": ("specatlas.bench.check", "check result files from any machine (provenance, lossless checks, numbers); backfill older runs' weights"),
    "run": ("specatlas.run_command", "run a method by paper id or alias"),
    "advise": ("specatlas.advise", "which method is fastest for your prompts on this machine, measured in a few minutes"),
    "gpu-check": ("specatlas.gpu_check", "every method on an accelerator against plain decoding, then a small bench slice checked for the leaderboard"),
    "calibrate": ("specatlas.calibrate", "cost of one target forward by new tokens on this machine, and its kernels"),
    "datastore": ("specatlas.datastore", "build a REST/SAM datastore from a text or JSONL corpus"),
    "train": ("specatlas.train", "train a draft head (Medusa, EAGLE) on the target's own answers"),
    "train-data": ("specatlas.train_data", "build the self-distilled data heads train on (the target's answers)"),
    "train-curve": ("specatlas.train_curve", "held-out acceptance of a head family against training data size"),
    "train-eval": ("specatlas.train_eval", "held-out acceptance of the shipped heads' methods at their papers' settings"),
}


class CommandError(Exception):
    """A command refusing or failing cleanly: `main` prints `specatlas COMMAND: message` and exits
    with `status` (2: bad input, 1: the work itself failed), never a traceback."""

    def __init__(self, message: str, status: int = 2):
        super().__init__(message)
        self.status = status


# Characters a terminal acts on instead of showing: C0 and C1 controls (ESC starts the sequences
# that move the cursor or write the clipboard, OSC 52) and the bidirectional overrides that make
# text read differently from what it is.
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """`text` safe to echo to a terminal: every control character but newline and tab shown as its
    escape (`\x1b`), so text from a file or a model cannot drive the terminal."""
    return _CONTROLS.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def disk_error(exc: OSError) -> str:
    """A resumable job's OSError (a full disk, above all) as its one line: every file it writes is
    replaced whole or appended line by line, so what it wrote before stays usable."""
    where = f"{exc.filename}: " if exc.filename else ""
    return f"{where}{exc.strerror or exc}; what was written before is intact and a rerun resumes from it"


def add_trust_remote_code(parser: argparse.ArgumentParser) -> None:
    """The one switch that lets a model folder's own Python code run (config.json `auto_map`)."""
    parser.add_argument("--trust-remote-code", action="store_true",
                        help="allow a --model whose config asks to run its own code (auto_map); off by default, "
                             "because that code runs with your rights")


# Bounds shared by commands, beyond which a value is a typo or an attack: torch's seeds are 64-bit;
# a million new tokens, a year of training, a billion steps, 10^15 answer tokens, 10,000 epochs.
MAX_SEED = 2**63 - 1
MAX_NEW_TOKENS = 1_000_000
MAX_MINUTES, MAX_STEPS, MAX_TOKENS, MAX_EPOCHS = 525_600.0, 10**9, 10**15, 10_000.0


def epochs_given(args: argparse.Namespace) -> float | int | None:
    """`--epochs` of a command that also takes `--steps` (train, train-curve): both set the schedule,
    so both given is a one-line error. A whole number stays whole: a card's command says `--epochs 2`."""
    if args.epochs is not None and args.steps is not None:
        raise CommandError("--epochs and --steps both set the schedule: give one")
    return None if args.epochs is None else int(args.epochs) if args.epochs.is_integer() else args.epochs


def number(kind: type, low: float, high: float, above: bool = False):
    """An argparse type: a finite `kind` (int or float) from `low` (excluded when `above`) to `high`.
    A nan budget, a negative count or a seed torch cannot take is refused in one line when the
    command line is parsed, before anything loads."""
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a {'whole ' if kind is int else ''}number: {text[:40]!r}") from None
        if not (math.isfinite(value) and (low < value if above else low <= value) and value <= high):
            raise argparse.ArgumentTypeError(f"must be {'above' if above else 'at least'} {low:,} and at most "
                                             f"{high:,}, got {text[:40]}")
        return value
    parse.__name__ = "whole number" if kind is int else "number"
    return parse


# Decoding settings (run, bench, advise): a temperature of 100 is already all but uniform; no
# vocabulary is larger than a million tokens.
MAX_TEMPERATURE, MAX_TOP_K = 100.0, 1_000_000


def number_problem(max_new_tokens: int, temperature: float, seed: int, top_p: float = 1.0, top_k: int = 0) -> str | None:
    """The first out-of-range decoding setting, as a message; None when all are usable."""
    if not 1 <= max_new_tokens <= MAX_NEW_TOKENS:
        return f"--max-new-tokens must be at least 1 and at most {MAX_NEW_TOKENS:,}, got {max_new_tokens}"
    if not (math.isfinite(temperature) and 0 <= temperature <= MAX_TEMPERATURE):
        return f"--temperature must be >= 0 and at most {MAX_TEMPERATURE:g} (0 decodes greedily), got {temperature}"
    if not (math.isfinite(top_p) and 0 < top_p <= 1):
        return f"--top-p must be in (0, 1], got {top_p}"
    if not 0 <= seed <= MAX_SEED:
        return f"--seed must be in 0..2**63-1, got {seed}"
    if not 0 <= top_k <= MAX_TOP_K:
        return f"--top-k must be in 0..{MAX_TOP_K:,} (0: no limit), got {top_k}"
    return None


TRAINING_DATA = "training-data"  # what `--datastore` calls the datastore `specatlas datastore build --training-data` writes


def add_datastore_option(parser: argparse.ArgumentParser) -> None:
    """`--datastore` of run and bench (`specatlas.data_shards.chosen_datastore` finds the file)."""
    parser.add_argument("--datastore", metavar="PATH|training-data",
                        type=lambda text: text if text == TRAINING_DATA else Path(text),
                        help="REST's datastore and SAM-Decoding's static index: a .npz from `specatlas datastore build`, "
                             f"or '{TRAINING_DATA}' for the one `specatlas datastore build --training-data` writes "
                             "(default: the one shipped for the embedded model)")


def results_folder(out: Path | None) -> Path:
    """Where a bench writes (bench, gpu-check), `out` or results/: a WriteError, before anything
    loads, when it is no place for the bench's files (`fsutil.output_place`) or cannot be written."""
    from specatlas.fsutil import output_place, writable_dir
    from specatlas.paths import repo_root

    default = repo_root() / "results"
    return writable_dir(output_place(out or default, "results", allowed=default), "results folder")


def chosen_methods(names: list[str], everything: bool, peers: bool) -> tuple[list[str], list[str]]:
    """The methods named on the command line (bench, advise): (registry ids with the baseline first,
    peer ids), or a CommandError naming the closest ids."""
    from specatlas.bench.contenders import PEERS
    from specatlas.bench.results import BASELINE
    from specatlas.impls.registry import all_names, implemented_ids, resolve

    if not names and not everything:
        raise CommandError("name methods to measure, or --all (specatlas bench --list shows the ids)")
    methods, peer_ids = [BASELINE], []
    if everything:
        methods += implemented_ids()
        peer_ids += list(PEERS) if peers else []
    for name in names:
        spec = resolve(name)
        if spec:
            methods.append(spec.id)
        elif name.strip().lower() in PEERS:
            peer_ids.append(name.strip().lower())
        else:
            close = difflib.get_close_matches(name.strip().lower(), [*all_names(), *PEERS], n=3, cutoff=0.5)
            hint = f"; did you mean {' or '.join(close)}?" if close else "; specatlas bench --list shows the ids"
            raise CommandError(f"unknown method {name!r}{hint}")
    return list(dict.fromkeys(methods)), list(dict.fromkeys(peer_ids))


def draft_length_policies(draft_length: str) -> list:
    """`--draft-length` (bench, advise): the `DraftLengthPolicy`s each method runs under; 'both' is
    the paper's settings and the cost-aware policy."""
    from specatlas.impls.engine.draft_length import CHOICES, DraftLengthPolicy

    if draft_length == "both":
        return [DraftLengthPolicy.paper(), DraftLengthPolicy.cost_aware()]
    try:
        return [DraftLengthPolicy.parse(draft_length)]
    except ValueError:
        raise CommandError(f"--draft-length must be 'both', {CHOICES}, got {draft_length[:40]!r}") from None


def build_parser(argv: list[str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="specatlas",
        description="SpecAtlas: the reference knowledge base for speculative decoding.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    chosen = argv[0] if argv else None
    for name, (module_name, help_text) in COMMANDS.items():
        command = sub.add_parser(name, help=help_text, description=help_text)
        command.set_defaults(_module=module_name)
        if name == chosen:  # only the chosen command's module is imported
            importlib.import_module(module_name).configure(command)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(argv).parse_args(argv)
    try:
        return int(importlib.import_module(args._module).execute(args) or 0)
    except CommandError as exc:
        print(f"specatlas {args.command}: {printable(str(exc))}", file=sys.stderr)
        return exc.status
    except KeyboardInterrupt:
        print("specatlas: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
