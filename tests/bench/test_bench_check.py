"""`specatlas results check`: result files from any machine are accepted only with complete
provenance, a lossless check per row and numbers that their own samples give; bad input of any
kind is one line per problem, never a traceback."""

import glob
import json
import shlex
import shutil

import pytest
import yaml

from benchruns import build_run, sample, turn

from specatlas.bench import earlier_weights, result_files, results
from specatlas.bench.leaderboard_page import measured_markdown
from specatlas.bench.results import config_hash, summarize
from specatlas.cli import main
from specatlas.paths import repo_root

COMMITTED = sorted((repo_root() / "results").glob("*.json"))
# The cases below name this run's rows and numbers (a newer run need not have a hu2025sam paper row).
FIXTURE = repo_root() / "results" / "2026-12-03-smollm2-135m-instruct-cpu-9abfbd69.json"


def check(capsys, *paths):
    status = main(["results", "check", *map(str, paths)])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return status, out, err.splitlines()


def edited(tmp_path, edit, source=FIXTURE, name="edited.json"):
    """A copy of a committed result with `edit(data)` applied."""
    data = json.loads(source.read_text(encoding="utf-8"))
    edit(data)
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def rehashed(edit):
    """`edit`, then the config hash, the sessions' units and the summary made consistent again, as `specatlas
    bench` would write them."""
    def apply(data):
        edit(data)
        data["config_hash"] = config_hash(data["config"])
        data["sessions"][-1]["units"] = len(data["samples"]) - sum(s["units"] for s in data["sessions"][:-1])
        data["summary"] = summarize(results.Run.model_validate({**data, "summary": {}}))
    return apply


def test_every_committed_result_passes(capsys):
    assert COMMITTED
    status, out, err = check(capsys, *COMMITTED)
    assert status == 0 and err == [] and out.count(": ok\n") == len(COMMITTED)


def test_a_synthetic_complete_run_passes(capsys, write_run):
    run = build_run([sample("baseline", "1", "qa", turn([1, 2], 1.0)), sample("fast", "1", "qa", turn([1, 2], 0.5))])
    assert check(capsys, write_run(run))[0] == 0


def test_a_method_without_a_lossless_check_is_refused(capsys, write_run):
    # the baseline could not run: no output to compare with, so no row may claim a speedup here
    run = build_run([sample("fast", "1", "qa", turn([1, 2], 0.5))], errors={"baseline": "RuntimeError: out of memory"})
    path = write_run(run)
    status, _, err = check(capsys, path)
    assert status == 1 and err == [f"{path}: method fast: no lossless check (no sample shares a question with our baseline)"]


@pytest.mark.parametrize("edit, message", [
    (lambda d: d["provenance"].pop("hardware"), "does not match the result schema: provenance.hardware: Field required"),
    (lambda d: d["provenance"]["packages"].pop("torch"), "provenance.packages.torch is missing (the torch version)"),
    (rehashed(lambda d: d["config"]["model"].update(target_sha256=None)),
     "config.model.target_sha256 is missing (the target's weights digest)"),
    (rehashed(lambda d: d["config"].pop("seed")), "does not match the result schema: config.seed: Field required"),
    (lambda d: d["sessions"][0].update(git_commit=None), "session 1 does not name the commit it ran (git_commit)"),
    (lambda d: d["provenance"]["hardware"].update(gpu="NVIDIA H100"), "provenance.hardware.gpu (NVIDIA H100) does not fit device cpu"),
    (lambda d: d["summary"]["hu2025sam"]["overall"].update(speedup=2.5),
     "summary does not match the raw samples: hu2025sam.overall.speedup is 2.5; the samples give 0.9602"),
    (lambda d: d["samples"][1]["turns"][0].update(wall_seconds=0.01), "summary does not match the raw samples: "),
    (lambda d: d["summary"]["hu2025sam"].pop("lossless"), "summary does not match the raw samples: hu2025sam.lossless is missing"),
    (rehashed(lambda d: d.update(samples=[s for s in d["samples"] if s["method"] != "hu2025sam"])),
     "method hu2025sam: 6 of 6 (question, repeat) units have no sample and no error says why"),
    (rehashed(lambda d: next(s for s in d["samples"] if s["method"] == "hu2025sam")["turns"][0]["tokens"].__setitem__(0, 7)),
     "method hu2025sam: claims to be lossless but 1 of 7 outputs differ from our baseline's (first: question 81, turn 1, token 0)"),
])
def test_a_broken_result_is_refused_in_one_line_naming_file_and_problem(capsys, tmp_path, edit, message):
    path = edited(tmp_path, edit)
    status, _, err = check(capsys, path, FIXTURE)
    assert status == 1
    assert len(err) == 1 and err[0].startswith(f"{path}: {message}"), err


@pytest.mark.parametrize("text, message", [
    ("", "not valid JSON: Expecting value (line 1, column 1)"),
    ('{"schema_version": 1', "not valid JSON"),
    ("[1, 2]", "does not match the result schema: (top level)"),
    ('{"a": NaN}', "not valid JSON: NaN is not a number a measurement can have"),
    ('{"a": 1e999}', "not valid JSON: 1e999 is out of range"),
    ("[" * 100_000, "not valid JSON"),
    (b"\xff\xfe\x00garbage", "not valid JSON"),
])
def test_malformed_input_is_one_line(capsys, tmp_path, text, message):
    path = tmp_path / "bad.json"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    status, _, err = check(capsys, path)
    assert status == 1 and len(err) == 1 and err[0].startswith(f"{path}: {message}"), err


@pytest.mark.parametrize("edit, message", [
    (lambda d: d.update(config="cpu"), "does not match the result schema: config: Input should be a valid dictionary"),
    (lambda d: d["config"].update(max_new_tokens="many"), "does not match the result schema: config.max_new_tokens"),
    (lambda d: d["samples"][0].update(turns="none"), "does not match the result schema: samples.0.turns"),
    (lambda d: d["summary"]["baseline"]["overall"].update(speedup="fast"), "summary does not match the raw samples: "
     "baseline.overall.speedup is \"fast\"; the samples give 1.0"),
    (lambda d: d.update(cost_curve={"4": 0.1}), "summary does not match the raw samples: "),  # no width 1 measured
])
def test_wrong_types_are_one_line(capsys, tmp_path, edit, message):
    status, _, err = check(capsys, edited(tmp_path, edit))
    assert status == 1 and len(err) == 1 and message in err[0], err


def test_huge_files_folders_and_missing_files_are_refused_before_reading(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(result_files, "MAX_RESULT_BYTES", 1000)
    status, _, err = check(capsys, FIXTURE, tmp_path, tmp_path / "absent.json")
    assert status == 1 and len(err) == 3
    assert err[0].endswith("bytes; at most 1,000 are accepted") and "is a folder" in err[1] and "cannot be read" in err[2]


def test_a_valid_run_from_another_machine_gets_its_own_hardware_table(capsys, tmp_path):
    folder = tmp_path / "results"
    folder.mkdir()
    shutil.copy(FIXTURE, folder / FIXTURE.name)

    def on_h100(data):
        data["provenance"]["hardware"].update(gpu="NVIDIA H100 80GB HBM3", cpu="Intel Xeon Platinum 8480+", cores=26)
        data["config"].update(device="cuda:0", dtype="bfloat16", packed_linears=0)
        for sample in data["samples"]:  # measured there: a copy of the CPU run's samples would count once
            for t in sample["turns"]:
                t["wall_seconds"] /= 1.5

    gpu = edited(folder, rehashed(on_h100), name="2026-12-04-smollm2-135m-instruct-cuda-h100.json")
    assert check(capsys, gpu)[0] == 0
    page = measured_markdown(folder)
    assert "\n## NVIDIA H100 80GB HBM3 · " in page and "\n## AMD EPYC \\(2 cores, 2 torch threads\\) · " in page
    assert "bfloat16" in page[page.index("## NVIDIA H100"):]
    assert "Result files that failed checks" not in page


def zero_drafts(data):
    for s in data["samples"]:
        if s["method"] == "hu2025sam":
            for t in s["turns"]:
                t["drafted_at"] = [0] * len(t["drafted_at"])
                t["accepted_at"] = [0] * len(t["accepted_at"])


def test_draft_positions_never_drafted_at_have_no_acceptance_rate(capsys, tmp_path):
    folder = tmp_path / "results"
    folder.mkdir()
    path = edited(folder, rehashed(zero_drafts))
    assert check(capsys, path)[0] == 0
    assert json.loads(path.read_text())["summary"]["hu2025sam"]["overall"]["acceptance_by_position"][0] is None
    assert "| SAM\\-Decoding | paper | 0.00 |" in measured_markdown(folder)  # and the leaderboard renders it


def test_more_accepted_than_drafted_is_refused(capsys, tmp_path):
    def inflate(data):
        data["samples"][1]["turns"][0]["accepted_at"] = [10 ** 6]
    status, _, err = check(capsys, edited(tmp_path, inflate))
    assert status == 1 and len(err) == 1 and "accepted_at must list, per draft position, at most the drafted_at" in err[0]


def test_every_pull_request_runs_the_check_on_the_committed_results():
    workflow = yaml.safe_load((repo_root() / ".github" / "workflows" / "ci.yml").read_text(encoding="utf-8"))
    assert "pull_request" in workflow[True]  # YAML 1.1 reads the key `on` as True
    commands = [shlex.split(step["run"]) for job in workflow["jobs"].values() for step in job["steps"] if "run" in step]
    check = next(argv for argv in commands if argv[:3] == ["specatlas", "results", "check"])
    # the patterns, expanded in the checkout as the runner's shell does, name every committed result
    # file and the weights of earlier runs, which rows of the older ones depend on
    side_file = (repo_root() / "results" / earlier_weights.PLACE).relative_to(repo_root()).as_posix()
    assert sorted(path for pattern in check[3:] for path in glob.glob(pattern, root_dir=repo_root())) == \
        sorted([path.relative_to(repo_root()).as_posix() for path in COMMITTED] + [side_file])
