"""The built-in prompt set, and bad input: a clear one-line error, never a traceback."""

import re

import pytest

from specatlas.bench import questions
from specatlas.cli import main
from specatlas.contamination import shared_text


def words(text):
    return re.findall(r"[a-z']+", text.lower())


def test_builtin_set_covers_the_six_subtasks_with_long_inputs_where_they_belong():
    prompt_set = questions.load()
    assert prompt_set.id == "specatlas-prompts-v1" and len(prompt_set.sha256) == 64
    by_category = {}
    for q in prompt_set.questions:
        by_category.setdefault(q.category, []).append(q)
    assert set(by_category) == set(questions.SUBTASKS)
    assert all(len(qs) >= 8 for qs in by_category.values())
    assert all(len(q.turns) == 2 for q in by_category["mt_bench"])
    assert all(len(words(q.turns[0])) >= 200 for q in by_category["summarization"] + by_category["rag"])
    assert all(len(words(q.turns[0])) >= 50 for q in by_category["translation"])


def test_builtin_set_shares_no_text_with_spec_bench():
    assert not shared_text([turn for q in questions.load().questions for turn in q.turns])


def test_spec_bench_categories_map_to_its_subtasks(tmp_path):
    path = tmp_path / "q.jsonl"
    path.write_text('{"question_id": 81, "category": "writing", "turns": ["a", "b"]}\n\n'
                    '{"question_id": "x", "category": "qa", "turns": ["c"]}\n')
    loaded = questions.load(path)
    assert [(q.id, q.category) for q in loaded.questions] == [("81", "mt_bench"), ("x", "qa")]
    assert [q.id for q in questions.select(loaded.questions, ["writing"], None)] == ["81"]
    assert [q.id for q in questions.select(loaded.questions, None, 1)] == ["81", "x"]


@pytest.mark.parametrize("content, message", [
    ('{"question_id": 1, "category": "qa", "turns": ["a"]}\n{"question_id": 2,', ":2: not valid JSON"),
    ('{"question_id": 1, "category": "qa"}\n', ":1: missing turns"),
    ('{"question_id": 1, "category": "qa", "turns": "a"}\n', ":1: turns must be a non-empty list"),
    ('{"question_id": 1, "category": "qa", "turns": ["a"]}\n{"question_id": 1, "category": "qa", "turns": ["b"]}\n',
     ":2: question_id 1 appears twice"),
    ("[1, 2]\n", ":1: expected an object"),
    ("", ": no questions"),
])
def test_malformed_questions_file_is_reported_by_line(tmp_path, capsys, content, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    assert main(["bench", "baseline", "--questions", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}{message}" in err and "Traceback" not in err


@pytest.mark.parametrize("argv, message", [
    (["speculative-decodin"], "unknown method 'speculative-decodin'; did you mean speculative-decoding"),
    (["hf-asisted"], "did you mean hf-assisted"),
    ([], "name methods to measure, or --all"),
    (["--all", "--max-new-tokens", "0"], "--max-new-tokens must be at least 1"),
    (["--all", "--draft-length", "many"], "--draft-length must be 'both', 'paper', 'cost-aware' or a positive integer"),
    (["--all", "--categories", "poetry"], "no questions in categories poetry"),
    (["--all", "--questions", "/nonexistent/q.jsonl"], "/nonexistent/q.jsonl: cannot be read"),
])
def test_bad_arguments_get_one_clear_line(capsys, argv, message):
    assert main(["bench", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_list_shows_registry_and_peers(capsys):
    assert main(["bench", "--list"]) == 0
    out = capsys.readouterr().out
    assert "baseline" in out and "hf-prompt-lookup" in out
