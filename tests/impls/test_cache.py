"""KV-cache rollback: after a rejection the cache is exactly a fresh prefill of the accepted text."""

import pytest
import torch

from specatlas.impls import kv

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
