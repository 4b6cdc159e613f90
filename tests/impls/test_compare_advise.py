"""`specatlas run --compare` and `specatlas advise` on a tiny random Llama loaded with `--model`:
what they report and that advise's command runs. No speed is asserted (speed lives in benchmarks)."""

from __future__ import annotations

import json
import shlex

import pytest

from specatlas import advise
from specatlas.cli import main

from .tiny_world import model_folder

PROMPTS = ["abc abc abc abc abc", "one two one two one two"]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SPECATLAS_CACHE", str(tmp_path_factory.mktemp("cache")))
        patch.setenv("SPECATLAS_PACKED_LINEARS", "0")  # no kernel timing: these tests check reports, not speed
        yield model_folder(tmp_path_factory.mktemp("model") / "tiny-random-llama")


def test_compare_reports_both_speeds_and_identity_of_a_lossless_method(folder, capsys):
    argv = ["run", "pld", "--model", str(folder), "--prompt", PROMPTS[0], "--max-new-tokens", "12", "--compare", "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    compare = out["compare"]
    assert compare["identical"] is True and compare["identity_expected"] is True
    assert compare["baseline_new_tokens"] == compare["new_tokens"] == out["new_tokens"] == 12
    assert compare["tokens_per_second"] == out["tokens_per_second"] and compare["baseline_tokens_per_second"] > 0
    assert compare["speedup"] == pytest.approx(compare["tokens_per_second"] / compare["baseline_tokens_per_second"], rel=0.01)
    assert compare["mean_accepted_tokens"] == out["mean_accepted_tokens"] >= 1


def test_compare_under_sampling_says_identity_is_not_expected(folder, capsys):
    argv = ["run", "pld", "--model", str(folder), "--prompt", PROMPTS[1], "--max-new-tokens", "6", "--compare",
            "--temperature", "1", "--seed", "3"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    line = captured.out.strip().splitlines()[-1]
    assert line.startswith("[compare: plain decoding ") and "saxena2023prompt" in line and "speedup" in line
    assert "(identity not expected: sampling, or a relaxed acceptance rule)" in line
    assert "compared with plain decoding, run first" in captured.err


def test_advise_ranks_the_methods_and_its_command_runs(folder, tmp_path, capsys):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in PROMPTS))
    argv = ["advise", "pld", "llma", "medusa", "--model", str(folder), "--prompts", str(prompts), "--minutes", "10",
            "--max-new-tokens", "8", "--draft-length", "paper", "--json"]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    rows = {row["method"]: row for row in report["methods"]}
    assert set(rows) == {"saxena2023prompt", "yang2023inference", "cai2024medusa"}
    measured = report["methods"][:2]  # measured rows first, fastest first
    assert {r["status"] for r in measured} == {"measured"} and report["methods"][2]["method"] == "cai2024medusa"
    # No result ranks this model: the model-free methods were measured first, in the order named.
    assert report["priors"].startswith(f"no result in results/ ranks {report['model']} on cpu")
    assert report["order"] == ["saxena2023prompt", "yang2023inference"]
    assert [rows[m]["order"] for m in report["order"]] == [1, 2] and rows["cai2024medusa"]["order"] is None
    assert all(row["prior"] is None and row["setup_seconds"] >= 0 for row in rows.values())
    assert [r["measured"] for r in measured] == sorted((r["measured"] for r in measured), reverse=True)
    for row in measured:  # every prompt measured, every output plain decoding's, the sample size stated
        # (but a method measured clearly slower on the first prompt gets no more: on a random model, either may)
        dropped = row["prompts"] == 1
        assert row["reason"] == ("measured below 0.9x plain decoding's speed: given no more prompts" if dropped else None)
        assert row["prompts"] == row["identical"] == row["compared"] and (row["measured"] <= 0.9 or not dropped)
        assert row["prompts"] <= row["tokens"] <= 8 * row["prompts"]
        assert row["predicted"] > 0 and row["accepted"] >= 1
    medusa = rows["cai2024medusa"]
    assert medusa["status"] == "unavailable" and "hidden size" in medusa["reason"]
    assert report["prompts"] == {"source": str(prompts), "count": 2, "measured": 2, "max_new_tokens": 8, "sampling": "greedy"}
    assert set(report["cost_curve"]) >= {"1", "64"}

    best = report["best"]
    assert best["id"] == measured[0]["id"]
    command = shlex.split(best["command"])
    assert command[:3] == ["specatlas", "run", best["method"]] and "--compare" in command
    assert command[command.index("--model") + 1] == str(folder) and command[-1] == PROMPTS[0]

    advise.print_report(report)  # the table, as printed without --json
    table = capsys.readouterr().out
    assert f"   1  {measured[0]['method']}" in table and "cai2024medusa (paper): unavailable: " in table
    assert "measured most promising first (the order column), then re-ranked after each prompt; priors: no result" in table
    assert "From 2 prompts" in table and table.rstrip().endswith(best["command"])

    assert main(command[1:]) == 0  # the recommended command runs as printed
    assert "outputs token-identical (8 and 8 tokens)" in capsys.readouterr().out


@pytest.mark.parametrize("argv, expected", [
    (["--prompts", "{tmp}/none.txt"], "none.txt cannot be read: No such file or directory"),
    (["--prompts", "{tmp}/empty.txt"], "empty.txt holds no prompts"),
    (["--prompts", "{tmp}/bad.jsonl"], "bad.jsonl:2: expected a JSON object with a non-empty \"prompt\""),
    (["--prompts", "{tmp}/latin1.txt"], "latin1.txt:1: byte 0xe9 at offset 3 is not UTF-8"),
    (["--minutes", "0"], "--minutes must be a positive number of minutes"),
    (["--minutes", "-2"], "--minutes must be a positive number of minutes"),
    (["--minutes", "nan"], "--minutes must be a positive number of minutes"),
    (["--max-new-tokens", "0"], "--max-new-tokens must be at least 1"),
    (["--draft-length", "deep"], "--draft-length must be 'both', 'paper', 'cost-aware'"),
    (["pdl"], "unknown method 'pdl'"),
    (["hf-generate"], "hf-generate is a peer library, measured by `specatlas bench`"),
])
def test_advise_refuses_bad_input_in_one_line_before_loading(argv, expected, tmp_path, capsys):
    (tmp_path / "empty.txt").write_text("\n  \n")
    (tmp_path / "bad.jsonl").write_text('{"prompt": "fine"}\n{"text": "no prompt"}\n')
    (tmp_path / "latin1.txt").write_bytes("caf\u00e9".encode("latin-1"))
    status = main(["advise", *(a.replace("{tmp}", str(tmp_path)) for a in argv)])
    err = capsys.readouterr().err
    assert status == 2 and expected in err and err.count("\n") == 1 and "Traceback" not in err, err


def test_the_default_prompts_take_every_subtask_in_turn():
    prompts, source = advise.read_prompts(None)
    from specatlas.bench import questions as qs

    questions = qs.load(None).questions
    categories = list(dict.fromkeys(q.category for q in questions))
    first_of = {c: next(q.turns[0] for q in questions if q.category == c) for c in categories}
    assert prompts[: len(categories)] == [first_of[c] for c in categories]
    assert sorted(prompts) == sorted(q.turns[0] for q in questions) and "specatlas-prompts-v1" in source
