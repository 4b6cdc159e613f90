"""Metrics from raw samples, the lossless check, and the result file's crash safety."""

import json

import pytest

from specatlas.bench.results import Checkpoint, dumps, load, write_atomic

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
    with pytest.raises(ValueError, match="result schema"):
        load(path)


def test_checkpoint_drops_a_line_cut_short_and_appends_after_it(tmp_path):
    path = tmp_path / ".partial.jsonl"
    checkpoint = Checkpoint(path)
    checkpoint.start({"config_hash": "x"})
    checkpoint.append({"method": "a"})
    with path.open("a") as f:
        f.write('{"method": "b", "tur')  # killed mid-write
    reopened = Checkpoint(path)
    assert reopened.header == {"config_hash": "x"} and reopened.items == [{"method": "a"}]
    reopened.append({"method": "c"})
    assert [json.loads(line) for line in path.read_text().splitlines()] == [
        {"config_hash": "x"}, {"method": "a"}, {"method": "c"}]
