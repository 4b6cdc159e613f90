"""KV-cache rollback: after a rejection the cache is exactly a fresh prefill of the accepted text."""

import pytest
import torch

from specatlas.impls.engine import kv

from .toy import tiny_llama

PROMPT = [1, 2, 3, 4, 5]
# Two branches after the last prompt token: 6 -> 7 and 8 -> 9 -> 10.
TOKENS, PARENTS = [6, 7, 8, 9, 10], [-1, 0, -1, 2, 3]


def verify_then_commit(model, accepted: list[int], next_token: int):
    cache = kv.new_cache(model)
    kv.forward(model, cache, PROMPT[:-1])
    out = kv.forward(model, cache, [PROMPT[-1]] + TOKENS, tree=[-1] + [p + 1 for p in PARENTS])
    kv.keep_rows(cache, len(PROMPT) - 1, [0] + [node + 1 for node in accepted])
    return cache, out.logits


@pytest.fixture(scope="module")
def model():
    return tiny_llama(seed=5)


@pytest.mark.parametrize("accepted", [[], [0], [0, 1], [2], [2, 3], [2, 3, 4]], ids=str)
def test_cache_after_acceptance_equals_fresh_prefill(model, accepted):
    with torch.no_grad():
        cache, _ = verify_then_commit(model, accepted, next_token=11)
        committed = PROMPT + [TOKENS[node] for node in accepted]
        assert kv.cache_length(cache) == len(committed)
        rolled_back = kv.forward(model, cache, [11]).logits[-1]
        fresh = kv.forward(model, kv.new_cache(model), committed + [11]).logits[-1]
    torch.testing.assert_close(rolled_back, fresh, rtol=0, atol=1e-9)


def test_tree_rows_score_each_branch_as_if_alone(model):
    with torch.no_grad():
        _, tree_logits = verify_then_commit(model, [], 0)
        for path in ([0, 1], [2, 3, 4]):
            sequence = PROMPT + [TOKENS[node] for node in path]
            alone = kv.forward(model, kv.new_cache(model), sequence).logits[len(PROMPT) - 1 :]
            torch.testing.assert_close(tree_logits[[0] + [node + 1 for node in path]], alone, rtol=0, atol=1e-9)


def tiny_mistral(window: int):
    from transformers import MistralConfig, MistralForCausalLM

    torch.manual_seed(3)
    config = MistralConfig(vocab_size=16, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                           num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                           sliding_window=window, bos_token_id=0, eos_token_id=None, pad_token_id=None)
    return MistralForCausalLM(config).to(torch.float64).eval()


def test_prompt_lookup_runs_past_a_sliding_window_as_greedy_decoding():
    """Sliding-window caches keep only the window; a rollback must not lose rows nor leave the
    layer's length counter stale (it did: every later position was off)."""
    from specatlas.impls.engine.decoding import SpeculativeDecoder
    from specatlas.impls.engine.draft_length import FixedLength
    from specatlas.impls.engine.drafting import PromptLookup

    window = 8
    model = tiny_mistral(window)
    cache = kv.new_cache(model)
    assert any(getattr(layer, "is_sliding", False) for layer in cache.layers)
    prompt, new = [1, 2, 3, 4, 5, 6] * 2, 64 + window
    baseline = SpeculativeDecoder(model).generate(prompt, new).tokens
    with torch.no_grad():
        reference = model.generate(torch.tensor([prompt]), max_new_tokens=new, do_sample=False)[0, len(prompt):].tolist()
    assert baseline == reference
    output = SpeculativeDecoder(model, PromptLookup(), draft_length=FixedLength(4)).generate(prompt, new)
    assert output.tokens == baseline
    assert sum(output.stats.drafted_at) > 0 and len(output.stats.accepted_lengths) < new  # drafts were accepted


def test_a_tree_draft_on_sliding_window_layers_is_refused_in_one_line():
    model = tiny_mistral(8)
    cache = kv.new_cache(model)
    kv.forward(model, cache, PROMPT[:-1])
    with pytest.raises(kv.Unsupported, match="token-tree drafts need full attention in every layer"):
        kv.forward(model, cache, [PROMPT[-1]] + TOKENS, tree=[-1] + [p + 1 for p in PARENTS])
