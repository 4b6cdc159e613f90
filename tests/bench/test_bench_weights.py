"""A leaderboard row describes one set of trained weights: runs of a retrained head are never
averaged with runs of the head before it. Which weights a run used is what its result file
records, else what git held at the commit its sessions ran."""

import hashlib
import json
import os
import shutil
import subprocess
import sys

import pytest

from benchruns import build_run, sample, turn

from specatlas.bench import provenance
from specatlas.bench.leaderboard import measured_markdown
from specatlas.cli import main
from specatlas.impls.engine.head_folders import SHIPPED_IN_REPOSITORY, shipped_in, shipped_label
from specatlas.site.text import md

HEAD = "tiny-kangaroo"
SETUP = f"adapter ({shipped_label('kangaroo', HEAD)}); the paper's draft length 6"
OLD, NEW = b"old adapter weights", b"retrained adapter weights"

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def table_rows(page):
    """The ranked rows of the first table: (method id, runs, overall speedup cell)."""
    lines = page.split("|---", 1)[1].splitlines()[1:]
    rows = [line.split("|") for line in lines[: next(i for i, line in enumerate(lines) if not line.startswith("|"))]]
    return {row[2].split("(")[-1].split(")")[0]: (row[-2].strip(), row[4].strip()) for row in rows}


@pytest.fixture
def repository(tmp_path, monkeypatch):
    """A git repository whose shipped head HEAD is retrained: {"old": commit, "new": commit}; git
    lookups go to it."""
    root = tmp_path / "repo"
    folder = root / SHIPPED_IN_REPOSITORY / HEAD
    folder.mkdir(parents=True)

    def git(*args):
        env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
               "HOME": str(tmp_path), "PATH": os.environ["PATH"]}
        return subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True, text=True).stdout.strip()

    git("init", "-q")
    commits = {}
    for version, content in (("old", OLD), ("new", NEW)):
        (folder / "model.safetensors").write_bytes(content)
        (folder / "config.json").write_text(json.dumps({"version": version}))  # not a weight file
        git("add", "-A")
        git("commit", "-q", "-m", version)
        commits[version] = git("rev-parse", "HEAD")
    monkeypatch.setattr(provenance, "repo_root", lambda: root)
    provenance.shipped_weights.cache_clear()
    yield commits
    provenance.shipped_weights.cache_clear()


def head_run(seconds, started, commit="0" * 40, weights=None, dirty=False):
    """baseline at 1 s, "head" (its setup naming the shipped HEAD) at `seconds` per question, one
    session started at minute `started` at `commit`; `weights`: the field as a new run records it."""
    run = build_run([sample("baseline", "1", "qa", turn([1, 2], 1.0)), sample("head", "1", "qa", turn([1, 2], seconds))],
                    methods=("baseline", "head"), fields={"head": {"setup": SETUP, **({"weights": weights} if weights is not None else {})}})
    run.sessions[-1].started = f"2026-01-01T00:{started:02d}:00+00:00"
    run.sessions[-1].git_commit, run.sessions[-1].git_dirty = commit, dirty
    return run


def test_the_setup_names_the_shipped_head_the_recorded_weights_are_keyed_by():
    assert shipped_in(SETUP) == [HEAD]
    assert shipped_in("draft model; cost-aware draft length (0..6)") == []


@needs_git
@pytest.mark.parametrize("newest", ["a.json", "b.json"])
def test_a_row_averages_only_the_runs_of_its_newest_runs_weights(repository, write_run, newest):
    """Whichever file is newer: its weights make the row, by time, not by file name."""
    old, new = ("b.json", "a.json") if newest == "a.json" else ("a.json", "b.json")
    write_run(head_run(0.5, started=1, commit=repository["old"]), old)  # 2x
    folder = write_run(head_run(0.25, started=2, commit=repository["new"]), new).parent  # 4x
    page = measured_markdown(folder)
    rows = table_rows(page)
    assert rows["head"] == ("1", "**4.00×**")  # the retrained head's run alone, not 3.00× ±1.41
    assert rows["baseline"][0] == "2"  # no trained weights: every run counts
    assert f"- head: 1 earlier run with other weights left out ({md(old)})" in page
    runs = page[page.index("<details"):]
    assert "2.00× (other weights)" in runs and "4.00× (other weights)" not in runs


@needs_git
def test_a_recorded_run_and_a_git_derived_run_of_the_same_weights_merge(repository, write_run):
    """The recorded digest is the file's sha256; git's blob id is another hash of the same bytes:
    the git side must hash the content for the two to meet."""
    write_run(head_run(0.5, started=1, commit=repository["new"]), "a.json")
    folder = write_run(head_run(0.25, started=2, weights={HEAD: hashlib.sha256(NEW).hexdigest()}), "b.json").parent
    page = measured_markdown(folder)
    assert table_rows(page)["head"] == ("2", "**3.00×\u00a0±1.41**")
    assert "other weights" not in page.split("## Reading the tables")[0]


@needs_git
def test_a_recorded_run_of_other_weights_than_git_gives_is_not_merged(repository, write_run):
    write_run(head_run(0.5, started=1, commit=repository["old"]), "a.json")
    folder = write_run(head_run(0.25, started=2, weights={HEAD: hashlib.sha256(NEW).hexdigest()}), "b.json").parent
    assert table_rows(measured_markdown(folder))["head"] == ("1", "**4.00×**")


@needs_git
def test_a_dirty_session_leaves_its_weights_unknown(repository, write_run):
    """A dirty checkout may have held any weights: such a run is never merged with a known version."""
    write_run(head_run(0.5, started=1, commit=repository["new"], dirty=True), "a.json")
    folder = write_run(head_run(0.25, started=2, commit=repository["new"]), "b.json").parent
    assert table_rows(measured_markdown(folder))["head"] == ("1", "**4.00×**")


def test_without_git_older_runs_merge_with_one_another_not_with_recorded_weights(tmp_path, monkeypatch, write_run):
    """No repository to ask: unknown weights are one version of their own, and the leaderboard still renders."""
    monkeypatch.setattr(provenance, "repo_root", lambda: tmp_path / "not-a-repository")
    provenance.shipped_weights.cache_clear()
    write_run(head_run(0.5, started=1), "a.json")
    folder = write_run(head_run(0.25, started=2), "b.json").parent
    assert table_rows(measured_markdown(folder))["head"] == ("2", "**3.00×\u00a0±1.41**")
    write_run(head_run(0.2, started=3, weights={HEAD: hashlib.sha256(NEW).hexdigest()}), "c.json")  # 5x
    assert table_rows(measured_markdown(folder))["head"] == ("1", "**5.00×**")
    provenance.shipped_weights.cache_clear()


@pytest.mark.parametrize("weights, where", [
    ({HEAD: "not-a-sha256"}, f"methods.1.weights.{HEAD}"),
    ({HEAD: "AB" * 32}, f"methods.1.weights.{HEAD}"),  # sha256 is written in lowercase hex
    ([HEAD], "methods.1.weights"),
    ({"": "ab" * 32}, "methods.1.weights"),
])
def test_results_check_rejects_a_malformed_weights_field_in_one_line(write_run, capsys, weights, where):
    path = write_run(head_run(0.5, started=1, weights={HEAD: hashlib.sha256(NEW).hexdigest()}))
    assert main(["results", "check", str(path)]) == 0  # recorded weights pass; files without them pass as before
    capsys.readouterr()
    data = json.loads(path.read_text())
    data["methods"][1]["weights"] = weights
    path.write_text(json.dumps(data))
    assert main(["results", "check", str(path)]) == 1
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err and len(err.splitlines()) == 1
    assert err.startswith(f"{path}: does not match the result schema: {where}")


def test_bench_records_the_weights_each_row_loaded(tmp_path, monkeypatch):
    """A row records the sha256 of every shipped head its build loaded, under the name its setup
    gives the head: the name the leaderboard looks the head up by in older files."""
    torch = pytest.importorskip("torch")
    from specatlas.bench import contenders as cs
    from specatlas.bench.run import built
    from specatlas.impls.engine import checkpoints
    from specatlas.impls.engine.draft_length import DraftLengthPolicy
    from specatlas.impls.engine.models import EMBEDDED
    from specatlas.impls.families import FAMILIES
    from specatlas.impls.families.distillspec import DraftLayers
    from specatlas.impls.registry import METHODS

    from tests.impls.toy import tiny_llama

    model = tiny_llama(5, layers=4)
    folder = tmp_path / "heads" / f"{EMBEDDED}-distillspec"
    FAMILIES["distillspec"].save(DraftLayers.from_target(model, 2, torch.arange(12)), folder, model, EMBEDDED,
                                 {"num_hidden_layers": 2, "draft_vocab_size": 12})
    monkeypatch.setattr(checkpoints, "SHIPPED_HEADS", tmp_path / "heads")
    monkeypatch.setattr(model.config, "_name_or_path", f"/cache/specatlas/models/{EMBEDDED}")
    monkeypatch.setenv("SPECATLAS_CACHE", str(tmp_path / "cache"))

    def contender(method_id):
        return built(lambda: cs.specatlas_method(METHODS[method_id], model, None, DraftLengthPolicy.paper()),
                     method_id, method_id, "specatlas", True, "paper")

    drafted = contender("leviathan2023fast")
    assert drafted.error is None
    digest = hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest()
    assert drafted.record["weights"] == {folder.name: digest}
    assert shipped_in(drafted.setup) == [folder.name]
    assert contender("saxena2023prompt").record["weights"] == {}  # prompt lookup loads no trained weights


def test_the_leaderboard_tells_weights_apart_without_torch():
    """Rendering needs no engine installed: a run's weights come from its file and git alone."""
    code = "import sys, specatlas.bench.leaderboard; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
