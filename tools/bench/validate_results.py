"""Whether a result file may count: the one validator behind `specatlas results check` and the
leaderboard, so that the page never ranks what the check refuses, nor the check passes what the
page leaves out.

A file passes when it loads (`result_files.load`: a bounded size and nesting, the schema, its config
hash, and a summary equal, within rounding, to the one recomputed from its own samples) and:

- its name is plain (letters, digits, '.', '_', '+', '-'), and it is a file, not a link;
- its provenance is complete and consistent: `REQUIRED` lists every field; the versions, threads
  and accelerator it records agree between config and provenance, and a CPU run's processor is
  not an accelerator's name;
- every session names the commit it ran and whether the checkout was dirty; where the results
  folder is in a full git checkout, that commit is in its history and the session started after
  it; no date is after now, and no session finishes before it starts;
- its samples are the ones configured: known methods and distinct questions, each measured, every
  question and repeat of every method that ran, the sessions' units adding up to the samples, no turn longer than max_new_tokens, token ids within a vocabulary;
- its cost curve is plausible: no forward cheaper than half a one-token forward, none dearer than
  two one-token forwards per token, and a one-token forward within the baseline's step times;
- every method row that ran has its lossless check, a lossless claim is checked against the file's
  own baseline, and under greedy decoding a method that claims to be lossless matched it.

Across the files of one folder, taken in name order: a run whose samples are another file's
(the same tokens and timings to the last digit) is that run copied and counts once, and a method
id names one method (the name the first file gives it).
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from functools import lru_cache
from pathlib import Path

from specatlas.bench.provenance import COMMIT
from specatlas.bench.result_files import load
from specatlas.bench.results import BASELINE, SHA256_HEX, Run, divergence, forward_cost, references, row_name
from specatlas.impls.engine.head_folders import SHIPPED_HEADS

SHA256 = re.compile(SHA256_HEX)
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,199}\.json$")
# No public model's vocabulary reaches 2^18 tokens (Gemma 3's, among the largest, has 262,144).
MAX_VOCABULARY = 1 << 18
# Clocks of the machine that ran and of the one that checks may disagree by this much.
CLOCK_SKEW = timedelta(hours=1)
# A forward over w tokens costs at least this share of a one-token forward, and at most this many
# one-token forwards per token; a one-token forward costs at most this many baseline steps (it is
# part of one), and at least this share of one.
CURVE_FLOOR, CURVE_CEILING_PER_TOKEN, STEP_CEILING, STEP_FLOOR = 0.5, 2.0, 2.0, 0.01
# Accelerator names a CPU string must not hold (a CPU run labelled as a GPU's).
ACCELERATOR = re.compile(r"\b(nvidia|geforce|quadro|tesla|rtx|gtx|radeon|instinct|gpu|cuda|tpu|[ahlv]\d{2,3}|mi\d{3}|l40s?)\b",
                         re.IGNORECASE)
DEVICE = re.compile(r"^(cpu|mps|(cuda|xpu)(:\d{1,2})?)$")

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


@dataclass
class Verdict:
    """One result file: its run when it may count, else the problems, each one line."""

    run: Run | None
    problems: list[str] = field(default_factory=list)


@dataclass
class Folder:
    """The verdicts on a folder's result files, and what could not be checked there (one line each)."""

    verdicts: dict[Path, Verdict]
    notes: list[str]


def result_files(folder: Path) -> list[Path]:
    """The files of `folder` that the leaderboard reads as result files."""
    return sorted(p for p in folder.glob("*.json") if not p.name.startswith("."))


def check_folder(folder: Path, extra: tuple[Path, ...] = ()) -> Folder:
    """The verdict on each result file of `folder` (and on `extra`, files of it given by name)."""
    history = History.of(folder)
    paths = sorted({*result_files(folder), *extra}, key=lambda p: p.name)
    verdicts = {path: Verdict(*file_problems(path, history)) for path in paths}
    _across_files(verdicts)
    return Folder(verdicts, history.notes)


def check_files(paths: list[Path]) -> dict[Path, tuple[Verdict, list[str]]]:
    """Each of `paths` judged with the other result files of its folder, as the leaderboard judges them."""
    folders: dict[Path, list[Path]] = {}
    for path in paths:
        folders.setdefault(path.absolute().parent, []).append(path.absolute())
    out = {}
    for folder, members in folders.items():
        judged = check_folder(folder, tuple(members))
        for path in paths:
            if path.absolute() in judged.verdicts:
                out[path] = (judged.verdicts[path.absolute()], judged.notes)
    return out


def file_problems(path: Path, history: History) -> tuple[Run | None, list[str]]:
    """(its run, []) when one result file may count on its own, else (None, its problems)."""
    if path.is_symlink():
        return None, ["a link, not a result file: each run counts once, from its own file"]
    try:
        run = load(path)
    except ValueError as exc:
        return None, [str(exc)]
    if not NAME.match(path.name):  # it reaches pages, links and terminals
        return None, ["its name may hold only letters, digits, '.', '_', '+' and '-', and end in .json; rename it"]
    problems = [*provenance_problems(run), *session_problems(run, history), *sample_problems(run),
                *token_problems(run), *curve_problems(run), *lossless_problems(run)]
    return (None, problems) if problems else (run, [])


# One file --------------------------------------------------------------------------------------

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
    return out + device_problems(run)


def device_problems(run: Run) -> list[str]:
    """The device class must be what the hardware strings say: a GPU named for a GPU run only."""
    device, hardware = run.config["device"], run.provenance["hardware"]
    if not DEVICE.match(device):
        return [f"config.device {device!r} is not a torch device (cpu, cuda, cuda:N, mps, xpu)"]
    on_gpu = device.startswith("cuda")
    if on_gpu != (hardware.get("gpu") is not None):
        return [f"provenance.hardware.gpu ({hardware.get('gpu')}) does not fit device {device}"]
    if not on_gpu and ACCELERATOR.search(hardware["cpu"]):
        return [f"provenance.hardware.cpu ({hardware['cpu']}) names an accelerator, but the run's device is {device}"]
    return []


def _when(text: str, where: str) -> tuple[datetime | None, str | None]:
    """(the time `text` says, None) or (None, why it says none)."""
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return None, f"{where} ({text}) is not an ISO 8601 time"
    if when.tzinfo is None:
        return None, f"{where} ({text}) has no time zone"
    return when, None


def session_problems(run: Run, history: History) -> list[str]:
    out = []
    now = datetime.now(timezone.utc) + CLOCK_SKEW
    started, problem = _when(run.provenance["started"], "provenance.started")
    if problem or started > now:
        out.append(problem or f"provenance.started ({run.provenance['started']}) is in the future")
    for number, session in enumerate(run.sessions):
        where = f"sessions[{number}]"
        if not COMMIT.match(session.git_commit or ""):
            out.append(f"session {number + 1} does not name the commit it ran (git_commit)")
        if session.git_dirty is None:
            out.append(f"session {number + 1} does not say whether the checkout was dirty (git_dirty)")
        began, problem = _when(session.started, f"{where}.started")
        ended, late = _when(session.finished, f"{where}.finished") if session.finished is not None else (None, None)
        out += [p for p in (problem, late) if p]
        if began and began > now or ended and ended > now:
            out.append(f"{where} is dated in the future ({session.finished if ended and ended > now else session.started})")
        elif began and ended and ended < began:
            out.append(f"{where}.finished ({session.finished}) is before its start ({session.started})")
        if began and COMMIT.match(session.git_commit or ""):
            out += [f"{where}.git_commit: {p}" for p in history.problems(session.git_commit, began)]
    units = sum(s.units for s in run.sessions)
    if units != len(run.samples):
        out.append(f"sessions[].units add up to {units}, but the file holds {len(run.samples)} samples")
    return out


def sample_problems(run: Run) -> list[str]:
    config = run.config
    methods = {m.id: m for m in run.methods}
    questions = set(config["question_ids"])
    out = [] if BASELINE in methods else [f"no {BASELINE} method: speedups have nothing to be measured against"]
    if len(questions) != len(config["question_ids"]):
        out.append(f"config.question_ids lists {len(config['question_ids'])} ids but {len(questions)} distinct questions")
    if len(methods) != len(run.methods):
        out.append(f"methods lists {len(run.methods)} rows but {len(methods)} distinct ids: one id, one row")
    outputs = [t.tokens for s in run.samples if s.method == BASELINE for t in s.turns]
    if outputs and not any(outputs):
        out.append(f"the {BASELINE} produced no tokens: no speedup can be measured over it")
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
    asked = {s.question_id for s in run.samples}
    if len(asked & questions) != len(questions):
        out.append(f"config.question_ids lists {len(questions):,} questions, but the samples measure "
                   f"{len(asked & questions):,} of them: the table would claim a sample it does not hold")
    expected = {(q, r) for q in questions for r in range(config["repeats"])}
    for method in run.methods:
        missing = expected - measured.get(method.id, set())
        if missing and method.error is None:
            out.append(f"method {method.id}: {len(missing)} of {len(expected)} (question, repeat) units have no sample "
                       "and no error says why")
    return out


def token_problems(run: Run) -> list[str]:
    """Token ids are indices into the target's vocabulary: none negative, none beyond it."""
    vocabulary = vocabulary_size(run.config["model"]["target"])
    bound = vocabulary or MAX_VOCABULARY
    for number, sample in enumerate(run.samples):
        for turn_number, turn in enumerate(sample.turns):
            bad = next((t for t in turn.tokens if not 0 <= t < bound), None)
            if bad is not None:
                of = (f"{run.config['model']['target']}'s vocabulary of {vocabulary:,}" if vocabulary
                      else f"any model's vocabulary ({MAX_VOCABULARY:,})")
                return [f"samples[{number}].turns[{turn_number}].tokens: token id {bad} is outside {of}"]
    return []


@lru_cache(maxsize=None)
def vocabulary_size(target: str) -> int | None:
    """The vocabulary of `target` as the heads shipped for it record it (their config's vocab_size); None if none does."""
    sizes = set()
    for config in SHIPPED_HEADS.glob("*/config.json"):
        if config.parent.name.startswith(f"{target}-"):
            try:
                size = json.loads(config.read_text(encoding="utf-8")).get("vocab_size")
            except (OSError, ValueError, AttributeError):
                continue
            if isinstance(size, int) and not isinstance(size, bool):
                sizes.add(size)
    return max(sizes) if sizes else None


def curve_problems(run: Run) -> list[str]:
    """Bounds on the cost curve, relative to its one-token forward and to the baseline's measured
    steps: a curve that prices wide forwards at next to nothing would inflate every predicted speedup."""
    curve, one = run.cost_curve, forward_cost(run.cost_curve, 1)
    for width, seconds in sorted(curve.items()):
        if seconds < CURVE_FLOOR * one or seconds > CURVE_CEILING_PER_TOKEN * width * one:
            return [f"cost_curve.{width}: {seconds:g} s for a {width}-token forward against {one:g} s for one token; a "
                    f"forward costs between {CURVE_FLOOR:g}x and {CURVE_CEILING_PER_TOKEN:g}x per token a one-token one"]
    turns = [t for s in run.samples if s.method == BASELINE for t in s.turns]
    steps = sum(t.steps for t in turns)
    if steps:
        step = sum(t.wall_seconds for t in turns) / steps
        if not STEP_FLOOR * step <= one <= STEP_CEILING * step:
            return [f"cost_curve: a one-token forward at {one:g} s, but the baseline's steps take {step:g} s each; "
                    f"it must lie between {STEP_FLOOR:g}x and {STEP_CEILING:g}x a step"]
    return []


def lossless_problems(run: Run) -> list[str]:
    greedy = run.config["temperature"] == 0
    sampled = {s.method for s in run.samples}
    ids = {m.id for m in run.methods}
    out = []
    for number, method in enumerate(run.methods):
        if method.relative_to is not None and method.relative_to not in ids:
            out.append(f"methods[{number}].relative_to: {method.relative_to} is not a row of this file")
            continue
        if method.lossless and references(method)[1] != BASELINE:
            out.append(f"methods[{number}] ({method.id}) claims to be lossless against "
                       f"{row_name(references(method)[1])}, not this file's {BASELINE}")
        if method.error is not None or method.id not in sampled:
            continue  # its row says why it could not run; missing samples are named by sample_problems
        check = run.summary.get(method.id, {}).get("lossless")
        if check is None:
            out.append(f"method {method.id}: no lossless check (no sample shares a question with "
                       f"{' and '.join(map(row_name, dict.fromkeys(references(method))))})")
        elif greedy and method.lossless and check["status"] != "pass":
            out.append(f"method {method.id}: claims to be lossless but {divergence(method, check)}")
    return out


# Git -------------------------------------------------------------------------------------------

class History:
    """The git history of the checkout a results folder is in, when git can read a full one."""

    def __init__(self, top: Path | None, notes: list[str]):
        self.top, self.notes = top, notes

    @classmethod
    def of(cls, folder: Path) -> History:
        top = _git(folder, "rev-parse", "--show-toplevel")
        if top is None:
            return cls(None, [f"session commits not checked against git: {folder} is not in a git checkout "
                              "(or git is not installed)"])
        if _git(folder, "rev-parse", "--is-shallow-repository") == "true":
            return cls(None, [f"session commits not checked against git: {top} is a shallow clone"])
        return cls(Path(top), [])

    def problems(self, commit: str, started: datetime) -> list[str]:
        if self.top is None:
            return []
        date = _commit_date(self.top, commit)
        if date is None:
            return [f"{commit} is not in the history of the git checkout at {self.top}"]
        if started < date - CLOCK_SKEW:
            return [f"the session started {started.isoformat()}, before its commit was made ({date.isoformat()})"]
        return []


def _git(where: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(where), *args], capture_output=True, timeout=30, text=True)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


@lru_cache(maxsize=None)
def _commit_date(top: Path, commit: str) -> datetime | None:
    """When `commit` (40 hex digits, never an option) was committed, or None where it is not in the checkout."""
    text = _git(top, "show", "-s", "--format=%cI", f"{commit}^{{commit}}", "--")
    try:
        return datetime.fromisoformat(text) if text else None
    except ValueError:
        return None


# Across files ----------------------------------------------------------------------------------

def _across_files(verdicts: dict[Path, Verdict]) -> None:
    """In name order: a copy of a run read before counts once; a method id keeps the first file's name."""
    contents: dict[str, str] = {}
    measurements: dict[str, str] = {}
    names: dict[str, tuple[str, str]] = {}
    for path, verdict in verdicts.items():
        if verdict.run is None:
            continue
        problem = _copy_of(verdict.run, path.name, contents, measurements) or _renamed(verdict.run, names)
        if problem:
            verdict.run, verdict.problems = None, [problem]
            continue
        for method in verdict.run.methods:
            names.setdefault(method.id, (method.name, path.name))


def _copy_of(run: Run, name: str, contents: dict[str, str], measurements: dict[str, str]) -> str | None:
    identity = run.model_dump_json()  # its content, whatever the file's formatting
    if identity in contents:
        return f"the same run as {contents[identity]}: counted once"
    digest = _measurements(run)
    if digest in measurements:
        return (f"samples: the same run as {measurements[digest]} (the same tokens and timings to the last digit, "
                "under other provenance): a copy of a run counts once")
    contents[identity], measurements[digest] = name, name
    return None


def _measurements(run: Run) -> str:
    """What no second run reproduces: its samples' tokens and clock readings, exactly, in any order."""
    samples = sorted(json.dumps([s.method, s.question_id, s.repeat, [[t.tokens, t.wall_seconds, t.draft_seconds,
                                 t.verify_seconds, t.forward_seconds] for t in s.turns]]) for s in run.samples)
    return hashlib.sha256("\n".join(samples).encode()).hexdigest()


def _renamed(run: Run, names: dict[str, tuple[str, str]]) -> str | None:
    for number, method in enumerate(run.methods):
        known = names.get(method.id)
        if known and known[0] != method.name:
            return (f"methods[{number}].name: id {method.id} is named {method.name!r} here but {known[0]!r} in "
                    f"{known[1]}: one id, one method")
    return None
