"""`specatlas gpu-check` (`make gpu-check`): every method against plain decoding on the device it is
given, then a bench slice whose result file `specatlas results check` accepts. On the CPU here, kept
small through its arguments; on a GPU with its defaults."""

from __future__ import annotations

import argparse
import dataclasses
import json
from types import SimpleNamespace

import pytest

from specatlas import gpu_check
from specatlas.bench.check import check
from specatlas.cli import main
from specatlas.impls.engine import models
from specatlas.impls.registry import METHODS
from tests.impls.toy import tiny_llama

QUESTIONS = [{"question_id": "chat", "category": "writing", "turns": ["Name a colour.", "Name another one."]},
             {"question_id": "fact", "category": "qa", "turns": ["What is the capital of France?"]}]


class Tokenizer:
    chat_template = None
    pad_token_id, eos_token_id = 0, 15

    def __call__(self, text):
        return SimpleNamespace(input_ids=[1 + ord(ch) % 13 for ch in text])


class Fixed:
    """A decoder whose output is given: `tokens` (None: plain decoding's) and whether it drafted."""

    def __init__(self, target, tokens, drafted):
        self.plain, self.tokens, self.drafted = METHODS["baseline"].build(target), tokens, drafted

    def generate(self, prompt, max_new_tokens, stop=None):
        out = self.plain.generate(prompt, max_new_tokens, stop=stop)
        return SimpleNamespace(tokens=self.tokens or out.tokens, stats=SimpleNamespace(drafted_at=[self.drafted]))


def drafts_plain(target, *args, **kwargs):
    return Fixed(target, None, 1)


def never_drafts(target, *args, **kwargs):
    return Fixed(target, None, 0)


def diverges(target, *args, **kwargs):
    return Fixed(target, [1, 2, 3], 1)


def fails(target, *args, **kwargs):
    raise RuntimeError("no kernel for this device\nsecond line")


def test_each_method_that_diverges_never_drafts_or_fails_is_one_line(monkeypatch, capsys):
    target = tiny_llama(3, layers=4).float()
    asked = []
    monkeypatch.setattr(models, "load_model", lambda name, device, dtype, kernels: asked.append((name, device, dtype)) or
                        models.LoadedModel(target, Tokenizer(), "tiny"))
    builders = dict(zip(["saxena2023prompt", "fu2024break", "cai2024medusa", "li2024eagle2"],
                        [drafts_plain, never_drafts, diverges, fails]))
    for method_id, builder in builders.items():
        monkeypatch.setitem(METHODS, method_id, dataclasses.replace(METHODS[method_id], builder=f"tests.test_gpu_check:{builder.__name__}"))
    args = argparse.Namespace(device="cpu", dtype="float32", max_new_tokens=6)
    problems = gpu_check.identical_outputs(args, list(builders))
    assert problems == ["fu2024break: never drafted", "cai2024medusa: differs from plain decoding on check prompt 1",
                        "li2024eagle2: fails on cpu: RuntimeError: no kernel for this device"]
    assert [(name, str(device), str(dtype)) for name, device, dtype in asked] == [(None, "cpu", "torch.float32")]
    assert "saxena2023prompt: identical" in capsys.readouterr().err


def test_bad_input_is_one_line_before_any_model_loads(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(models, "load_model", lambda *args: pytest.fail("a model loaded"))
    (tmp_path / "q.jsonl").write_text("not json\n")
    assert main(["gpu-check", "--methods", "nosuch"]) == 2
    assert main(["gpu-check", "--bench-methods", "pld,hf-generate"]) == 2
    assert main(["gpu-check", "--questions", str(tmp_path / "q.jsonl")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and "Traceback" not in "".join(err)
    assert "unknown method 'nosuch'" in err[0] and "hf-generate is a peer library" in err[1] and "q.jsonl:1" in err[2]


def test_a_device_that_is_not_there_is_one_line(monkeypatch, capsys):
    monkeypatch.setattr(models.torch.cuda, "is_available", lambda: False)
    assert main(["gpu-check", "--device", "cuda", "--methods", "pld"]) == 1
    assert capsys.readouterr().err.strip() == "specatlas gpu-check: device 'cuda' is not available on this machine"


@pytest.mark.model
def test_on_the_cpu_every_output_is_identical_and_the_result_file_is_fit(tmp_path, capsys):
    """The make target's command on the CPU, with two methods, one bench method, two questions and
    few tokens."""
    questions = tmp_path / "prompts" / "questions.jsonl"
    questions.parent.mkdir()
    questions.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    code = main(["gpu-check", "--device", "cpu", "--methods", "pld,medusa", "--max-new-tokens", "8",
                 "--bench-methods", "pld", "--bench-tokens", "8", "--questions", str(questions), "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert "saxena2023prompt: identical" in err and "cai2024medusa: identical" in err
    assert "2 of 2 methods identical to plain decoding on cpu" in err
    [result] = tmp_path.glob("*.json")
    problems = check(result)
    # The cost curve's bounds are timings: a machine busy with other work can break them, and the
    # file is then rightly refused, by gpu-check too. Everything else must pass.
    assert [problem for problem in problems if not problem.startswith("cost_curve")] == []
    assert code == (1 if problems else 0)
    assert all(f"{result}: {problem}" in err for problem in problems)
    run = json.loads(result.read_text())
    assert run["config"]["device"] == "cpu" and run["config"]["methods"] == ["baseline", "saxena2023prompt"]
    assert run["config"]["draft_length"] == "paper" and run["config"]["max_new_tokens"] == 8
