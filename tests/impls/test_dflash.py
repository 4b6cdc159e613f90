"""DFlash's block-diffusion drafter: what it is trained on is what it drafts with."""

import torch

from specatlas.impls.engine.drafting import Prefill, Verified
from specatlas.impls.engine.sampling import Randomness, Sampling
from specatlas.impls.families.dflash import (DFlashDraft, DFlashDrafter, DFlashFamily, block_inputs,
                                             block_visibility, conditioning_layers)
from specatlas.impls.families.training import Features
from tests.impls.toy import tiny_llama


def test_conditioning_layers_spread_from_layer_1_to_the_fourth_last_as_its_code_picks_them():
    # Its code's picks for Qwen3-8B's 36 layers and 5 draft layers are layers 1, 9, 17, 25, 33: the states after them.
    assert conditioning_layers(36, 5) == (2, 10, 18, 26, 34)
    assert conditioning_layers(30, 5) == (2, 9, 15, 21, 28)  # round half to even, as its code rounds
    assert conditioning_layers(30, 1) == (16,)


def test_a_block_sees_the_context_before_its_anchor_and_all_of_itself():
    seen = block_visibility(torch.tensor([2, 5]), 7, 3)
    assert seen.shape == (6, 7 + 6)
    assert seen[:3, :7].sum(1).tolist() == [2, 2, 2] and seen[3:, :7].sum(1).tolist() == [5, 5, 5]
    assert seen[:3, 7:10].all() and not seen[:3, 10:].any() and seen[3:, 10:].all() and not seen[3:, 7:10].any()
    ids, masked, positions = block_inputs(torch.arange(10, 20), torch.tensor([2, 5]), 3)
    assert ids.tolist() == [12, 0, 0, 15, 0, 0] and masked.tolist() == [False, True, True] * 2
    assert positions.tolist() == [2, 3, 4, 5, 6, 7]


class _Block5(DFlashFamily):
    block = 5


def _world():
    target = tiny_llama(5, layers=4, vocab=16).float()
    torch.manual_seed(0)
    student = DFlashDraft.starting(target, torch.arange(10), num_layers=2).float()
    with torch.no_grad():
        for parameter in student.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.3)
    layers = conditioning_layers(4, 2)
    return target, student, layers


def test_the_drafted_block_is_the_block_its_training_rows_predict():
    """The drafter fed the prefill's states and one verification's kept rows drafts exactly the
    distributions the training forward gives the block anchored at the same position."""
    target, student, layers = _world()
    text = [3, 1, 4, 1, 5, 9, 2, 6]
    with torch.no_grad():
        states = target(input_ids=torch.tensor([text]), output_hidden_states=True).hidden_states
    per_layer = {layer: states[layer][0] for layer in layers}
    drafter = DFlashDrafter(student, target, layers)
    prompt = text[:4]
    drafter.start(prompt, Prefill(tuple(prompt), {layer: s[:3] for layer, s in per_layer.items()}))
    # A step that opened on token 3 (the pending one) and accepted two drafts: rows 3, 4, 5 are kept.
    step = Verified(draft=None, logits=None, hidden_states={layer: s[3:7] for layer, s in per_layer.items()},
                    accepted=[0, 1], committed=tuple(text[:7]), pending=text[3])
    drafter.observe(step)
    with torch.no_grad():
        draft = drafter.propose(text[:7], 4, Sampling(1.0), Randomness(0))
    features = Features(tokens=[torch.tensor(text)], prompt_lengths=[4], hidden={l: [s] for l, s in per_layer.items()},
                        greedy=[torch.tensor(text[1:] + [0])])
    family = _Block5()
    with torch.no_grad():
        rows, _ = family._block_states(student, target, features, 0, torch.tensor([6]), layers)
        want = Sampling(1.0).probs(student.head(target)(rows[1:]))
    assert len(draft.tokens) == 4 and torch.allclose(draft.q, want, atol=1e-6)
    # The block's rows never stay in the caches: only the six positions with known states are context.
    assert all(len(cache) == 6 for cache in drafter.caches)


def test_greedy_drafts_are_each_rows_top_token_inside_the_draft_vocabulary():
    target, student, layers = _world()
    text = [3, 1, 4, 1, 5]
    with torch.no_grad():
        states = target(input_ids=torch.tensor([text]), output_hidden_states=True).hidden_states
    drafter = DFlashDrafter(student, target, layers)
    drafter.start(text, Prefill(tuple(text), {layer: states[layer][0][:4] for layer in layers}))
    with torch.no_grad():
        draft = drafter.propose(text, 6, Sampling(), Randomness(0))
    assert len(draft.tokens) == 6 and draft.q is None and all(0 <= t < 10 for t in draft.tokens)


def test_a_deep_start_injects_the_keys_and_values_of_the_target_layer_it_copies():
    """The CPU-sized variant's one layer starts as the target layer reading the deepest
    conditioning state: its injected keys and values are that layer's own at every position."""
    target = tiny_llama(5, layers=4, vocab=16).float()
    layers = (1, 3)
    student = DFlashDraft.starting(target, torch.arange(10), 1, layers, deep=True).float()
    with torch.no_grad():
        states = target(input_ids=torch.tensor([[3, 1, 4, 1, 5]]), output_hidden_states=True).hidden_states
        fused = student.fuse(torch.cat([states[layer] for layer in layers], -1))
        theirs = target.model.layers[layers[-1]]
        normed = theirs.input_layernorm(states[layers[-1]])
        mine = student.layers[0].self_attn
        assert torch.allclose(mine.k_proj(fused), theirs.self_attn.k_proj(normed), atol=1e-5)
        assert torch.allclose(mine.v_proj(fused), theirs.self_attn.v_proj(normed), atol=1e-5)
    assert student.fc.in_features == 2 * student.fc.out_features
