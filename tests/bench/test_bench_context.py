"""A question longer than the target's context is left out of `specatlas bench` out loud: a line
on stderr and a note in the result's provenance, never a silent drop or a method's row ended
(test_bench_end_to_end checks both on a real run)."""

from types import SimpleNamespace

import pytest

from specatlas.bench import questions as qs
from specatlas.bench.protocol import BenchError, fitting


class Words:
    """A tokenizer of one token per word and no chat template: encode_conversation joins the turns."""

    chat_template = None

    def __call__(self, text):
        return SimpleNamespace(input_ids=[1] * len(text.split()))


def target(context: int):
    return SimpleNamespace(name="tiny", tokenizer=Words(), model=SimpleNamespace(config=SimpleNamespace(max_position_embeddings=context)))


QUESTIONS = [
    qs.Question("short", "qa", ("one two three",)),
    qs.Question("long", "qa", (" ".join(["word"] * 14),)),
    # Its first turn fits (5 + 4 of 16); with its answer before the second turn it would not (10 + 2 x 4).
    qs.Question("chat", "writing", ("a b c d e", "f g h i j")),
]


def test_a_question_past_the_context_is_named_and_left_out(capsys):
    kept, left_out = fitting(QUESTIONS, target(16), max_new_tokens=4)
    assert [q.id for q in kept] == ["short"]
    assert [note["question_id"] for note in left_out] == ["long", "chat"]
    assert left_out[0]["reason"] == ("its prompt: the prompt is 14 tokens and 4 new tokens are asked for: together "
                                     "more than the model's 16-token context; shorten the prompt or ask for fewer tokens")
    assert left_out[1]["reason"].startswith("its 2 turns, each answer counted at --max-new-tokens: the prompt is 10 "
                                            "tokens and 8 new tokens are asked for")
    lines = capsys.readouterr().err.splitlines()
    assert lines == [f"specatlas bench: leaving out question {note['question_id']}: {note['reason']}" for note in left_out]


def test_every_question_fits_a_large_enough_context(capsys):
    kept, left_out = fitting(QUESTIONS, target(18), max_new_tokens=4)
    assert [q.id for q in kept] == ["short", "long", "chat"] and left_out == []
    assert capsys.readouterr().err == ""


def test_no_question_that_fits_is_refused_in_one_line(capsys):
    with pytest.raises(BenchError, match=r"^no chosen question fits tiny's context with --max-new-tokens 20 "
                                         r"\(question short: its prompt: the prompt is 3 tokens") as caught:
        fitting(QUESTIONS, target(16), max_new_tokens=20)
    assert "\n" not in str(caught.value)

