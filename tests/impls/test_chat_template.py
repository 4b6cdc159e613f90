"""A model's chat template renders as transformers renders it, but in a child bounded in time,
memory and output: a runaway template is one line, never a hang or a blow-up of this process."""

from __future__ import annotations

import json
import time

import pytest

from specatlas.impls.engine import chat
from specatlas.impls.engine.chat import ChatTemplateError, render_chat
from specatlas.impls.engine.models import encode_chat

from .tiny_world import model_folder

TURN = [{"role": "user", "content": "hello there"}]


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model_folder(tmp_path_factory.mktemp("tiny") / "model"))


def templated(tokenizer, template: str):
    tokenizer.chat_template = template
    return tokenizer


def test_a_template_renders_as_transformers_renders_it(tokenizer):
    templated(tokenizer, "{% for m in messages %}[{{ m.role }}] {{ m.content }}{% endfor %}"
                         "{% if add_generation_prompt %}[assistant]{% endif %}")
    want = tokenizer.apply_chat_template(TURN, tokenize=False, add_generation_prompt=True)
    assert render_chat(tokenizer, TURN) == want == "[user] hello there[assistant]"
    assert encode_chat(tokenizer, "hello there") == tokenizer(want, add_special_tokens=False).input_ids


def test_a_template_that_never_ends_is_stopped_at_the_bound(tokenizer, monkeypatch):
    monkeypatch.setattr(chat, "RENDER_SECONDS", 1.0)
    templated(tokenizer, "{% for a in range(99999) %}{% for b in range(99999) %}{% endfor %}{% endfor %}")
    started = time.monotonic()
    with pytest.raises(ChatTemplateError, match="did not finish within 1 s"):
        render_chat(tokenizer, TURN)
    assert time.monotonic() - started < 5


def test_a_template_writing_too_much_is_refused(tokenizer, monkeypatch):
    monkeypatch.setattr(chat, "RENDER_BYTES", 1 << 16)
    templated(tokenizer, "{% for i in range(99999) %}xxxxxxxxxx{% endfor %}")
    with pytest.raises(ChatTemplateError, match="wrote over 65,536 bytes"):
        render_chat(tokenizer, TURN)


def test_a_template_filling_memory_is_stopped_in_its_child(tokenizer):
    templated(tokenizer, "{% set ns = namespace(s='xxxxxxxx') %}{% for i in range(60) %}{% set ns.s = ns.s ~ ns.s %}"
                         "{% endfor %}{{ ns.s }}")
    with pytest.raises(ChatTemplateError, match="memory|without an answer"):
        render_chat(tokenizer, TURN)


@pytest.mark.parametrize("template, reason", [
    ("{{ raise_exception('no system role') }}", "failed: no system role"),
    ("{{ messages.__class__.__mro__ }}", "unsafe"),
    ("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "recursion"),
    ("{% for %}", "failed"),
])
def test_a_failing_template_is_one_line(tokenizer, template, reason):
    templated(tokenizer, template)
    with pytest.raises(ChatTemplateError, match=reason) as caught:
        render_chat(tokenizer, TURN)
    assert "\n" not in str(caught.value)


def test_text_outside_ascii_and_lone_surrogates_round_trip(tokenizer):
    templated(tokenizer, "{{ messages[0].content }}")
    text = "caf\u00e9 \u2028 \U0001f600 \udce9"
    assert render_chat(tokenizer, [{"role": "user", "content": text}]) == text
    assert json.dumps(text)  # unchanged, surrogate included


def test_many_turns_render_in_one_child_each_as_alone(tokenizer, monkeypatch):
    templated(tokenizer, "[{{ messages[0].content }}]")
    turns = [[{"role": "user", "content": f"prompt {i} caf\u00e9"}] for i in range(50)]
    forks = []
    fork = chat.os.fork
    monkeypatch.setattr(chat.os, "fork", lambda: forks.append(1) or fork())
    assert chat.render_chats(tokenizer, turns) == [f"[prompt {i} caf\u00e9]" for i in range(50)]
    assert len(forks) == 1
