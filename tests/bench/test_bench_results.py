"""Metrics from raw samples, the lossless check, and the result file's crash safety."""

import json

import pytest

from specatlas.bench.result_files import Checkpoint, dumps, load, write_atomic

from benchruns import build_run, sample, turn


def test_speedup_is_spec_bench_mean_throughput_ratio_and_total_ratio(two_method_run):
    fast = two_method_run.summary["fast"]
    # Per-question throughputs 8 and 4 tokens/s against the baseline's 4 and 4.
    assert fast["overall"]["speedup"] == 1.5
    assert fast["overall"]["speedup_total"] == pytest.approx(4 / 3, abs=1e-4)  # 8 tokens in 1.5 s vs 8 in 2 s
    assert fast["qa"]["speedup"] == 2.0 and fast["rag"]["speedup"] == 1.0
    assert fast["overall"]["mean_accepted"] == pytest.approx(8 / 6, abs=1e-4)
    assert fast["overall"]["acceptance_by_position"] == [0.3333, 0.5]  # 2 of 6 first drafts kept, 1 of 2 second
    # Two tokens per forward over 4 tokens costing 1.6 plain steps: 2 / 1.6.
    assert fast["qa"]["predicted"] == 1.25
    assert two_method_run.summary["baseline"]["overall"]["speedup"] == 1.0


def test_lossless_check_reports_the_first_diverging_token(two_method_run):
    check = two_method_run.summary["fast"]["lossless"]
    assert check == {"status": "fail", "identical": 1, "compared": 2,
                     "first_divergence": {"question_id": "2", "repeat": 0, "turn": 1, "position": 2}}
    assert two_method_run.summary["baseline"]["lossless"]["status"] == "pass"


def test_an_early_stop_is_a_divergence_at_the_shorter_length():
    run = build_run([sample("baseline", "1", "qa", turn([1, 2, 3], 1.0)), sample("fast", "1", "qa", turn([1, 2], 1.0))])
    assert run.summary["fast"]["lossless"]["first_divergence"]["position"] == 2


def test_sampling_runs_record_the_check_as_not_applicable():
    run = build_run([sample("baseline", "1", "qa", turn([1], 1.0)), sample("fast", "1", "qa", turn([2], 1.0))],
                    temperature=0.7)
    check = run.summary["fast"]["lossless"]
    assert check["status"] == "not applicable" and "seed 0" in check["reason"]


def test_result_file_round_trips_and_rejects_tampering(two_method_run, tmp_path):
    path = tmp_path / "run.json"
    write_atomic(path, dumps(two_method_run))
    assert load(path) == two_method_run
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]  # no temp file left behind

    data = json.loads(path.read_text())
    data["samples"][2]["turns"][0]["wall_seconds"] = 0.1  # a faster number than was measured
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="summary does not match"):
        load(path)
    del data["provenance"]
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="result schema: provenance"):
        load(path)
    path.write_text(dumps(two_method_run)[:-50])
    with pytest.raises(ValueError, match="not valid JSON"):
        load(path)


HEADER = {"config_hash": "x", "config": {}, "cost_curve": {"1": 0.01}, "provenance": {"started": "2026-01-01"}}
SESSION = {"session": {"started": "2026-01-01", "git_commit": None, "git_dirty": None}}


def unit(method, qid="1"):
    """A finished unit as it reads back from JSON (integer keys become strings)."""
    return json.loads(json.dumps({"question_id": qid, "category": "qa", "repeat": 0, "method": method,
                                  "turns": [turn([1, 2], 0.5)]}))


def test_checkpoint_drops_a_line_cut_short_and_appends_after_it(tmp_path):
    path = tmp_path / ".partial.jsonl"
    checkpoint = Checkpoint(path)
    checkpoint.start(HEADER)
    checkpoint.append(SESSION)
    checkpoint.append(unit("a"))
    with path.open("a") as f:
        f.write('{"method": "b", "tur')  # killed mid-write
    reopened = Checkpoint(path)
    assert reopened.header == HEADER and reopened.items == [SESSION, unit("a")] and reopened.skipped == []
    reopened.append(unit("c"))
    assert [json.loads(line) for line in path.read_text().splitlines()] == [HEADER, SESSION, unit("a"), unit("c")]


@pytest.mark.parametrize("bad", [
    "{not json",  # corrupted bytes
    '{"method": "x"}',  # a unit without its fields
    "[1, 2, 3]",  # not an object
    '{"session": "yesterday"}',  # a session of the wrong shape
    '{"question_id": "1", "category": "overall", "repeat": 0, "method": "a", "turns": []}',  # reserved, empty
    "\u0000\u0000\u0000",
])
def test_a_corrupted_line_is_skipped_and_never_takes_later_units_with_it(tmp_path, bad):
    path = tmp_path / ".partial.jsonl"
    good = [HEADER, SESSION, unit("a", "1")]
    later = [unit("a", "2"), unit("b", "1")]
    lines = [json.dumps(x) for x in good] + [bad] + [json.dumps(x) for x in later]
    path.write_text("\n".join(lines) + "\n")
    before = path.read_bytes()
    reopened = Checkpoint(path)
    assert reopened.header == HEADER
    assert reopened.items == [SESSION, unit("a", "1"), *later]
    assert reopened.skipped == [4]
    assert path.read_bytes() == before  # nothing on disk is dropped


def test_a_corrupted_header_keeps_the_units_and_a_new_header_is_appended(tmp_path):
    path = tmp_path / ".partial.jsonl"
    path.write_text("{garbage\n" + json.dumps(SESSION) + "\n" + json.dumps(unit("a")) + "\n")
    reopened = Checkpoint(path)
    assert reopened.header is None and reopened.items == [SESSION, unit("a")] and reopened.skipped == [1]
    reopened.start(HEADER)
    again = Checkpoint(path)
    assert again.header == HEADER and again.items == [SESSION, unit("a")]


def test_a_zero_token_baseline_gives_no_speedup_instead_of_dividing_by_zero():
    run = build_run([sample("baseline", "1", "qa", turn([], 1.0, steps=0, widths={})),
                     sample("fast", "1", "qa", turn([1, 2], 0.5))])
    overall = run.summary["fast"]["overall"]
    assert overall["speedup"] is None and overall["speedup_total"] is None


@pytest.mark.parametrize("category", ["overall", "lossless"])
def test_a_category_named_like_a_summary_key_is_refused_not_looped_on(category):
    with pytest.raises(ValueError, match="reserved"):
        build_run([sample("baseline", "1", category, turn([1], 1.0)), sample("fast", "1", category, turn([1], 1.0))])


def test_a_zero_width_cost_curve_is_refused(two_method_run, tmp_path):
    data = json.loads(dumps(two_method_run))
    data["cost_curve"] = {"0": 0.01}
    path = tmp_path / "r.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="cost_curve"):
        load(path)


@pytest.mark.parametrize("drop, where", [("model", "config.model"), ("dtype", "config.dtype"),
                                         ("prompt_set", "config.prompt_set"), ("temperature", "config.temperature")])
def test_missing_config_keys_are_named_not_a_key_error(two_method_run, tmp_path, drop, where):
    from specatlas.bench.results import config_hash

    data = json.loads(dumps(two_method_run))
    del data["config"][drop]
    data["config_hash"] = config_hash(data["config"])
    path = tmp_path / "r.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=where):
        load(path)


def test_a_rerun_on_the_same_day_never_replaces_the_earlier_result(tmp_path):
    from specatlas.fsutil import create_unique

    first = create_unique(tmp_path / "2026-01-01-tiny-cpu-abcd.json", "first")
    second = create_unique(tmp_path / "2026-01-01-tiny-cpu-abcd.json", "second")
    third = create_unique(tmp_path / "2026-01-01-tiny-cpu-abcd.json", "third")
    assert [p.name for p in (first, second, third)] == [
        "2026-01-01-tiny-cpu-abcd.json", "2026-01-01-tiny-cpu-abcd-2.json", "2026-01-01-tiny-cpu-abcd-3.json"]
    assert [p.read_text() for p in (first, second, third)] == ["first", "second", "third"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in (first, second, third))
