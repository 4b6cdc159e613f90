"""`specatlas results check FILE...`: is a result file fit for the leaderboard, whichever machine
wrote it?

A file passes when it loads (`specatlas.bench.results.load`: the schema, its config hash, and a
summary equal, within rounding, to the one recomputed from its own samples) and, beyond that:

- its provenance is complete and consistent: `REQUIRED` lists every field, and the versions,
  threads and accelerator it records agree between config and provenance;
- every session names the commit it ran (40 hex digits) and whether the checkout was dirty;
- its samples are the ones configured: known methods and questions, every question and repeat of
  every method that ran, no turn longer than max_new_tokens;
- every method row that ran has its lossless check, and under greedy decoding a method that
  claims to be lossless matched the baseline (or the row it is measured against) token for token.

Each problem is one line, `FILE: problem`; the exit status is 0 when every file passes, else 1.
Given results/provenance/weights-of-earlier-runs.json, it checks that file instead (`earlier_weights.problems`).

`specatlas results backfill-weights` writes that file: the trained weights of result files written
before they recorded them, from git (`specatlas.bench.earlier_weights`).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from specatlas.bench import earlier_weights
from specatlas.bench.provenance import COMMIT, GitError
from specatlas.bench.results import BASELINE, SHA256_HEX, Run, divergence, load, references, row_name
from specatlas.cli import CommandError
from specatlas.fsutil import WriteError
from specatlas.paths import repo_root

SHA256 = re.compile(SHA256_HEX)
MAX_PROBLEMS = 20  # per file: an edited file can be wrong in thousands of places

# (section, dotted path, expected type, what it records). `null` is accepted only for
# hardware.gpu (a CPU run has none) and model.drafter (a method may need no draft model).
REQUIRED = (
    ("config", "methods", list, "the methods measured"),
    ("config", "prompt_set.id", str, "the prompt set's name"),
    ("config", "prompt_set.sha256", "sha256", "the prompt set's digest"),
    ("config", "question_ids", list, "the questions asked"),
    ("config", "model.target", str, "the target model"),
    ("config", "model.target_sha256", "sha256", "the target's weights digest"),
    ("config", "device", str, "the device"),
    ("config", "dtype", str, "the dtype"),
    ("config", "max_new_tokens", int, "the tokens per turn"),
    ("config", "repeats", int, "the repeats per question"),
    ("config", "temperature", (int, float), "the temperature"),
    ("config", "seed", int, "the seed"),
    ("config", "draft_length", (str, int), "the draft-length setting"),
    ("config", "torch_threads", int, "the torch threads"),
    ("config", "torch", str, "the torch version"),
    ("config", "transformers", str, "the transformers version"),
    ("provenance", "started", str, "the start time"),
    ("provenance", "packages.python", str, "the Python version"),
    ("provenance", "packages.torch", str, "the torch version"),
    ("provenance", "packages.transformers", str, "the transformers version"),
    ("provenance", "packages.specatlas", str, "the specatlas version"),
    ("provenance", "hardware.cpu", str, "the CPU"),
    ("provenance", "hardware.cores", int, "the usable cores"),
    ("provenance", "hardware.torch_threads", int, "the torch threads"),
    ("provenance", "hardware.platform", str, "the operating system"),
    ("provenance", "prompt_set_file", str, "the prompt file"),
    ("provenance", "arguments", dict, "the command's arguments"),
)
_MISSING = object()


def check(path: Path) -> list[str]:
    """The problems of one result file, or of the weights of earlier runs; empty when fit for the leaderboard."""
    if earlier_weights.is_earlier_weights_file(path):
        return earlier_weights.problems(path)
    try:
        run = load(path)
    except ValueError as exc:
        return [str(exc)]
    return [*provenance_problems(run), *session_problems(run), *sample_problems(run), *lossless_problems(run)]


def _get(data: object, dotted: str) -> object:
    for key in dotted.split("."):
        if not isinstance(data, dict) or key not in data:
            return _MISSING
        data = data[key]
    return data


def _fits(value: object, kind) -> bool:
    if kind == "sha256":
        return isinstance(value, str) and bool(SHA256.match(value))
    return isinstance(value, kind) and not isinstance(value, bool) and value not in ("", [])


def provenance_problems(run: Run) -> list[str]:
    sections = {"config": run.config, "provenance": run.provenance}
    out = []
    for section, dotted, kind, meaning in REQUIRED:
        value = _get(sections[section], dotted)
        if value is _MISSING or value is None:
            out.append(f"{section}.{dotted} is missing ({meaning})")
        elif not _fits(value, kind):
            expected = "a sha256 in hex" if kind == "sha256" else "a non-empty value of the right type"
            out.append(f"{section}.{dotted} should be {expected} ({meaning})")
    if run.config["model"].get("drafter") is not None and not _fits(run.config["model"].get("drafter_sha256"), "sha256"):
        out.append("config.model.drafter_sha256 is missing (the draft model's weights digest)")
    for config_key, recorded in (("torch", "packages.torch"), ("transformers", "packages.transformers"),
                                 ("torch_threads", "hardware.torch_threads")):
        value = _get(run.provenance, recorded)
        if value not in (_MISSING, None) and run.config.get(config_key) != value:  # a missing one is named above
            out.append(f"config.{config_key} and provenance.{recorded} differ")
    on_gpu = str(run.config["device"]).startswith("cuda")
    if on_gpu != (run.provenance["hardware"]["gpu"] is not None):
        out.append(f"provenance.hardware.gpu ({run.provenance['hardware']['gpu']}) does not fit device {run.config['device']}")
    return out


def session_problems(run: Run) -> list[str]:
    out = []
    for number, session in enumerate(run.sessions, 1):
        if not COMMIT.match(session.git_commit or ""):
            out.append(f"session {number} does not name the commit it ran (git_commit)")
        if session.git_dirty is None:
            out.append(f"session {number} does not say whether the checkout was dirty (git_dirty)")
    return out


def sample_problems(run: Run) -> list[str]:
    config = run.config
    methods = {m.id: m for m in run.methods}
    questions = set(config["question_ids"])
    out = [] if BASELINE in methods else [f"no {BASELINE} method: speedups have nothing to be measured against"]
    measured: dict[str, set] = {}
    for number, sample in enumerate(run.samples, 1):
        where = f"sample {number} ({sample.method}, question {sample.question_id}, repeat {sample.repeat})"
        if sample.method not in methods:
            out.append(f"{where}: method not among the file's methods")
        if sample.question_id not in questions:
            out.append(f"{where}: question not among config.question_ids")
        if sample.repeat >= config["repeats"]:
            out.append(f"{where}: repeat beyond config.repeats")
        if any(len(turn.tokens) > config["max_new_tokens"] for turn in sample.turns):
            out.append(f"{where}: a turn has more tokens than config.max_new_tokens")
        key = (sample.question_id, sample.repeat)
        if key in measured.setdefault(sample.method, set()):
            out.append(f"{where}: measured twice")
        measured[sample.method].add(key)
    expected = {(q, r) for q in questions for r in range(config["repeats"])}
    for method in run.methods:
        missing = expected - measured.get(method.id, set())
        if missing and method.error is None:
            out.append(f"method {method.id}: {len(missing)} of {len(expected)} (question, repeat) units have no "
                       "sample and no error says why")
    return out


def lossless_problems(run: Run) -> list[str]:
    greedy = run.config["temperature"] == 0
    sampled = {s.method for s in run.samples}
    out = []
    for method in run.methods:
        if method.error is not None or method.id not in sampled:
            continue  # its row says why it could not run; missing samples are named by sample_problems
        check = run.summary.get(method.id, {}).get("lossless")
        if check is None:
            out.append(f"method {method.id}: no lossless check (no sample shares a question with "
                       f"{' and '.join(map(row_name, dict.fromkeys(references(method))))})")
        elif greedy and method.lossless and check["status"] != "pass":
            out.append(f"method {method.id}: claims to be lossless but {divergence(method, check)}")
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
    for path in args.files:
        problems = check(path)
        if problems:
            failed += 1
            for problem in problems[:MAX_PROBLEMS]:
                print(_one_line(f"{path}: {problem}"), file=sys.stderr)
            if len(problems) > MAX_PROBLEMS:
                print(f"{path}: ... and {len(problems) - MAX_PROBLEMS} more problems", file=sys.stderr)
        else:
            print(_one_line(f"{path}: ok"))
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
