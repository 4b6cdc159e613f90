"""On the real embedded model: every lossless method reproduces greedy decoding token for token,
the cache survives a rejection, and `specatlas run` works end to end."""

import json
import os

import pytest
import torch

from specatlas.cli import main
from specatlas.impls.engine import kv
from specatlas.impls.engine.draft_length import DraftLengthPolicy
from specatlas.impls.engine.models import encode_chat, eos_ids
from specatlas.impls.registry import METHODS

pytestmark = pytest.mark.model

PROMPTS = [
    "Explain speculative decoding in two sentences.",
    "Write a Python function that returns the n-th Fibonacci number.",
    "List the planets of the solar system in order.",
    "Translate to French: The cat sleeps on the warm windowsill.",
    "Summarize: Bees pollinate flowers. Without bees, many crops would fail. Bees are declining.",
]
NEW_TOKENS = 64


@pytest.fixture(scope="module")
def baseline_outputs(embedded):
    decoder = METHODS["baseline"].build(embedded.model)
    stop = eos_ids(embedded.model, embedded.tokenizer)
    return [decoder.generate(encode_chat(embedded.tokenizer, p), NEW_TOKENS, stop=stop).tokens for p in PROMPTS]


# Greedy decoding is exact for every method, the relaxed ones (Medusa's typical acceptance) included.
SPECULATIVE = [m for m in METHODS.values() if m.id != "baseline"]


def build(method, model, **settings):
    """A method whose trained piece is not shipped fails under CI (elsewhere it is skipped with the
    reason: `specatlas train` ships it)."""
    from specatlas.impls.families.checkpoints import HeadNotShipped

    try:
        return method.build(model, **settings)
    except HeadNotShipped as exc:
        if os.environ.get("CI"):
            pytest.fail(f"{method.id}: {exc}")
        pytest.skip(str(exc))


def assert_greedy_identical(embedded, method, policy, prompts, tokens, want):
    decoder = build(method, embedded.model, policy=policy)
    stop = eos_ids(embedded.model, embedded.tokenizer)
    drafted = 0
    for prompt, expected in zip(prompts, want):
        output = decoder.generate(encode_chat(embedded.tokenizer, prompt), tokens, stop=stop)
        assert output.tokens == expected[:tokens], f"{method.id} ({policy.name}) diverged on {prompt!r}"
        drafted += sum(output.stats.drafted_at)
    if not policy.is_cost_aware:  # the cost-aware policy may find that no draft pays on this machine
        assert drafted > 0, f"{method.id} ({policy.name}) never drafted"


QUICK_TOKENS = 32


@pytest.mark.parametrize("method", SPECULATIVE, ids=lambda m: m.id)
def test_greedy_output_is_token_identical_to_baseline(embedded, baseline_outputs, method):
    """The quick tier: each method at its paper's settings, one prompt x 32 tokens."""
    assert_greedy_identical(embedded, method, DraftLengthPolicy.paper(), PROMPTS[:1], QUICK_TOKENS, baseline_outputs)


@pytest.mark.full
@pytest.mark.parametrize("prompt", range(len(PROMPTS)))
@pytest.mark.parametrize("policy", [DraftLengthPolicy.paper(), DraftLengthPolicy.cost_aware()], ids=lambda policy: policy.name)
@pytest.mark.parametrize("method", SPECULATIVE, ids=lambda m: m.id)
def test_greedy_matrix_is_token_identical_to_baseline(embedded, baseline_outputs, method, policy, prompt):
    """The full tier: every method x policy x prompt, 64 tokens (one test per prompt so -n 2 balances)."""
    assert_greedy_identical(embedded, method, policy, PROMPTS[prompt:prompt + 1], NEW_TOKENS,
                            baseline_outputs[prompt:prompt + 1])


def test_run_drafts_with_the_papers_gamma_and_says_so(embedded, capsys):
    assert main(["run", "leviathan2023fast", "--prompt", PROMPTS[0], "--max-new-tokens", "16", "--json", "--device", "cpu"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["policy"] == "paper" and "γ = 7" in result["paper_settings"]
    assert result["draft_length"] == "the paper's draft length 7"
    assert result["drafted_at"] and result["drafted_at"][0] > 0


def test_a_prompt_longer_than_the_context_gets_one_line(embedded, capsys):
    long = "word " * (embedded.model.config.max_position_embeddings + 10)
    assert main(["run", "pld", "--prompt", long, "--max-new-tokens", "4", "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert "the model's context holds" in err and err.count("\n") == 1 and "Traceback" not in err


def test_baseline_matches_transformers_generate(embedded, baseline_outputs):
    ids = encode_chat(embedded.tokenizer, PROMPTS[0])
    generated = embedded.model.generate(torch.tensor([ids]), max_new_tokens=NEW_TOKENS, do_sample=False)
    assert generated[0, len(ids):].tolist() == baseline_outputs[0]


def test_cache_after_rejection_equals_fresh_prefill(embedded):
    model = embedded.model
    prompt = encode_chat(embedded.tokenizer, PROMPTS[1])
    draft, parents = [11, 22, 33, 44], [-1, 0, -1, 2]  # two branches; the second is kept
    with torch.no_grad():
        cache = kv.new_cache(model)
        kv.forward(model, cache, prompt[:-1])
        kv.forward(model, cache, [prompt[-1]] + draft, tree=[-1] + [p + 1 for p in parents])
        kv.keep_rows(cache, len(prompt) - 1, [0, 3])  # root, then node 2 (token 33)
        assert kv.cache_length(cache) == len(prompt) + 1
        rolled_back = kv.forward(model, cache, [55]).logits[-1]
        fresh = kv.forward(model, kv.new_cache(model), prompt + [33, 55]).logits[-1]
    torch.testing.assert_close(rolled_back, fresh, rtol=1e-4, atol=1e-4)


def test_cli_runs_a_method_as_json(embedded, capsys):
    assert main(["run", "pld", "--prompt", PROMPTS[2], "--max-new-tokens", "8", "--json", "--device", "cpu"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["method"] == "saxena2023prompt" and result["new_tokens"] == 8 and result["text"]
    assert result["target_forwards"] >= 2 and result["peak_rss_mb"] > 0


@pytest.mark.parametrize("method", ["draft-and-verify", "swift"])
def test_self_speculative_runs_name_the_skipped_layers(embedded, capsys, method):
    assert main(["run", method, "--prompt", PROMPTS[2], "--max-new-tokens", "8", "--json", "--device", "cpu"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert "the target skipping layers [" in result["drafter"] and result["paper_settings"]


def test_a_method_whose_trained_piece_is_missing_says_so_in_one_line(embedded, tmp_path, monkeypatch, capsys):
    from specatlas.impls.families import checkpoints

    monkeypatch.setattr(checkpoints, "SHIPPED_HEADS", tmp_path)
    assert main(["run", "kangaroo", "--prompt", PROMPTS[0], "--max-new-tokens", "4", "--device", "cpu"]) == 1
    err = capsys.readouterr().err
    assert "no trained kangaroo head is shipped yet" in err and err.count("\n") == 1
