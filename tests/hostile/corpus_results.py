"""Hostile result files: what a stranger's pull request can put into results/, and what
`specatlas leaderboard` and `specatlas results check` must answer. The two commands apply one
validator (`specatlas.bench.validate_results`), so each file is tried with both: the check refuses
it in one line naming the file and the field, and the leaderboard lists it as failed, never ranks it.

Cases run as those of corpus.py do (`run_case`). `python tests/hostile/corpus_results.py` runs them
and prints each outcome with its first line of output naming the file: the before/after table of the
change, when run with each version's code.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from corpus import HOSTILE, Case, _curve, _result_with, _resummarized, _set, _sparse, _turns, run_all

LB = ["leaderboard"]
CHECK = ["results", "check", "{root}/results/" + HOSTILE]
GOOD = "2026-01-01-tiny-cpu-00000000.json"  # corpus.make_root's valid result file
REPO_DATE = "2025-12-31T00:00:00+00:00"  # the commit the valid result ran, in a catalog made a git checkout


def _page_lacks_link(name: str):
    """The page does not link `name` as a ranked run's raw result file."""
    def check(root: Path, tmp: Path, text: str) -> str | None:
        from specatlas.escaping import md

        page = (root / "results" / "LEADERBOARD.md").read_text(encoding="utf-8")
        return f"the page ranks {name}" if f"[{md(name)}](" in page else None
    return check


def _names(file: str, reason: str, then=None):
    """One output line names `file` and says `reason`; then `then`'s check, if any."""
    def check(root: Path, tmp: Path, text: str) -> str | None:
        if not any(file in line and reason in line for line in text.splitlines()):
            return f"no line names {file!r} with {reason!r}"
        return then(root, tmp, text) if then else None
    return check


def both(name: str, reason: str, prepare=None, files=None) -> list[Case]:
    """The hostile file refused by `results check` and listed as failed, unranked, by the leaderboard,
    each in a line naming the file and `reason` (the field and why)."""
    files = files or {}
    return [Case(f"{name}-check", CHECK, files, prepare, message=reason, check=_names(HOSTILE, reason)),
            Case(f"{name}-leaderboard", LB, files, prepare, fails=False, message=reason,
                 check=_names(HOSTILE, reason, _page_lacks_link(HOSTILE)))]


# Mutations of the valid result (its data as JSON) ----------------------------------------------

def _fast(**values):
    """The "fast" row's turns updated."""
    def mutate(data: dict) -> None:
        for sample in data["samples"]:
            if sample["method"] == "fast":
                sample["turns"][0].update(values)
    return mutate


def _retimed(data: dict) -> None:
    """Measured again: every clock reading differs from the valid run's."""
    for sample in data["samples"]:
        sample["turns"][0]["wall_seconds"] *= 1.1


def _tokens(tokens: list[int]):
    return _turns(tokens=tokens)


def _deep(levels: int) -> dict:
    nested: dict = {"leaf": 1}
    for _ in range(levels):
        nested = {"a": nested}
    return nested


def _many_methods(count: int):
    """`count` rows, each with its one sample, all as fast as "fast"."""
    def mutate(data: dict) -> None:
        row, sample = data["methods"][1], next(s for s in data["samples"] if s["method"] == "fast")
        data["methods"] += [{**row, "id": f"m{i}", "name": f"m{i}"} for i in range(count)]
        data["samples"] += [{**sample, "method": f"m{i}"} for i in range(count)]
        data["config"]["methods"] = [m["id"] for m in data["methods"]]
        data["sessions"][0]["units"] = len(data["samples"])
    return mutate


def _questions(ids: list[str]):
    return _set("config.question_ids", ids)


def _reference_row(data: dict) -> None:
    """A third row "ref", its own reference; "fast" claims to be lossless against it, not the baseline."""
    ref = {**data["methods"][1], "id": "ref", "name": "ref", "kind": "peer", "lossless": False, "relative_to": "ref"}
    data["methods"].append(ref)
    data["methods"][1]["relative_to"] = "ref"
    sample = next(s for s in data["samples"] if s["method"] == "fast")
    data["samples"].append({**sample, "method": "ref", "turns": [{**sample["turns"][0], "wall_seconds": 0.7}]})
    data["config"]["methods"].append("ref")
    data["sessions"][0]["units"] = len(data["samples"])


def _git_catalog(root: Path, tmp: Path) -> None:
    """Make the catalog a git checkout with one commit dated REPO_DATE, the one the valid result ran."""
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           "GIT_AUTHOR_DATE": REPO_DATE, "GIT_COMMITTER_DATE": REPO_DATE, "HOME": str(tmp), "PATH": os.environ["PATH"]}

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True, text=True).stdout.strip()

    git("init", "-q")
    git("add", "papers")
    git("commit", "-q", "-m", "catalog")
    commit = git("rev-parse", "HEAD")
    good = root / "results" / GOOD
    data = json.loads(good.read_text(encoding="utf-8"))
    data["sessions"][0]["git_commit"] = commit
    good.write_text(json.dumps(data), encoding="utf-8")


def _in_git(*mutations):
    """In a catalog that is a git checkout, a second result mutated by `mutations` (retimed: not a copy)."""
    def prepare(root: Path, tmp: Path) -> None:
        _git_catalog(root, tmp)
        _result_with(_resummarized(_retimed, *mutations))(root, tmp)
    return prepare


def _copy_as(name: str, *mutations):
    """A copy of the valid result under `name`, with `mutations` (resummarized)."""
    def prepare(root: Path, tmp: Path) -> None:
        good = root / "results" / GOOD
        data = json.loads(good.read_text(encoding="utf-8"))
        _resummarized(*mutations)(data)
        (root / "results" / name).write_text(json.dumps(data), encoding="utf-8")
    return prepare


def _session(index: int, **values):
    def mutate(data: dict) -> None:
        data["sessions"][index].update(values)
    return mutate


def _hardware(**values):
    def mutate(data: dict) -> None:
        data["provenance"]["hardware"].update(values)
    return mutate


def _method(index: int, **values):
    def mutate(data: dict) -> None:
        data["methods"][index].update(values)
    return mutate


def cases() -> list[Case]:
    html_name = "2026-01-02-<img src=x onerror=alert(1)>.json"
    return [
        # -- values the page code cannot take: a crash before
        *both("result-config-policy-list", "config.policy", _result_with(_resummarized(_set("config.policy", ["paper"])))),
        *both("result-config-policy-object", "config.policy", _result_with(_resummarized(_set("config.policy", {"a": 1})))),
        *both("result-config-nested-300", "nested more than 32 levels",
              _result_with(_resummarized(_set("config.extra", _deep(300))))),
        *both("result-provenance-nested-60", "nested more than 32 levels",
              _result_with(_resummarized(_set("provenance.extra", _deep(60))))),
        *both("result-list-nested-5000", "nested too deeply", files={"results/" + HOSTILE: "[" * 5000 + "]" * 5000}),
        *both("result-300mb", "bytes; at most", _sparse("results/" + HOSTILE, 300 << 20)),
        *both("result-2000-methods", "methods: 2,002 entries", _result_with(_resummarized(_many_methods(2000)))),
        # -- names and strings that reach the page
        Case("result-name-html-check", ["results", "check", "{root}/results/" + html_name], prepare=_copy_as(html_name, _retimed),
             message="its name may hold only"),
        Case("result-name-html-leaderboard", LB, prepare=_copy_as(html_name, _retimed), fails=False,
             message="its name may hold only", check=lambda r, t, x: "the page holds the name's tag" if "<img" in
             (r / "results" / "LEADERBOARD.md").read_text(encoding="utf-8") else None),
        Case("result-name-quote-check", ["results", "check", '{root}/results/2026-01-02-a"b.json'],
             prepare=_copy_as('2026-01-02-a"b.json', _retimed), message="its name may hold only"),
        *both("result-method-id-renamed", "one id, one method",
              _result_with(_resummarized(_retimed, _method(1, name="Fake EAGLE, 9x")))),
        # -- a copy of a run counted again
        *both("result-copy-other-cpu", "the same run as " + GOOD,
              _result_with(_resummarized(_hardware(cpu="Other CPU")))),
        *both("result-copy-other-start", "the same run as " + GOOD,
              _result_with(_resummarized(_session(0, started="2026-01-01T09:00:00+00:00"),
                                         _set("provenance.started", "2026-01-01T09:00:00+00:00")))),
        *both("result-copy-other-seed", "the same run as " + GOOD, _result_with(_resummarized(_set("config.seed", 7)))),
        # -- commits and dates
        *both("result-commit-not-in-history", "is not in the history",
              _in_git(_session(0, git_commit="ab" * 20))),
        *both("result-session-before-its-commit", "before its commit was made",
              _in_git(_session(0, started="2025-06-01T00:00:00+00:00"), _set("provenance.started", "2025-06-01T00:00:00+00:00"))),
        Case("result-commits-unchecked-without-git", CHECK, prepare=_result_with(_resummarized(_retimed)), fails=False,
             message="session commits not checked against git"),
        *both("result-dated-9999", "dated in the future",
              _result_with(_resummarized(_retimed, _session(0, started="9999-01-01T00:00:00+00:00")))),
        *both("result-finished-before-start", "is before its start",
              _result_with(_resummarized(_retimed, _session(0, finished="2025-01-01T00:00:00+00:00")))),
        *both("result-start-without-zone", "has no time zone",
              _result_with(_resummarized(_retimed, _session(0, started="2026-01-01T00:00:00")))),
        # -- the cost curve
        *both("result-curve-64-tokens-1ns", "cost_curve.64",
              _result_with(_resummarized(_retimed, _curve({"1": 0.01, "2": 0.012, "64": 1e-9}), _fast(widths={"64": 4})))),
        *both("result-curve-all-1ns", "a one-token forward at 1e-09",
              _result_with(_resummarized(_retimed, _curve({"1": 1e-9, "2": 1e-9})))),
        *both("result-curve-wide-forward-dear", "cost_curve.2",
              _result_with(_resummarized(_retimed, _curve({"1": 0.01, "2": 9.0})))),
        # -- the device
        *both("result-cpu-labelled-h100", "names an accelerator",
              _result_with(_resummarized(_retimed, _hardware(cpu="NVIDIA H100 80GB HBM3")))),
        *both("result-cpu-run-with-gpu", "does not fit device cpu",
              _result_with(_resummarized(_retimed, _hardware(gpu="NVIDIA A100")))),
        *both("result-device-unknown", "is not a torch device",
              _result_with(_resummarized(_retimed, _set("config.device", "quantum")))),
        # -- counts that disagree with the samples
        *both("result-100018-question-ids", "config.question_ids: 100,018 entries",
              _result_with(_resummarized(_retimed, _questions(["1", *map(str, range(2, 100_019))])))),
        *both("result-question-ids-repeated", "distinct questions",
              _result_with(_resummarized(_retimed, _questions(["1"] * 500)))),
        *both("result-questions-unmeasured", "the samples measure 1 of them",
              _result_with(_resummarized(_retimed, _questions(["1", *map(str, range(2, 60))])))),
        *both("result-units-claimed", "sessions[].units add up to 9",
              _result_with(_resummarized(_retimed, _session(0, units=9)))),
        # -- token ids
        *both("result-token-beyond-vocabulary", "token id 1000000000",
              _result_with(_resummarized(_retimed, _tokens([1, 2, 3, 10 ** 9])))),
        *both("result-token-negative", "token id -5", _result_with(_resummarized(_retimed, _tokens([1, 2, 3, -5])))),
        *both("result-token-beyond-embedded-vocabulary", "vocabulary of 49,152",
              _result_with(_resummarized(_retimed, _set("config.model.target", "smollm2-135m-instruct"),
                                         _tokens([1, 2, 3, 49_152])))),
        # -- lossless claims
        *both("result-lossless-against-another-row", "claims to be lossless against ref",
              _result_with(_resummarized(_retimed, _reference_row))),
        *both("result-relative-to-missing-row", "is not a row of this file",
              _result_with(_resummarized(_retimed, _method(1, relative_to="ghost")))),
        *both("result-lossless-claim-false", "claims to be lossless but",
              _result_with(_resummarized(_retimed, _fast(tokens=[1, 2, 3, 9])))),
        # -- what `results check` refuses, the leaderboard never ranks
        *both("result-packages-missing", "provenance.packages.python is missing",
              _result_with(_resummarized(_retimed, _set("provenance.packages", {})))),
        *both("result-commit-missing", "session 1 does not name the commit",
              _result_with(_resummarized(_retimed, _session(0, git_commit=None)))),
        *both("result-threads-disagree", "config.torch_threads and provenance.hardware.torch_threads differ",
              _result_with(_resummarized(_retimed, _hardware(torch_threads=64)))),
        # -- claims the samples do not give
        *both("result-speedup-claimed", "summary does not match the raw samples",
              _result_with(lambda d: (_resummarized(_retimed)(d), d["summary"]["fast"]["overall"].update(speedup=9.0)))),
        *both("result-identical-claimed", "summary does not match the raw samples",
              _result_with(lambda d: (_resummarized(_retimed, _fast(tokens=[1, 2, 3, 9]))(d),
                                      d["summary"]["fast"]["lossless"].update(status="pass", identical=1)))),
    ]


def tally() -> int:
    """Each case's outcome and the first line of output naming the hostile file (or the last line)."""
    for case, outcome, seconds, tmp in run_all(cases()):
        lines = [line for line in outcome.output.splitlines() if line.strip()]
        said = next((line for line in lines if "2026-01-02" in line), lines[-1] if lines else "")
        said = said.replace(str(tmp), "{tmp}")
        print(f"{outcome.status:9} {seconds:5.1f}s {case.name:46} rc={outcome.returncode} "
              f"{outcome.detail[:80]} | {said[:220]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(tally())
