"""PARD's block drafter: what it is trained on is what it drafts with, and COD keeps whole branches."""

import torch

from specatlas.impls.engine.drafting import Prefill
from specatlas.impls.engine.sampling import Randomness, Sampling
from specatlas.impls.families.pard import (ParallelDraft, ParallelDrafter, block_rows, block_states, cod_rows,
                                           rows_for)
from tests.impls.toy import tiny_llama


def test_a_mask_row_sees_the_real_tokens_up_to_its_base_and_the_masks_before_it_on_its_branch():
    rows = block_rows(6, 3)
    seen = rows.visible()
    index = {(int(m), int(j)): r for r, (m, j) in enumerate(zip(rows.depth, rows.positions))}
    for (m, j), r in index.items():
        want = {(0, i) for i in range(j - m + 1)} | {(k, j - m + k) for k in range(1, m + 1)}
        got = {key for key, other in index.items() if seen[r, other]}
        assert got == want, (m, j)
    assert min(j - m for m, j in index) == 0  # no mask row without a real token before it


def test_cod_keeps_a_shrinking_share_of_each_depth_and_only_whole_branches():
    tokens = torch.arange(200) % 17
    rows = cod_rows(tokens, 8, 0.7, 0.2, torch.Generator().manual_seed(3))
    kept = {(int(m), int(j)) for m, j in zip(rows.depth, rows.positions)}
    counts = [sum(1 for m, _ in kept if m == depth) for depth in range(8)]
    assert counts[0] == 200 and all(a >= b for a, b in zip(counts, counts[1:])) and counts[7] > 0
    assert counts[1] <= int(200 * 0.7) and counts[7] <= int(200 * 0.2)
    assert all((m - 1, j - 1) in kept for m, j in kept if m > 0)  # each mask's branch is whole
    nxt = rows.positions + 1
    assert torch.equal(rows.labels[nxt < 200], tokens[nxt[nxt < 200]])


def test_the_drafted_block_is_the_block_its_training_rows_predict():
    """One inference forward (cached context + masks) and the training rows of the same base give
    the same distributions: the drafter is trained on exactly what it drafts with."""
    target = tiny_llama(5, layers=3, vocab=16)
    torch.manual_seed(0)
    student = ParallelDraft(target, 1, 10).to(target.dtype)
    student.draft_vocab.copy_(torch.arange(10))
    with torch.no_grad():
        student.mask_embedding.normal_()
    model, embed, mask_id = student.drafter(target), student.embed(target), student.mask_id(target)
    context = [3, 1, 4, 1, 5, 9, 2]
    drafter = ParallelDrafter(model, mask_id, embed)
    drafter.start(context[:4], Prefill(tuple(context[:4])))
    padded = torch.tensor(context + [0, 0, 0])  # the block's positions; no row of the base's branch sees them
    rows = rows_for(padded, block_rows(len(padded), 4, first_base=len(context) - 1))
    with torch.no_grad():
        draft = drafter.propose(context, 4, Sampling(1.0), Randomness(0))
        logits = model.lm_head(block_states(model, embed, rows, mask_id))
    base = len(context) - 1
    on_branch = (rows.positions - rows.depth) == base
    want = Sampling(1.0).probs(logits[on_branch][rows.depth[on_branch].argsort()])
    assert len(draft.tokens) == 4 and torch.allclose(draft.q, want, atol=1e-9)
    # The masks never stay in the drafter's cache: the next block starts from the committed text.
    assert drafter.cached == context and drafter.cache.get_seq_length() == len(context)
