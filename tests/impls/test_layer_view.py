"""Layer views for self-speculation: part of the target's layers on the target's own cache. Where
the views must equal the full model (all layers; an early exit resumed from its exit layer; the
cache after a draft phase rolled back) they do, to 1e-9 in float64."""

import pytest
import torch

from specatlas.impls.engine import kv
from specatlas.impls.engine.decoding import SpeculativeDecoder
from specatlas.impls.engine.draft_length import FixedLength
from specatlas.impls.engine.drafting import PromptLookup
from specatlas.impls.drafters.self_drafting.early_exit import EarlyExit
from specatlas.impls.engine.layer_view import LayerView, resume
from specatlas.impls.families.kangaroo import Kangaroo

from .toy import tiny_llama

LAYERS = 4
PROMPT = [1, 2, 3, 4, 5, 1, 2]
TOKENS, TREE = [6, 7, 8, 9, 10], [-1, 0, 1, 0, 2, 4]  # row 0 is the pending token (PROMPT[-1])


@pytest.fixture(scope="module")
def model():
    return tiny_llama(seed=7, layers=LAYERS)


def prefilled(model):
    cache = kv.new_cache(model)
    kv.forward(model, cache, PROMPT[:-1])
    return cache


def next_logits(model, cache, token=11):
    return kv.forward(model, cache, [token]).logits[-1]


def fresh_logits(model, tokens):
    return kv.forward(model, kv.new_cache(model), tokens).logits[-1]


@torch.no_grad()
def test_a_view_of_every_layer_is_the_model(model):
    full = kv.forward(model, prefilled(model), [PROMPT[-1]] + TOKENS, tree=TREE, hidden_layers=(0, 2, LAYERS))
    view = LayerView(model, range(LAYERS))
    mine = view(model, prefilled(model), [PROMPT[-1]] + TOKENS, tree=TREE, hidden_layers=(0, 2, LAYERS))
    torch.testing.assert_close(mine.logits, full.logits, rtol=0, atol=1e-9)
    assert set(mine.hidden_states) == {0, 2, LAYERS}
    for layer in mine.hidden_states:
        torch.testing.assert_close(mine.hidden_states[layer], full.hidden_states[layer], rtol=0, atol=1e-9)


def test_a_view_of_every_layer_decodes_as_the_model(model):
    baseline = SpeculativeDecoder(model).generate(PROMPT, 12).tokens
    decoder = SpeculativeDecoder(model, PromptLookup(), draft_length=FixedLength(3), forward=LayerView(model, range(LAYERS)))
    assert decoder.generate(PROMPT, 12).tokens == baseline


@pytest.mark.parametrize("exit_layer", [1, 2, 3])
@torch.no_grad()
def test_early_exit_then_resume_from_the_exit_layer_equals_the_full_forward(model, exit_layer):
    rows = [PROMPT[-1]] + TOKENS[:3]
    cache = prefilled(model)
    early = LayerView(model, range(exit_layer))(model, cache, rows, hidden_layers=(exit_layer,))
    resumed = resume(model, cache, early.hidden_states[exit_layer], exit_layer)
    full = kv.forward(model, prefilled(model), rows)
    torch.testing.assert_close(resumed.logits, full.logits, rtol=0, atol=1e-9)
    # Every layer's slot now holds the full model's rows: decoding goes on as if nothing happened.
    torch.testing.assert_close(next_logits(model, cache), fresh_logits(model, PROMPT + TOKENS[:3] + [11]), rtol=0, atol=1e-9)


@pytest.mark.parametrize("layers", [[0], [0, 2], [1, 3], [0, 1, 2]], ids=str)
@torch.no_grad()
def test_cache_after_a_draft_phase_is_restored(model, layers):
    cache, view = prefilled(model), LayerView(model, layers)
    for token in TOKENS[:3]:  # a draft phase: one view forward per drafted token
        view(model, cache, [token])
    kv.truncate(cache, len(PROMPT) - 1)
    assert kv.cache_length(cache) == len(PROMPT) - 1
    torch.testing.assert_close(next_logits(model, cache, PROMPT[-1]), fresh_logits(model, PROMPT), rtol=0, atol=1e-9)


def test_bad_views_are_refused(model):
    for layers in ([], [LAYERS], [2, 1], [1, 1]):
        with pytest.raises(ValueError, match="increasing layer indices"):
            LayerView(model, layers)


@pytest.mark.parametrize("exit_layer", [1, 3])
def test_early_exit_drafter_on_the_shared_cache_is_lossless(model, exit_layer):
    baseline = SpeculativeDecoder(model)
    decoder = SpeculativeDecoder(model, EarlyExit(model, exit_layer), draft_length=FixedLength(3))
    for prompt in ([1], [3, 3, 0], PROMPT):
        output = decoder.generate(prompt, 12)
        assert output.tokens == baseline.generate(prompt, 12).tokens
        assert sum(output.stats.drafted_at) > 0


def kangaroo_drafter(model, threshold=0.0, exit_layer=2):
    """A Kangaroo drafter whose adapter is untrained: the plain early exit (see KangarooAdapter)."""
    from specatlas.impls.families.kangaroo import KangarooAdapter
    from specatlas.impls.families.blocks import LayerConfig

    adapter = KangarooAdapter(LayerConfig.from_dict(model.config.to_dict()), model.model.norm.weight)
    return Kangaroo(model, adapter.to(model.dtype).eval(), exit_layer, threshold)


@pytest.mark.parametrize("exit_layer", [1, 3])
@pytest.mark.parametrize("threshold", [0.0, 0.3])
def test_kangaroo_is_lossless_and_reuses_the_shallow_rows(model, exit_layer, threshold):
    baseline = SpeculativeDecoder(model)
    want = {tuple(prompt): baseline.generate(prompt, 12).tokens for prompt in ([1], [3, 3, 0], PROMPT)}
    drafter = kangaroo_drafter(model, threshold, exit_layer)
    decoder = SpeculativeDecoder(model, drafter, draft_length=FixedLength(4))
    shallow, deep, drafts = [], [], []  # rows fed to layer 0 and to the exit layer per call; drafts per step
    propose = drafter.propose
    drafter.propose = lambda *args: drafts.append(propose(*args)) or drafts[-1]
    hooks = [model.model.layers[layer].register_forward_hook(lambda module, args, out, rows=rows: rows.append(args[0].shape[1]))
             for layer, rows in ((0, shallow), (exit_layer, deep))]
    accepted = 0
    try:
        for prompt in ([1], [3, 3, 0], PROMPT):
            shallow.clear(), deep.clear(), drafts.clear()
            output = decoder.generate(prompt, 12)
            assert output.tokens == want[tuple(prompt)]
            accepted += sum(output.stats.accepted_lengths) - len(output.stats.accepted_lengths)
            # Every layer saw the prompt once, then per step the pending token and each draft once:
            # the verification did not run the drafted tokens through the shallow layers again.
            steps = len(output.stats.accepted_lengths)
            assert sum(shallow) == sum(deep) == len(prompt) - 1 + steps + sum(len(draft.tokens) for draft in drafts)
            assert all(draft.exit_states is not None for draft in drafts)
    finally:
        for hook in hooks:
            hook.remove()
    assert accepted > 0 or exit_layer == 1  # accepted drafts' shallow rows stay in the cache


def test_kangaroo_stops_drafting_below_the_confidence_threshold(model):
    from specatlas.impls.engine.sampling import Randomness, Sampling

    @torch.inference_mode()  # as SpeculativeDecoder.generate runs it
    def draft(threshold):
        drafter = kangaroo_drafter(model, threshold)
        session = kv_session(model, drafter)
        return drafter.propose(session.tokens, 5, Sampling(), Randomness(0))

    assert len(draft(0.0).tokens) == 5
    assert len(draft(1.01).tokens) == 1  # no token is that sure: the first draft is the last


@pytest.mark.parametrize("depth", [1, 2, 4])
@torch.inference_mode()
def test_a_cut_kangaroo_draft_is_verified_as_the_full_forward(model, depth):
    """A draft-length policy may cut a draft: its exit states are cut with it."""
    from specatlas.impls.engine.drafting import Draft
    from specatlas.impls.engine.sampling import Randomness, Sampling

    drafter = kangaroo_drafter(model)
    session = kv_session(model, drafter)
    draft = drafter.propose(session.tokens, 4, Sampling(), Randomness(0)).cut(depth)
    assert len(draft.tokens) == depth and len(draft.exit_states.hidden) == min(depth + 1, 4)
    plain = kv_session(model, kangaroo_drafter(model))
    mine, full = session.step(draft), plain.step(Draft.chain(draft.tokens))
    torch.testing.assert_close(mine.logits, full.logits, rtol=0, atol=1e-9)
    torch.testing.assert_close(mine.hidden_states[2], full.hidden_states[2], rtol=0, atol=1e-9)
    for layer, other in zip(session.cache.layers, plain.cache.layers, strict=True):
        torch.testing.assert_close(layer.keys, other.keys, rtol=0, atol=1e-9)


def cache_rows(cache):
    return [(layer.keys.clone(), layer.values.clone()) for layer in cache.layers]


def assert_same_rows(cache, rows):
    assert kv.cache_length(cache) == len(PROMPT) - 1
    for layer, (keys, values) in zip(cache.layers, rows, strict=True):
        assert torch.equal(layer.keys, keys) and torch.equal(layer.values, values)


@pytest.mark.parametrize("name", ["early exit", "layer skip", "kangaroo"])
@torch.inference_mode()
def test_a_drafters_scratch_leaves_the_cache_as_committed_even_when_it_raises(model, name, monkeypatch):
    from specatlas.impls.engine.drafting import TargetLayers
    from specatlas.impls.engine.sampling import Randomness, Sampling
    from specatlas.impls.drafters.self_drafting.layer_skip import ExitThreshold, LayerSkip

    drafter = {"early exit": lambda: EarlyExit(model, 2), "layer skip": lambda: LayerSkip(model, [1], ExitThreshold(0.0)),
               "kangaroo": lambda: kangaroo_drafter(model)}[name]()
    session = kv_session(model, drafter)
    committed = cache_rows(session.cache)
    with pytest.raises(AssertionError, match="inside `scratch"):
        session.prefill.target.forward(LayerView(model, [0]), [1])
    assert len(drafter.propose(session.tokens, 4, Sampling(), Randomness(0)).tokens) == 4
    assert_same_rows(session.cache, committed)  # Kangaroo's shallow rows travel in the draft, not in the cache

    forward, calls = TargetLayers.forward, []

    def failing(*args, **kwargs):  # the second draft forward fails, after the first wrote its rows
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("mid-draft")
        return forward(*args, **kwargs)

    monkeypatch.setattr(TargetLayers, "forward", failing)
    with pytest.raises(RuntimeError, match="mid-draft"):
        drafter.propose(session.tokens, 4, Sampling(), Randomness(0))
    assert len(calls) == 2
    assert_same_rows(session.cache, committed)


def kv_session(model, drafter):
    from specatlas.impls.engine.decoding import Session

    session = Session(model, PROMPT, hidden_layers=drafter.hidden_layers)
    drafter.start(PROMPT, session.prefill)
    return session
