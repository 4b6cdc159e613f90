"""Per-step time (drafting, target forward, overhead) and the speed targets, on a synthetic run whose
numbers are worked out by hand. Cost curve (benchruns): c(1) = 10 ms, c(2) = 12 ms, c(4) = 16 ms, c(8) = 24 ms.

Per turn (two questions, qa and rag; every row's tokens equal the baseline's):
- baseline: 4 steps at width 1, verification 48 ms -> forward 10 ms/step, overhead 2 ms/step (20%);
  1.0 s per turn: 4 tokens/s.
- li2024eagle2 (trained head): 2 steps at width 4, drafting 10 ms, verification 33 ms -> forward 16,
  overhead 0.5 ms/step (5%); 0.4 s (qa, 2.5x) and 0.5 s (rag, 2.0x): 2.25x overall.
- saxena2023prompt (no trained head): 3 steps at width 2, drafting 3 ms, verification 45 ms -> forward
  12, overhead 3 ms/step (30%); 0.5 s (qa, 2.0x) and 1.25 s (rag, 0.8x): 1.4x overall.
- hf-generate (a peer, untimed steps): 1.25 s per turn, 0.8x: our baseline is 1.25x its throughput.
- llama.cpp (when present): greedy 0.5 s, prompt lookup 0.4 s per turn: 1.25x over its own greedy.
"""

import pytest

from benchruns import build_run, sample, turn

from specatlas.bench.leaderboard_page import measured_markdown
from specatlas.bench.targets import targets_markdown
from specatlas.bench.result_files import load
from specatlas.bench.results import LLAMACPP_GREEDY, LLAMACPP_LOOKUP, Turn, predicted_speedup, step_time
from specatlas.cli import main

from test_bench_leaderboard import table_rows

EAGLE2, PLD = "li2024eagle2@cost-aware", "saxena2023prompt@cost-aware"
LLAMACPP = (LLAMACPP_GREEDY, LLAMACPP_LOOKUP)
TOKENS = {"1": [1, 2, 3, 4], "2": [5, 6, 7, 8]}
CATEGORY = {"1": "qa", "2": "rag"}


def targets_run(llamacpp=False):
    rows = {  # row -> (turn arguments per question, shared turn arguments)
        "baseline": ({"1": 1.0, "2": 1.0}, dict(steps=4, widths={1: 4}, draft=0.0, verify=0.048)),
        EAGLE2: ({"1": 0.4, "2": 0.5}, dict(steps=2, widths={4: 2}, draft=0.01, verify=0.033)),
        PLD: ({"1": 0.5, "2": 1.25}, dict(steps=3, widths={2: 3}, draft=0.003, verify=0.045)),
        "hf-generate": ({"1": 1.25, "2": 1.25}, dict(timed=False)),
    }
    if llamacpp:
        rows[LLAMACPP[0]] = ({"1": 0.5, "2": 0.5}, dict(timed=False))
        rows[LLAMACPP[1]] = ({"1": 0.4, "2": 0.4}, dict(timed=False))
    samples = [sample(row, q, CATEGORY[q], turn(TOKENS[q], seconds, **shared))
               for row, (per_question, shared) in rows.items() for q, seconds in per_question.items()]
    # llama.cpp rows as bench writes them: measured against llama.cpp greedy (contenders.llamacpp_peer)
    fields = {"hf-generate": {"kind": "peer"}} | {m: {"kind": "peer", "relative_to": LLAMACPP_GREEDY} for m in LLAMACPP}
    return build_run(samples, methods=tuple(rows), fields=fields)


def turns_of(run, row):
    return [t for s in run.samples if s.method == row for t in s.turns]


def test_step_time_splits_drafting_forward_and_overhead():
    run = targets_run()
    base, eagle, pld = (step_time(turns_of(run, row), run.cost_curve) for row in ("baseline", EAGLE2, PLD))
    assert (base.steps, base.drafting, base.forward, base.one_token) == (8, 0.0, pytest.approx(0.010), 0.01)
    assert base.overhead == pytest.approx(0.002) and base.overhead_share == pytest.approx(0.2)
    assert (eagle.drafting, eagle.forward, eagle.overhead) == pytest.approx((0.005, 0.016, 0.0005))
    assert pld.overhead_share == pytest.approx(0.3) and pld.total == pytest.approx(0.001 + 0.012 + 0.003)
    # mean accepted tokens count tokens per step: the same steps the per-step time divides by
    assert run.summary[PLD]["overall"]["mean_accepted"] == pytest.approx(8 / pld.steps, abs=1e-4)
    assert step_time(turns_of(run, "hf-generate"), run.cost_curve) is None  # a peer's steps are not timed


def test_neither_step_time_nor_the_predicted_speedup_is_priced_where_the_widths_miss_steps():
    # Kangaroo's verification resumes from its early exit, outside the counted forward: priced at
    # the one forward counted, its predicted speedup read 0.15x beside a measured 0.97x.
    resumed = Turn.model_validate(turn([1, 2, 3, 4], 1.0, steps=4, widths={1: 1}))  # 3 forwards not counted
    plain = Turn.model_validate(turn([1, 2], 1.0, steps=2, widths={1: 2}))
    assert step_time([plain, resumed], {1: 0.01}) is None
    assert step_time([plain], {1: 0.01}) is not None
    assert predicted_speedup([plain, resumed], {1: 0.01}) is None
    assert predicted_speedup([plain], {1: 0.01}) == 1.0
    run = build_run([sample("baseline", "1", "qa", turn([1, 2, 3, 4], 1.0)),
                     sample("fast", "1", "qa", turn([1, 2, 3, 4], 1.0, steps=2, widths={2: 1}))])
    assert run.summary["fast"]["overall"]["predicted"] is None
    # A peer's steps count its prefill, which its widths leave out: still priced.
    peer = Turn.model_validate(turn([1, 2, 3], 1.0, steps=3, widths={1: 2}, timed=False))
    assert predicted_speedup([peer], {1: 0.01}) is not None


def test_step_time_takes_the_forwards_as_timed_where_every_turn_records_them():
    # 4 steps, 48 ms of verification of which 44 ms in the forwards: the cost curve's 10 ms per
    # one-token forward would leave 8 ms of "overhead" that is attention over a longer context.
    timed = Turn.model_validate(turn([1, 2, 3, 4], 1.0, verify=0.048, draft=0.0, forward=0.044))
    measured = step_time([timed], {1: 0.01})
    assert measured.measured and (measured.forward, measured.overhead) == pytest.approx((0.011, 0.001))
    assert measured.overhead_share == pytest.approx(0.1)
    # early-exit turns, whose widths miss steps, split too: the forward was timed, not priced
    resumed = Turn.model_validate(turn([1, 2, 3, 4], 1.0, steps=4, widths={1: 1}, verify=0.048, forward=0.04))
    assert step_time([resumed], {1: 0.01}).forward == pytest.approx(0.01)
    # one turn without the timing (an older result file's session): all are priced
    priced = step_time([timed, Turn.model_validate(turn([1, 2], 1.0, verify=0.024, draft=0.0))], {1: 0.01})
    assert not priced.measured and priced.forward == pytest.approx(0.01)


def test_a_turn_whose_forwards_exceed_its_verification_is_refused():
    with pytest.raises(ValueError, match="forward_seconds is part of verify_seconds"):
        Turn.model_validate(turn([1, 2], 1.0, verify=0.02, forward=0.03))
    with pytest.raises(ValueError, match="forward_seconds is part of verify_seconds"):
        Turn.model_validate(turn([1, 2], 1.0, timed=False, forward=0.01))


def test_leaderboard_time_table_shows_the_per_step_forward_and_overhead(write_run):
    page = measured_markdown(write_run(targets_run()).parent)
    rows = {r.split("|")[1].strip(): r for r in table_rows(page, "Where the time goes")}
    assert "| 16.00 | 0.50 | 5% |" in rows["li2024eagle2"] and "| 12.00 | 3.00 | 30% |" in rows["saxena2023prompt"]
    assert "| 10.00 | 2.00 | 20% |" in rows["baseline"] and "| – | – | – |" in rows["hf\\-generate"]


def target_rows(markdown):
    return {r.split(" | ")[0].lstrip("| "): r.split(" | ")[1:] for r in table_rows(markdown, "| Target |")}


def test_targets_state_each_measurement_and_whether_it_is_met():
    page = targets_markdown(targets_run(), "run.json")
    rows = target_rows(page)
    best, plain, tuned, wide, overhead, generate, llamacpp = rows.values()
    assert best == ["li2024eagle2@cost\\-aware (trained heads): 2.25×", "yes |"]
    assert plain == ["saxena2023prompt@cost\\-aware: 1.40×", "– |"]
    assert tuned == ["1 of 2 rows below in some category (listed below)", "**no** |"]
    assert wide == ["2.40× (24.00 ms / 10.00 ms)", "**no** |"]
    assert overhead[0].startswith("1 of 3 rows within; baseline 20%; most: saxena2023prompt@cost\\-aware 3.00 ms (30%)")
    assert overhead[1] == "**no** |"
    assert generate[0].startswith("our baseline 1.25× `generate`'s throughput") and generate[1] == "yes |"
    assert llamacpp == ["not measured: this run has no llamacpp\\-greedy row; this run has no llamacpp\\-prompt\\-lookup row",
                        "– |"]
    assert table_rows(page, "below 1.00× in a category") == [
        "| saxena2023prompt@cost\\-aware | Retrieval\\-aug\\. Generation | 0.800× |"]
    assert table_rows(page, "**Per-step time**")[0] == "| baseline | 8 | 12.00 | 0.00 | 10.00 | 2.00 | 20% |"


def test_targets_compare_our_pld_with_llamacpp_prompt_lookup_over_its_own_greedy():
    rows = target_rows(targets_markdown(targets_run(llamacpp=True), "run.json"))
    llamacpp = rows["Our PLD's speedup ≥ llama.cpp prompt lookup's over its own greedy"]
    assert llamacpp == ["saxena2023prompt@cost\\-aware 1.40× over our baseline; llamacpp-prompt-lookup 1.25× over "
                        "llamacpp-greedy", "yes |"]


def test_targets_command_reads_one_result_file(write_run, capsys, tmp_path):
    path = write_run(targets_run())
    assert main(["leaderboard", "--targets", str(path)]) == 0
    out = capsys.readouterr().out
    assert out == targets_markdown(load(path), path.name) + "\n"
    broken = tmp_path / "broken.json"
    broken.write_text('{"schema_version": 1')
    assert main(["leaderboard", "--targets", str(broken)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"specatlas leaderboard: {broken}: ") and err.count("\n") == 1
