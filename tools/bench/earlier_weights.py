"""The trained weights of runs measured before result files recorded them:
results/provenance/weights-of-earlier-runs.json, written by `specatlas results backfill-weights`.

A method entry of a result file records the trained weights it ran (`results.Method.weights`);
files written before that lack the field. For those, the command derives the weights once from
git: each shipped head a row's setup names (`head_folders.shipped_in`), as committed at the
commit every session that measured ran, from clean checkouts only (`provenance.shipped_weights`).
What it derives is committed, so that the leaderboard reads it from the checkout alone and never
runs git: a checkout with a shallow history, or none, renders the same page (`aggregate.load_all`
fills each older row's weights from it, `fill`). It sits in a subfolder of the results folder, where
no listing of result files (`results/*.json`) meets it.

The file maps a result file's name to its methods that name shipped heads, each to
{head folder: sha256 of its weight file}, or null where git cannot tell (a dirty checkout,
sessions at commits whose weights differ, a head not in the commit): the leaderboard then
counts the row's weights as unknown, a version of its own.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from specatlas.bench.provenance import COMMIT, shipped_weights
from specatlas.bench.result_files import load, schema_error, write_atomic
from specatlas.bench.results import Run, Weights
from specatlas.fsutil import ReadError, WriteError, output_file, output_place, read_json, starts_with
from specatlas.impls.engine.head_folders import shipped_in
from specatlas.paths import repo_root

PLACE = Path("provenance", "weights-of-earlier-runs.json")  # under a results folder
COMMAND = "specatlas results backfill-weights"
DERIVED_FROM = ("git: for each method whose setup names shipped heads, the sha256 of each head's weight file as "
                "committed at the commit every session that measured ran, from clean checkouts only; null where git "
                "cannot tell (a dirty checkout, sessions at commits whose weights differ, a head not in the commit)")
START = '{\n "written_by": '  # how every file the command writes begins
MAX_BYTES = 16 << 20
Earlier = dict[str, dict[str, Weights | None]]  # result file name -> method id -> weights (None: unknown)


class EarlierWeights(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    written_by: Annotated[str, Field(min_length=1)]  # the command that wrote it
    derived_from: Annotated[str, Field(min_length=1)]  # from what, and how
    runs: dict[Annotated[str, Field(pattern=r"^[^/\\]+\.json$")], dict[Annotated[str, Field(min_length=1)], Weights | None]]


def read(path: Path) -> Earlier:
    """The weights in the file `path`; {} when there is none. A malformed file is a ValueError
    saying in one line which field and why."""
    if not path.exists():
        return {}
    try:
        data = read_json(path, MAX_BYTES)
    except ReadError as exc:
        raise ValueError(str(exc)) from None
    try:
        return EarlierWeights.model_validate(data).runs
    except ValidationError as exc:
        raise schema_error(exc, schema="its schema") from None


def fill(run: Run, methods: dict[str, Weights | None]) -> Run:
    """`run`, each method that records no weights given what `methods` (the file's entry for the run)
    holds for it; a recorded field is never replaced."""
    for method in run.methods:
        if method.weights is None:
            method.weights = methods.get(method.id)
    return run


def problems(path: Path) -> list[str]:
    """What `specatlas results check` reports for the file: its schema, and entries of result files
    that are no longer in the results folder it belongs to."""
    try:
        earlier = read(path)
    except ValueError as exc:
        return [str(exc)]
    return [f"runs.{name}: no such result file in its folder (`{COMMAND}` drops its entry)"
            for name in earlier if not (results_of(path) / name).is_file()]


def is_earlier_weights_file(path: Path) -> bool:
    """Whether `path` is in the place of the file (rather than a result file)."""
    return path.absolute().parts[-len(PLACE.parts):] == PLACE.parts


def results_of(path: Path) -> Path:
    """The results folder whose runs the file at `path` describes."""
    return path.absolute().parents[len(PLACE.parts) - 1]


def derive(run: Run) -> dict[str, Weights | None]:
    """Each method of `run` that records no weights and whose setup names shipped heads -> their
    weights at the commit every session that measured ran, None where git cannot tell; raises
    `provenance.GitError` where git cannot read such a commit."""
    sessions = [s for s in run.sessions if s.units] or run.sessions  # those that measured
    commits = {s.git_commit if s.git_dirty is False and COMMIT.match(s.git_commit or "") else None for s in sessions}
    out = {}
    for method in run.methods:
        heads = shipped_in(method.setup)
        if method.weights is None and heads:
            weights = {head: _at(commits, head) for head in heads}
            out[method.id] = None if None in weights.values() else weights
    return out


def _at(commits: set[str | None], head: str) -> str | None:
    """sha256 of the shipped `head`'s weight file at each of `commits` where all agree; None where they
    differ, one is unknown (None: a dirty or unnamed checkout) or the head is not in one."""
    if None in commits:
        return None
    digests = {shipped_weights(commit, head) for commit in commits}
    return digests.pop() if len(digests) == 1 else None


def backfill(folder: Path) -> tuple[Path, list[str], list[str]]:
    """Write the file for the result files in `folder`: an entry for each valid one with methods
    that record no weights and no entry yet; the entries of files no longer there dropped; every
    other entry kept as it is (a later checkout may not have the history it came from). Returns
    (the file, the names added, the names dropped); nothing is written when nothing changes.
    Raises ValueError (a malformed file), `provenance.GitError` or `fsutil.WriteError`, in one line."""
    path, default = folder / PLACE, repo_root() / "results"
    output_place(folder, "the weights of earlier runs", allowed=default)
    output_file(path, "the weights of earlier runs", starts_with(START), allowed=default)
    try:
        earlier = read(path)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
    names = {p.name for p in folder.glob("*.json")  # the files `aggregate.load_all` reads as runs
             if p.is_file() and not p.is_symlink() and not p.name.startswith(".")}
    kept = {name: methods for name, methods in earlier.items() if name in names}
    added = []
    for name in sorted(names - set(kept)):
        try:
            run = load(folder / name)
        except ValueError:
            continue  # not on the leaderboard: `specatlas results check` says why
        if any(method.weights is None for method in run.methods):
            kept[name] = derive(run)
            added.append(name)
    dropped = sorted(set(earlier) - set(kept))
    if added or dropped:
        runs = {name: dict(sorted(kept[name].items())) for name in sorted(kept)}
        try:
            path.parent.mkdir(exist_ok=True)
        except OSError as exc:
            raise WriteError(f"cannot write the weights of earlier runs to {path}: {exc.strerror or exc}") from None
        write_atomic(path, json.dumps({"written_by": COMMAND, "derived_from": DERIVED_FROM, "runs": runs}, indent=1) + "\n")
    return path, added, dropped
