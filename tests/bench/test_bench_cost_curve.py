"""The cost curve a result prices forwards with: each session times its own, the run takes the
per-width fastest (load only ever adds time) and says which session each width came from, warns
when sessions disagree beyond the tolerance, and older results with one curve still load."""

import json
from types import SimpleNamespace

import pytest
from benchruns import CURVE, build_run, sample, turn

from specatlas.bench.leaderboard_page import measured_markdown
from specatlas.bench.targets import targets_markdown
from specatlas.bench.result_files import Checkpoint, dumps, load
from specatlas.bench.results import CURVE_TOLERANCE, SCHEMA_VERSION, combine_curves, curve_warning, step_time
from specatlas.bench.protocol import _assemble
from specatlas.paths import repo_root

LOADED = {w: s * 1.4 for w, s in CURVE.items()}  # the same machine while another job ran: 40% slower
UNITS = [sample("baseline", "1", "qa", turn([1, 2, 3, 4], 1.0)),
         sample("fast", "1", "qa", turn([1, 2, 3, 4], 0.5, steps=2, widths={4: 2}))]


def test_each_width_takes_its_fastest_session_and_names_it():
    curve, source = combine_curves([{1: 0.05, 2: 0.06, 4: 0.09}, None, {"1": 0.04, "2": 0.07, "8": 0.12}])
    assert curve == {1: 0.04, 2: 0.06, 4: 0.09, 8: 0.12}  # widths one session lacks come from the other
    assert source["sessions"] == [1, 3]  # session 2 kept no curve
    assert source["session_of_width"] == {1: 3, 2: 1, 4: 1, 8: 3}
    assert source["disagreement"] == pytest.approx(0.2083, abs=1e-4)  # median of 25% and 16.7%
    with pytest.raises(ValueError, match="no session timed a cost curve"):
        combine_curves([None, None])


@pytest.mark.parametrize("factor, warned", [(1.4, True), (1 + CURVE_TOLERANCE + 0.01, True), (1.05, False), (1.0, False)])
def test_sessions_that_disagree_beyond_the_tolerance_are_warned(factor, warned):
    noisy = {w: s * factor for w, s in CURVE.items()}
    noisy[8] = CURVE[8] * 0.99  # one width of the loaded session faster: the median, not one width, decides
    run = build_run(UNITS, curves=(noisy, CURVE))
    assert run.cost_curve == {1: 0.01, 2: 0.012, 4: 0.016, 8: CURVE[8] * 0.99}
    if factor > 1:
        assert run.cost_curve_source.session_of_width == {1: 2, 2: 2, 4: 2, 8: 1}
    assert bool(curve_warning(run)) == warned
    if warned:
        assert f"disagree by {factor - 1:.0%}" in curve_warning(run) and "loaded machine" in curve_warning(run)


def test_the_time_split_prices_forwards_with_the_combined_curve():
    """A loaded session's curve alone would count 40% more of each step as the target forward."""
    def forward(run):
        return step_time([t for s in run.samples if s.method == "fast" for t in s.turns], run.cost_curve).forward

    resumed, quiet, loaded = build_run(UNITS, curves=(LOADED, CURVE)), build_run(UNITS), build_run(UNITS, curves=(LOADED,))
    assert forward(resumed) == forward(quiet) == CURVE[4]
    assert forward(loaded) == pytest.approx(1.4 * CURVE[4])


def test_the_warning_shows_in_the_leaderboard_and_the_targets(write_run, tmp_path):
    run = build_run(UNITS, curves=(LOADED, CURVE))
    path = write_run(run, "2026-01-01-tiny-cpu-00000000.json")
    assert "disagree by 40%" in measured_markdown(path.parent)
    assert "**Warning**: the cost curves of sessions 1, 2 disagree by 40%" in targets_markdown(run, path.name)
    quiet = build_run(UNITS, curves=(CURVE, CURVE))
    assert "Warning" not in targets_markdown(quiet, "q.json")


def tampered(run, tmp_path, edit):
    data = json.loads(dumps(run))
    edit(data)
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("edit, message", [
    (lambda d: d["cost_curve"].update({"1": 0.02}), "does not combine its sessions' curves: cost_curve should be"),
    (lambda d: d["sessions"][0]["cost_curve"].update({"1": 0.001}), "cost_curve should be"),
    (lambda d: d["cost_curve_source"].update(warning=None), "cost_curve_source.warning"),
    (lambda d: d["cost_curve_source"]["session_of_width"].update({"1": 1}), "cost_curve_source.session_of_width"),
    (lambda d: d.pop("cost_curve_source"), "cost_curve_source is missing"),
    (lambda d: d.update(schema_version=1), "sessions' curves need schema_version 2"),
    (lambda d: d.update(schema_version=3), "schema_version"),
])
def test_a_curve_that_is_not_its_sessions_is_refused(tmp_path, edit, message):
    path = tampered(build_run(UNITS, curves=(LOADED, CURVE)), tmp_path, edit)
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        load(path)


def test_schema_1_results_still_load_with_their_one_curve():
    committed = sorted((repo_root() / "results").glob("*.json"))
    old = [load(path) for path in committed if json.loads(path.read_text())["schema_version"] == 1]
    assert old and SCHEMA_VERSION == 2
    for run in old:
        assert run.cost_curve and run.cost_curve_source is None and curve_warning(run) is None
        assert all(session.cost_curve is None for session in run.sessions)


def contender(method_id):
    return SimpleNamespace(id=method_id, record={"id": method_id, "name": method_id, "kind": "specatlas",
                                                 "lossless": True, "setup": "", "error": None, "policy": None})


def assembled(tmp_path, header_curve, session_curves):
    config = {"temperature": 0.0}
    checkpoint = Checkpoint(tmp_path / ".partial-x.jsonl")
    checkpoint.start({"config_hash": "x", "config": config, "provenance": {"started": "2026-01-01T00:00:00+00:00"},
                      **({"cost_curve": header_curve} if header_curve else {})})
    for number, curve in enumerate(session_curves):
        checkpoint.append({"session": {"started": f"2026-01-0{number + 1}", "git_commit": None, "git_dirty": None,
                                       **({"cost_curve": curve} if curve else {})}})
        checkpoint.append(json.loads(json.dumps(UNITS[number % 2])))
    reopened = Checkpoint(checkpoint.path)  # as a resumed session reads it: JSON keys are strings
    return _assemble(reopened, [contender("baseline"), contender("fast")])


def test_a_resumed_run_keeps_every_sessions_curve_and_prices_with_the_fastest(tmp_path):
    run = assembled(tmp_path, None, [LOADED, CURVE])
    assert [s.cost_curve for s in run.sessions] == [LOADED, CURVE]
    assert run.cost_curve == CURVE and run.cost_curve_source.sessions == [1, 2]
    assert "disagree by 40%" in curve_warning(run)


def test_a_schema_1_checkpoint_resumes_with_its_header_curve_as_the_first_sessions(tmp_path):
    run = assembled(tmp_path, {str(w): s for w, s in LOADED.items()}, [None, CURVE])
    assert run.schema_version == SCHEMA_VERSION
    assert [s.cost_curve for s in run.sessions] == [LOADED, CURVE]
    assert run.cost_curve == CURVE and curve_warning(run)
