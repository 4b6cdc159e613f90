"""One validator for result files (`specatlas.bench.validate_results`): what it refuses, and that
`specatlas results check` and the leaderboard refuse exactly the same files."""

import json
import os
import subprocess

import pytest

from benchruns import HARDWARE, build_run, sample, turn

from specatlas.bench import result_files, validate_results
from specatlas.bench.aggregate import load_all
from specatlas.bench.leaderboard_page import measured_markdown
from specatlas.bench.result_files import dumps
from specatlas.bench.results import config_hash, summarize
from specatlas.bench.validate_results import ACCELERATOR, check_files, check_folder
from specatlas.cli import main
from specatlas.escaping import md


def run_at(seconds=1.0, **changes):
    """A valid two-row run, its clock readings scaled by `seconds` (each value its own measurement)."""
    run = build_run([sample("baseline", "1", "qa", turn([1, 2], seconds)), sample("fast", "1", "qa", turn([1, 2], seconds / 2))])
    for key, value in changes.items():
        setattr(run, key, value)
    return run


def resummarized(run):
    run.config_hash = config_hash(run.config)
    run.summary = summarize(run)
    return run


def problems(folder, name):
    return check_folder(folder).verdicts[folder / name].problems


def test_results_check_and_the_leaderboard_refuse_the_same_files(tmp_path, capsys):
    folder = tmp_path / "results"
    folder.mkdir()
    good, copy = run_at(1.0), run_at(1.0)
    copy.provenance["hardware"] = {**HARDWARE, "cpu": "Other CPU"}
    future = run_at(1.2)
    future.sessions[0].started = "9999-01-01T00:00:00+00:00"
    renamed = build_run([sample("baseline", "1", "qa", turn([1, 2], 1.3)), sample("fast", "1", "qa", turn([1, 2], 0.6))],
                        names={"fast": "Another method"})
    for name, run in (("a.json", good), ("b.json", copy), ("c.json", future), ("d.json", renamed), ("e.json", run_at(1.4))):
        (folder / name).write_text(dumps(run))
    (folder / "f.json").write_text("[" * 100)
    runs, failed = load_all(folder)
    status = main(["results", "check", *sorted(map(str, folder.glob("*.json")))])
    out, err = capsys.readouterr()
    refused = {line.split(": ", 1)[0].rsplit("/", 1)[-1] for line in err.splitlines()}
    assert status == 1 and refused == {name for name, _ in failed} == {"b.json", "c.json", "d.json", "f.json"}
    assert sorted(name for _, name in runs) == ["a.json", "e.json"] and out.count(": ok") == 2


def test_a_copy_counts_once_from_the_file_first_by_name_whatever_its_provenance(tmp_path, write_run):
    write_run(run_at(1.0), "a.json")
    copy = run_at(1.0)
    copy.config["seed"] = 7
    folder = write_run(resummarized(copy), "b.json").parent
    assert problems(folder, "a.json") == []
    assert problems(folder, "b.json") == ["samples: the same run as a.json (the same tokens and timings to the last digit, "
                                          "under other provenance): a copy of a run counts once"]
    write_run(run_at(1.0000001), "b.json")  # measured again: a different clock reading
    assert problems(folder, "b.json") == []


def test_a_method_id_keeps_the_name_its_first_file_gives(tmp_path, write_run):
    write_run(run_at(1.0), "a.json")
    folder = write_run(build_run([sample("baseline", "1", "qa", turn([1, 2], 2.0)), sample("fast", "1", "qa", turn([1, 2], 1.0))],
                                 names={"fast": "EAGLE"}), "b.json").parent
    assert problems(folder, "b.json") == ["methods[1].name: id fast is named 'EAGLE' here but 'fast' in a.json: one id, one method"]


def test_results_check_judges_a_file_with_the_others_of_its_folder(tmp_path, write_run, capsys):
    write_run(run_at(1.0), "a.json")
    copy = write_run(run_at(1.0), "b.json")
    copy.write_text(copy.read_text().replace('"Test CPU"', '"Other CPU"'))
    assert main(["results", "check", str(copy)]) == 1
    assert "the same run as a.json" in capsys.readouterr().err


@pytest.mark.parametrize("levels", [40, 300, 5000])
def test_deep_nesting_is_refused_in_one_line(tmp_path, levels):
    path = tmp_path / "deep.json"
    data = json.loads(dumps(run_at()))
    data["config"]["extra"] = "X"
    text = json.dumps(data).replace('"X"', '{"a": ' * levels + "1" + "}" * levels)
    path.write_text(text)
    with pytest.raises(ValueError, match="nested (more than 32 levels deep|too deeply)"):
        result_files.load(path)


def test_rows_samples_and_questions_are_bounded_before_the_metrics(monkeypatch, write_run):
    path = write_run(build_run([sample("baseline", "1", "qa", turn([1], 1.0)), *(sample(f"m{i}", "1", "qa", turn([1], 1.0))
                                                                               for i in range(5))],
                               methods=("baseline", *(f"m{i}" for i in range(5)))))
    monkeypatch.setattr(result_files, "MAX_METHODS", 4)
    with pytest.raises(ValueError, match="methods: 6 entries; a result file holds at most 4"):
        result_files.load(path)


def test_a_file_over_the_size_bound_is_refused_before_reading(tmp_path):
    path = tmp_path / "big.json"
    with open(path, "wb") as f:
        f.truncate(result_files.MAX_RESULT_BYTES + 1)
    with pytest.raises(ValueError, match="bytes; at most"):
        result_files.load(path)


@pytest.mark.parametrize("name, ok", [("2026-12-05-smollm2-135m-instruct-cpu-a3bf4073.json", True), ("a.json", True),
                                      ("x<img onerror=a>.json", False), ('a"b.json', False), ("a b.json", False),
                                      ("a.json.txt", False), ("é.json", False)])
def test_names_are_plain(write_run, name, ok):
    path = write_run(run_at(), name)
    assert (check_files([path])[path][0].problems == []) == ok


@pytest.mark.parametrize("cpu, accelerator", [("AMD EPYC", False), ("Intel(R) Xeon(R) Processor", False), ("Apple M2", False),
                                              ("Intel Xeon Platinum 8480+", False), ("AMD EPYC 9654 96-Core Processor", False),
                                              ("NVIDIA H100 80GB HBM3", True), ("Tesla V100-SXM2-16GB", True),
                                              ("A100", True), ("AMD Instinct MI300X", True), ("GeForce RTX 4090", True)])
def test_a_cpu_string_naming_an_accelerator_is_told_apart(cpu, accelerator):
    assert bool(ACCELERATOR.search(cpu)) == accelerator


def test_a_cpu_run_labelled_with_a_gpu_name_is_refused(write_run):
    run = run_at()
    run.provenance["hardware"] = {**HARDWARE, "cpu": "NVIDIA H100 80GB HBM3"}
    folder = write_run(run).parent
    assert problems(folder, "run.json") == ["provenance.hardware.cpu (NVIDIA H100 80GB HBM3) names an accelerator, "
                                            "but the run's device is cpu"]


@pytest.mark.parametrize("session, message", [
    ({"started": "9999-01-01T00:00:00+00:00"}, "sessions[0] is dated in the future (9999-01-01T00:00:00+00:00)"),
    ({"finished": "2025-01-01T00:00:00+00:00"}, "sessions[0].finished (2025-01-01T00:00:00+00:00) is before its start"),
    ({"started": "2026-01-01 noon"}, "sessions[0].started (2026-01-01 noon) is not an ISO 8601 time"),
    ({"started": "2026-01-01T00:00:00"}, "sessions[0].started (2026-01-01T00:00:00) has no time zone"),
])
def test_dates_must_be_real_and_past(write_run, session, message):
    run = run_at()
    for key, value in session.items():
        setattr(run.sessions[0], key, value)
    assert problems(write_run(run).parent, "run.json")[0].startswith(message)


@pytest.mark.parametrize("curve, refused", [
    ({1: 0.01, 64: 0.005}, False), ({1: 0.01, 64: 0.0049}, True),  # at least half a one-token forward
    ({1: 0.01, 2: 0.04}, False), ({1: 0.01, 2: 0.0401}, True),  # at most two per token
    ({1: 1e-9, 2: 1e-9}, True),  # a one-token forward far below the baseline's 0.5 s steps
    ({1: 1.0, 2: 1.2}, False), ({1: 1.01, 2: 1.2}, True),  # at most two baseline steps (0.5 s each)
])
def test_the_cost_curve_is_bounded(write_run, curve, refused):
    run = build_run([sample("baseline", "1", "qa", turn([1, 2], 1.0)), sample("fast", "1", "qa", turn([1, 2], 0.5))],
                    curves=(curve,))
    found = problems(write_run(run).parent, "run.json")
    assert bool(found) == refused and all(p.startswith("cost_curve") for p in found)


@pytest.mark.parametrize("token, message", [(-1, "token id -1 is outside any model's vocabulary (262,144)"),
                                            (1 << 18, "token id 262144 is outside any model's vocabulary")])
def test_token_ids_fit_a_vocabulary(write_run, token, message):
    run = build_run([sample("baseline", "1", "qa", turn([1, token], 1.0)), sample("fast", "1", "qa", turn([1, token], 0.5))])
    assert message in problems(write_run(run).parent, "run.json")[0]


def test_the_embedded_models_vocabulary_is_what_its_shipped_heads_record(write_run):
    assert validate_results.vocabulary_size("smollm2-135m-instruct") == 49152
    run = build_run([sample("baseline", "1", "qa", turn([1, 49152], 1.0)), sample("fast", "1", "qa", turn([1, 49152], 0.5))])
    run.config["model"]["target"] = "smollm2-135m-instruct"
    assert "outside smollm2-135m-instruct's vocabulary of 49,152" in problems(write_run(resummarized(run)).parent, "run.json")[0]


def test_question_ids_agree_with_the_samples(write_run):
    run = run_at()
    run.config["question_ids"] = ["1", "1"]
    assert "config.question_ids lists 2 ids but 1 distinct questions" in problems(write_run(resummarized(run)).parent, "run.json")
    run.config["question_ids"] = ["1", "2", "3"]
    found = problems(write_run(resummarized(run)).parent, "run.json")
    assert "config.question_ids lists 3 questions, but the samples measure 1 of them" in found[0]


def test_the_sessions_units_add_up_to_the_samples(write_run):
    run = run_at()
    run.sessions[0].units = 5
    assert problems(write_run(run).parent, "run.json") == ["sessions[].units add up to 5, but the file holds 2 samples"]


def test_a_lossless_claim_is_against_the_files_own_baseline(write_run):
    run = build_run([sample("baseline", "1", "qa", turn([1, 2], 1.0)), sample("fast", "1", "qa", turn([1, 2], 0.5)),
                     sample("ref", "1", "qa", turn([1, 2], 0.7))], methods=("baseline", "fast", "ref"),
                    fields={"ref": {"kind": "peer", "lossless": False, "relative_to": "ref"}, "fast": {"relative_to": "ref"}})
    assert problems(write_run(run).parent, "run.json") == [
        "methods[1] (fast) claims to be lossless against ref, not this file's baseline"]
    run.methods[1].lossless = False  # another engine's row, as llama.cpp's are: measured against its own greedy
    assert problems(write_run(resummarized(run)).parent, "run.json") == []


def git(root, *args, date="2026-01-01T00:00:00+00:00"):
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date, "HOME": str(root), "PATH": os.environ["PATH"]}
    return subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def checkout(tmp_path):
    """A git checkout with one commit, made at 2025-12-31, and its results folder."""
    (tmp_path / "results").mkdir()
    (tmp_path / "README.md").write_text("x")
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "README.md")
    git(tmp_path, "commit", "-q", "-m", "one", date="2025-12-31T00:00:00+00:00")
    return tmp_path, git(tmp_path, "rev-parse", "HEAD")


def test_session_commits_are_in_the_checkouts_history_and_before_the_session(checkout, write_run):
    root, commit = checkout
    run = run_at()
    run.sessions[0].git_commit = commit
    folder = write_run(run, "a.json", root / "results").parent
    assert problems(folder, "a.json") == [] and check_folder(folder).notes == []
    run.sessions[0].git_commit = "ab" * 20
    write_run(run, "a.json", folder)
    assert problems(folder, "a.json") == [f"sessions[0].git_commit: {'ab' * 20} is not in the history of the git checkout at {root}"]
    run.sessions[0].git_commit, run.sessions[0].started = commit, "2025-06-01T00:00:00+00:00"
    write_run(run, "a.json", folder)
    assert problems(folder, "a.json") == ["sessions[0].git_commit: the session started 2025-06-01T00:00:00+00:00, before its "
                                          "commit was made (2025-12-31T00:00:00+00:00)"]


def test_outside_a_checkout_the_commits_are_not_checked_and_the_check_says_so(write_run, capsys):
    path = write_run(run_at())
    assert main(["results", "check", str(path)]) == 0
    assert capsys.readouterr().out == (f"{path}: ok; session commits not checked against git: {path.parent} is not in a git "
                                       "checkout (or git is not installed)\n")


def test_a_shallow_clone_is_not_checked_against_git(checkout, tmp_path_factory, write_run):
    root, _ = checkout
    clone = tmp_path_factory.mktemp("clone") / "c"
    git(root, "commit", "-q", "--allow-empty", "-m", "two")
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{root}", str(clone)], check=True, capture_output=True)
    folder = write_run(run_at(), "a.json", clone / "results").parent
    assert problems(folder, "a.json") == []
    assert check_folder(folder).notes == [f"session commits not checked against git: {clone} is a shallow clone"]


def test_the_leaderboard_renders_what_it_refuses_on_one_line_each(write_run):
    bad = run_at()
    bad.config["policy"] = ["paper"]
    folder = write_run(resummarized(bad), "a.json").parent
    page = measured_markdown(folder)
    why = "does not match the result schema: config.policy: Input should be a valid string"
    assert f"| a\\.json | {md(why)} |" in page


def test_check_files_leaves_out_nothing_it_was_given(tmp_path, write_run):
    a = write_run(run_at(), "a.json")
    hidden = write_run(run_at(1.1), ".hidden.json")
    judged = check_files([a, hidden])
    assert judged[a][0].problems == [] and judged[hidden][0].problems[0].startswith("its name may hold only")


def test_a_run_started_in_the_future_is_refused(write_run):
    run = run_at()
    run.provenance["started"] = "9999-01-01T00:00:00+00:00"
    assert problems(write_run(run).parent, "run.json") == ["provenance.started (9999-01-01T00:00:00+00:00) is in the future"]
