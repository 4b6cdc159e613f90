"""A leaderboard row describes one set of trained weights: runs of a retrained head are never
averaged with runs of the head before it. Which weights a run used is what its result file
records, else what results/provenance/weights-of-earlier-runs.json holds, derived from git once by
`specatlas results backfill-weights`: the leaderboard itself never runs git, so a checkout
without the history renders the same page."""

import hashlib
import json
import os
import shutil
import subprocess
import sys

import pytest

from benchruns import CURVE, build_run, sample, turn

from specatlas.bench import earlier_weights, provenance
from specatlas.bench.leaderboard_page import measured_markdown
from specatlas.bench.result_files import load
from specatlas.cli import main
from specatlas.escaping import md
from specatlas.impls.engine.head_folders import SHIPPED_IN_REPOSITORY, shipped_in, shipped_label
from specatlas.paths import repo_root

HEAD = "tiny-kangaroo"
SETUP = f"adapter ({shipped_label('kangaroo', HEAD)}); the paper's draft length 6"
OLD, NEW = b"old adapter weights", b"retrained adapter weights"
OLD_SHA, NEW_SHA = hashlib.sha256(OLD).hexdigest(), hashlib.sha256(NEW).hexdigest()

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def table_rows(page):
    """The ranked rows of the first table: (method id, runs, overall speedup cell)."""
    lines = page.split("|---", 1)[1].splitlines()[1:]
    rows = [line.split("|") for line in lines[: next(i for i, line in enumerate(lines) if not line.startswith("|"))]]
    return {row[2].split("(")[-1].split(")")[0].strip(): (row[-2].strip(), row[4].strip()) for row in rows}


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


def head_run(seconds, started, commit="0" * 40, weights=None, dirty=False, first_commit=None):
    """baseline at 1 s, "head" (its setup naming the shipped HEAD) at `seconds` per question, one
    session started at minute `started` at `commit`; `weights`: head's field as a new run records
    it (and the baseline's, {}), else none records any, as in an older file; `first_commit`: an
    earlier session, at that commit, measured too."""
    recorded = lambda weights: {} if weights is None else {"weights": weights}  # noqa: E731
    run = build_run([sample("baseline", "1", "qa", turn([1, 2], 1.0)), sample("head", "1", "qa", turn([1, 2], seconds))],
                    methods=("baseline", "head"), fields={"baseline": recorded(weights and {}),
                                                          "head": {"setup": SETUP, **recorded(weights)}},
                    curves=(CURVE,) * (1 if first_commit is None else 2))
    if first_commit is not None:
        run.sessions[0].git_commit, run.sessions[0].units = first_commit, 1
    run.sessions[-1].started = f"2026-01-01T00:{started:02d}:00+00:00"
    run.sessions[-1].finished = f"2026-01-01T00:{started + 1:02d}:00+00:00"
    run.sessions[-1].git_commit, run.sessions[-1].git_dirty = commit, dirty
    return run


def backfill(folder, capsys):
    """`specatlas results backfill-weights` on `folder`: (exit status, stdout, stderr lines)."""
    status = main(["results", "backfill-weights", "--results", str(folder)])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return status, out, err.splitlines()


def side_file(folder):
    return json.loads((folder / earlier_weights.PLACE).read_text())


def test_the_setup_names_the_shipped_head_the_recorded_weights_are_keyed_by():
    assert shipped_in(SETUP) == [HEAD]
    assert shipped_in("draft model; cost-aware draft length (0..6)") == []


@needs_git
@pytest.mark.parametrize("newest", ["a.json", "b.json"])
def test_a_row_averages_only_the_runs_of_its_newest_runs_weights(repository, write_run, capsys, newest):
    """Whichever file is newer: its weights make the row, by time, not by file name."""
    old, new = ("b.json", "a.json") if newest == "a.json" else ("a.json", "b.json")
    write_run(head_run(0.5, started=1, commit=repository["old"]), old)  # 2x
    folder = write_run(head_run(0.25, started=2, commit=repository["new"]), new).parent  # 4x
    assert backfill(folder, capsys)[0] == 0
    assert side_file(folder)["runs"] == {old: {"head": {HEAD: OLD_SHA}}, new: {"head": {HEAD: NEW_SHA}}}
    page = measured_markdown(folder)
    rows = table_rows(page)
    assert rows["head"] == ("1", "**4.00×**")  # the retrained head's run alone, not 3.00× ±1.41
    assert rows["baseline"][0] == "2"  # no trained weights: every run counts
    assert f"- head: 1 earlier run with other weights left out ({md(old)})" in page
    runs = page[page.index("<details"):]
    assert "2.00× (other weights)" in runs and "4.00× (other weights)" not in runs


@needs_git
def test_the_leaderboard_renders_the_same_page_without_git(repository, write_run, capsys):
    """The point of the side file: with git gone (a shallow or absent history, as on CI), the page
    is byte for byte the one rendered beside the full history, older runs' weights included."""
    write_run(head_run(0.5, started=1, commit=repository["old"]), "a.json")
    folder = write_run(head_run(0.25, started=2, commit=repository["new"]), "b.json").parent
    assert backfill(folder, capsys)[0] == 0
    with_git = measured_markdown(folder)
    assert table_rows(with_git)["head"] == ("1", "**4.00×**")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PATH", "")
        patch.setattr(provenance, "_git", lambda *args: pytest.fail(f"git {' '.join(args)} was called while rendering"))
        provenance.shipped_weights.cache_clear()
        assert measured_markdown(folder) == with_git
        assert main(["results", "check", str(folder / earlier_weights.PLACE)]) == 0


@needs_git
def test_a_recorded_run_and_a_backfilled_run_of_the_same_weights_merge(repository, write_run, capsys):
    """The recorded digest is the file's sha256; git's blob id is another hash of the same bytes:
    the backfill must hash the content for the two to meet."""
    write_run(head_run(0.5, started=1, commit=repository["new"]), "a.json")
    folder = write_run(head_run(0.25, started=2, weights={HEAD: NEW_SHA}), "b.json").parent
    assert backfill(folder, capsys)[0] == 0
    assert list(side_file(folder)["runs"]) == ["a.json"]  # b.json records its own: never overwritten
    page = measured_markdown(folder)
    assert table_rows(page)["head"] == ("2", "**3.00×\u00a0±1.41**")
    assert "other weights" not in page.split("## Reading the tables")[0]


@needs_git
def test_a_recorded_run_of_other_weights_than_the_backfilled_is_not_merged(repository, write_run, capsys):
    write_run(head_run(0.5, started=1, commit=repository["old"]), "a.json")
    folder = write_run(head_run(0.25, started=2, weights={HEAD: NEW_SHA}), "b.json").parent
    assert backfill(folder, capsys)[0] == 0
    assert table_rows(measured_markdown(folder))["head"] == ("1", "**4.00×**")


@needs_git
@pytest.mark.parametrize("case", ["dirty", "sessions at commits with other weights"])
def test_weights_git_cannot_tell_are_null_and_never_merged_with_a_known_version(repository, write_run, capsys, case):
    """A dirty checkout may have held any weights, and sessions at the old and the new commit ran
    both: such a run is unknown, a version of its own."""
    dirty = case == "dirty"
    write_run(head_run(0.5, started=1, commit=repository["new"], dirty=dirty, first_commit=None if dirty else repository["old"]),
              "a.json")
    folder = write_run(head_run(0.25, started=2, commit=repository["new"]), "b.json").parent
    assert backfill(folder, capsys)[0] == 0
    assert side_file(folder)["runs"]["a.json"] == {"head": None}
    assert table_rows(measured_markdown(folder))["head"] == ("1", "**4.00×**")


def test_without_the_side_file_older_runs_merge_with_one_another_not_with_recorded_weights(write_run):
    """Nothing tells an older run's weights: unknown weights are one version of their own."""
    write_run(head_run(0.5, started=1), "a.json")
    folder = write_run(head_run(0.25, started=2), "b.json").parent
    assert table_rows(measured_markdown(folder))["head"] == ("2", "**3.00×\u00a0±1.41**")
    write_run(head_run(0.2, started=3, weights={HEAD: NEW_SHA}), "c.json")  # 5x
    assert table_rows(measured_markdown(folder))["head"] == ("1", "**5.00×**")


@needs_git
def test_the_backfill_keeps_what_it_wrote_adds_new_files_and_drops_gone_ones(repository, write_run, capsys):
    write_run(head_run(0.5, started=1, commit=repository["old"]), "a.json")
    folder = write_run(head_run(0.25, started=2, commit=repository["new"]), "b.json").parent
    status, out, _ = backfill(folder, capsys)
    assert status == 0 and out.count("added") == 2
    path = folder / earlier_weights.PLACE
    written = path.read_bytes()
    assert written.startswith(earlier_weights.START.encode())
    assert side_file(folder)["written_by"] == earlier_weights.COMMAND and side_file(folder)["derived_from"].startswith("git")
    status, out, _ = backfill(folder, capsys)
    assert (status, out.strip()) == (0, f"{path}: up to date") and path.read_bytes() == written  # idempotent
    # Without git, what was derived stays (a later checkout may lack the history), and nothing asks git.
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(provenance, "_git", lambda *args: pytest.fail(f"git {' '.join(args)} was called"))
        provenance.shipped_weights.cache_clear()
        assert backfill(folder, capsys)[0] == 0 and path.read_bytes() == written
    (folder / "a.json").unlink()
    write_run(head_run(0.2, started=3, commit=repository["old"]), "c.json")
    status, out, _ = backfill(folder, capsys)
    assert status == 0 and "added c.json" in out and "dropped a.json" in out
    assert side_file(folder)["runs"] == {"b.json": {"head": {HEAD: NEW_SHA}}, "c.json": {"head": {HEAD: OLD_SHA}}}


@needs_git
@pytest.mark.parametrize("case", ["commit not in the history", "no git"])
def test_the_backfill_refuses_in_one_line_where_git_cannot_tell_and_writes_nothing(repository, write_run, capsys,
                                                                                   tmp_path, monkeypatch, case):
    """A shallow clone lacks the commit a run names; writing it as unknown would lose what a full
    clone knows, so the command stops instead."""
    commit = "1" * 40 if case == "commit not in the history" else repository["new"]
    folder = write_run(head_run(0.5, started=1, commit=commit), "a.json").parent
    if case == "no git":
        monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    status, out, err = backfill(folder, capsys)
    assert status == 1 and len(err) == 1 and not (folder / earlier_weights.PLACE).exists()
    expected = f"commit {commit} is not in the repository's history" if case != "no git" else "git cannot read a repository"
    assert err[0].startswith(f"specatlas results: {expected}")


@needs_git
def test_the_backfill_refuses_in_one_line_where_its_folder_is_taken_by_a_file(repository, write_run, capsys):
    folder = write_run(head_run(0.5, started=1, commit=repository["old"]), "a.json").parent
    taken = folder / earlier_weights.PLACE.parent
    taken.write_text("not a folder")
    status, _, err = backfill(folder, capsys)
    assert status == 1 and len(err) == 1 and "cannot write the weights of earlier runs" in err[0]
    assert taken.read_text() == "not a folder"


def test_results_check_finds_the_result_files_from_a_relative_path(write_run, capsys, monkeypatch):
    """The side file's entries are checked against the results folder above its own, wherever the
    command runs from."""
    folder = write_run(head_run(0.5, started=1), "a.json").parent
    path = folder / earlier_weights.PLACE
    path.parent.mkdir()
    path.write_text(json.dumps({"written_by": earlier_weights.COMMAND, "derived_from": "git", "runs": {"a.json": {}}}))
    monkeypatch.chdir(path.parent)
    assert main(["results", "check", path.name]) == 0, capsys.readouterr().err


@needs_git
def test_a_model_card_names_the_checkout_the_code_runs_from(repository, tmp_path, monkeypatch):
    """`specatlas train` rewrites the shipped heads while a later family still trains, and train-curve
    and train-eval their results while a later size or method is measured, which does not make the
    checkout that trains it dirty; its code's own checkout counts, wherever the command
    runs, and an installed copy (no checkout around it) names no commit."""
    from specatlas import paths
    from specatlas.bench.provenance import checkout_state

    root = tmp_path / "repo"
    monkeypatch.setattr(provenance, "repo_root", lambda: pytest.fail("the catalog's checkout was asked"))
    monkeypatch.setattr(paths, "__file__", str(root / "tools" / "paths.py"))  # the code runs from `root`
    assert checkout_state() == {"commit": None, "dirty": None}  # no papers/ and taxonomy/ beside the code
    (root / "papers").mkdir()
    (root / "taxonomy").mkdir()
    (root / SHIPPED_IN_REPOSITORY / HEAD / "model.safetensors").write_bytes(b"retrained")
    measured = root / "results" / "training" / "curve.json"  # train-curve and train-eval write here
    measured.parent.mkdir(parents=True)
    measured.write_text("{}")
    subprocess.run(["git", "add", "results"], cwd=root, check=True, capture_output=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "measured"], cwd=root,
                   check=True, capture_output=True)
    measured.write_text('{"points": []}')
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, check=True, capture_output=True, text=True).stdout.strip()
    assert checkout_state() == {"commit": commit, "dirty": False}
    assert provenance.git_state(root) == {"commit": commit, "dirty": True}
    assert provenance.git_state(root, excluding=("elsewhere",))["dirty"] is True  # only the folders named are left out


BAD_SIDE_FILES = [
    (lambda d: d["runs"]["a.json"]["head"].update({HEAD: "not-a-sha256"}), f"runs.a.json.head.{HEAD}"),
    (lambda d: d["runs"]["a.json"].update({"head": [HEAD]}), "runs.a.json.head"),
    (lambda d: d["runs"].update({"../a.json": {}}), "runs.../a.json.[key]"),
    (lambda d: d.pop("written_by"), "written_by"),
    (lambda d: d.update({"runs": []}), "runs"),
    (lambda d: d.update({"extra": 1}), "extra"),
]


@pytest.mark.parametrize("edit, where", BAD_SIDE_FILES, ids=[w for _, w in BAD_SIDE_FILES])
def test_a_malformed_side_file_is_one_line_everywhere(write_run, capsys, edit, where):
    """`results check` names the field; the leaderboard lists the file as failed and counts the older
    runs as unknown; the backfill refuses to build on it."""
    write_run(head_run(0.5, started=1), "a.json")
    folder = write_run(head_run(0.25, started=2, weights={HEAD: NEW_SHA}), "b.json").parent
    path = folder / earlier_weights.PLACE
    path.parent.mkdir()
    document = {"written_by": earlier_weights.COMMAND, "derived_from": "git", "runs": {"a.json": {"head": {HEAD: NEW_SHA}}}}
    path.write_text(json.dumps(document, indent=1))
    assert table_rows(measured_markdown(folder))["head"] == ("2", "**3.00×\u00a0±1.41**")  # well formed: a.json is NEW
    assert main(["results", "check", str(path)]) == 0
    edit(document)
    path.write_text(json.dumps(document, indent=1))
    capsys.readouterr()
    assert main(["results", "check", str(path)]) == 1
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err and len(err.splitlines()) == 1
    assert err.startswith(f"{path}: does not match its schema: {where}")
    page = measured_markdown(folder)
    assert table_rows(page)["head"] == ("1", "**4.00×**")  # a.json unknown again
    assert f"| {md(earlier_weights.PLACE.as_posix())} | {md(f'does not match its schema: {where}')}" in page
    before = path.read_bytes()
    status, _, err = backfill(folder, capsys)
    assert status == 1 and len(err) == 1 and path.read_bytes() == before


def test_results_check_names_entries_of_result_files_no_longer_there(write_run, capsys):
    folder = write_run(head_run(0.5, started=1), "a.json").parent
    path = folder / earlier_weights.PLACE
    path.parent.mkdir()
    path.write_text(json.dumps({"written_by": earlier_weights.COMMAND, "derived_from": "git",
                                "runs": {"a.json": {}, "gone.json": {"head": None}}}))
    assert main(["results", "check", str(path)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err == [f"{path}: runs.gone.json: no such result file in its folder "
                   f"(`{earlier_weights.COMMAND}` drops its entry)"]


def test_the_committed_side_file_covers_every_committed_run_without_weights():
    """A result file from an older checkout added without running the backfill would leave its rows'
    weights unknown on the page."""
    results = repo_root() / "results"
    earlier = earlier_weights.read(results / earlier_weights.PLACE)
    assert earlier_weights.problems(results / earlier_weights.PLACE) == []
    for path in sorted(results.glob("*.json")):
        lacking = [m.id for m in load(path).methods if m.weights is None and shipped_in(m.setup)]
        assert set(lacking) <= set(earlier.get(path.name, {})), f"run `{earlier_weights.COMMAND}` for {path.name}"


@pytest.mark.parametrize("weights, where", [
    ({HEAD: "not-a-sha256"}, f"methods.1.weights.{HEAD}"),
    ({HEAD: "AB" * 32}, f"methods.1.weights.{HEAD}"),  # sha256 is written in lowercase hex
    ([HEAD], "methods.1.weights"),
    ({"": "ab" * 32}, "methods.1.weights"),
])
def test_results_check_rejects_a_malformed_weights_field_in_one_line(write_run, capsys, weights, where):
    path = write_run(head_run(0.5, started=1, weights={HEAD: NEW_SHA}))
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
    gives the head: the name the backfill and the leaderboard look the head up by in older files."""
    torch = pytest.importorskip("torch")
    from specatlas.bench import contenders as cs
    from specatlas.bench.contenders import built
    from specatlas.impls.families import checkpoints
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
    """Rendering needs no engine installed: a run's weights come from its file and the side file alone."""
    code = "import sys, specatlas.bench.leaderboard; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
