"""Online speculative decoding (Liu et al. 2024): the drafter distilled on the requests it serves.
Over a stream of queries its acceptance rises while every output stays the target's: greedy output
is plain decoding's at every request, the joint distribution of two requests with an update between
them is enumerated exactly, an update is the paper's rule computed here from scratch, and only the
drafter's own weights change (never the target's, never a draft model handed to the builder)."""

import copy

import pytest
import torch

from specatlas.impls.engine.decoding import SpeculativeDecoder
from specatlas.impls.engine.draft_length import DraftLengthPolicy, FixedLength
from specatlas.impls.families.distillspec import DraftLayers
from specatlas.impls.families.online import OnlineDistillation
from specatlas.impls.methods.core import online_speculative_decoding

from .test_exact_distribution import FullPrefix, SAMPLINGS
from .tiny_world import randomise
from .toy import enumerate_outputs, sequence_distribution, tiny_llama

QUERIES = [[1, 5, 9, 2], [7, 7, 3], [4, 12, 4, 12, 4], [10, 2, 6]]


def online(target, model, trainable, interval=2, learning_rate=3e-2, gamma=4):
    drafter = OnlineDistillation(model, trainable, interval=interval, learning_rate=learning_rate)
    return SpeculativeDecoder(target, drafter, draft_length=FixedLength(gamma))


def acceptance(outputs) -> float:
    drafted = sum(sum(out.stats.drafted_at) for out in outputs)
    return sum(sum(out.stats.accepted_at) for out in outputs) / drafted


def test_acceptance_rises_over_a_stream_and_greedy_output_stays_plain_decoding():
    """A sharp random target and an untrained drafter: without updates every pass over the same
    queries accepts the same drafts (greedy), so the rise is the online distillation's."""
    target, model = randomise(tiny_llama(seed=1, layers=2), 11), tiny_llama(seed=2, layers=1)
    decoder, plain = online(target, model, list(model.parameters())), SpeculativeDecoder(target)
    want = [plain.generate(query, 12).tokens for query in QUERIES]
    passes = []
    for _ in range(3):  # the same queries again: the drafter meets each once per pass
        outputs = [decoder.generate(query, 12) for query in QUERIES]
        assert [out.tokens for out in outputs] == want
        passes.append(acceptance(outputs))
    assert decoder.drafter.updates >= 5
    assert passes[-1] > passes[0] + 0.15, f"acceptance by pass: {[round(a, 3) for a in passes]}"


def test_only_the_drafters_own_layers_learn():
    """A distilled drafter shares the target's embeddings, norm and head: they must not move."""
    target = tiny_llama(seed=1, layers=2)
    layers = DraftLayers.from_target(target, 1, torch.arange(8))  # a restricted head: q is 0 beyond 8 tokens
    before = copy.deepcopy(target.state_dict())
    own = copy.deepcopy(layers.state_dict())
    decoder = online(target, layers.drafter(target), list(layers.parameters()), interval=1)
    for query in QUERIES:
        decoder.generate(query, 12)
    assert decoder.drafter.updates > 0
    assert all(torch.equal(value, target.state_dict()[key]) for key, value in before.items())
    assert any(not torch.equal(value, layers.state_dict()[key]) for key, value in own.items())


def test_the_builder_learns_on_a_copy_of_the_given_draft_model():
    target, model = tiny_llama(seed=1, layers=2), tiny_llama(seed=2, layers=1)
    before = copy.deepcopy(model.state_dict())
    decoder = online_speculative_decoding(target, model, DraftLengthPolicy.fixed(3))
    decoder.drafter.interval = 1
    for query in QUERIES:
        decoder.generate(query, 12)
    assert decoder.drafter.updates > 0
    assert all(torch.equal(value, model.state_dict()[key]) for key, value in before.items())


def test_two_requests_with_an_update_between_them_sample_the_target():
    """Enumerated exactly on a 3-token transformer: the first request's mismatches update the drafter
    (a large step) before the second request; the pair of outputs is distributed as two independent
    samples of the target, whatever the drafter became."""
    target, model = tiny_llama(seed=1, layers=2, vocab=3), tiny_llama(seed=2, layers=1, vocab=3)
    first, second, length = [1, 2, 1], [2, 0], 2
    updated = []

    def run(rng):
        drafter_model = copy.deepcopy(model)
        decoder = online(target, drafter_model, list(drafter_model.parameters()), interval=1, learning_rate=0.5, gamma=1)
        a = decoder.generate(first, length, sampling, rng).tokens
        b = decoder.generate(second, length, sampling, rng).tokens
        updated.append(decoder.drafter.updates)
        return tuple(a), tuple(b)

    for sampling in SAMPLINGS[:1]:
        got = enumerate_outputs(run)
        p, q = (sequence_distribution(FullPrefix(target), prompt, length, sampling) for prompt in (first, second))
        assert abs(sum(got.values()) - 1) < 1e-9
        worst = max(abs(got.get((a, b), 0.0) - p[a] * q[b]) for a in p for b in q)
        assert worst < 1e-6, f"max |P_decoder - P_target| = {worst:.2e}"
    assert 0 in updated and 1 in updated  # some branches updated the drafter between the requests, some did not


@pytest.mark.parametrize("planted", [False, True], ids=["own-layers", "planted-shared-weights-trained"])
def test_a_drafter_sharing_the_targets_weights_is_exact_and_training_them_is_caught(planted):
    """A distilled drafter shares the target's embeddings and final norm. Learning only its own layers,
    two requests with an update between them are enumerated as two samples of the target. A planted
    bug, the update given every parameter of the drafter model (the shared ones too), moves the
    target between the requests; the enumeration must see it. The tiny target's logits depend little
    on its embeddings, so the move is ~1e-4 in probability: a hundred times the tolerance."""
    target = tiny_llama(seed=1, layers=2, vocab=3)
    first, second, length = [1, 2, 1], [2, 0], 2
    updated = []

    def run(rng):
        served = copy.deepcopy(target)  # each branch from the same start (the planted bug moves it)
        layers = DraftLayers.from_target(served, 1, torch.arange(3))
        model = layers.drafter(served)
        trainable = list(model.parameters()) if planted else list(layers.parameters())
        decoder = online(served, model, trainable, interval=1, learning_rate=0.5, gamma=1)
        a = decoder.generate(first, length, SAMPLINGS[0], rng).tokens
        b = decoder.generate(second, length, SAMPLINGS[0], rng).tokens
        updated.append(decoder.drafter.updates)
        return tuple(a), tuple(b)

    got = enumerate_outputs(run)
    p, q = (sequence_distribution(FullPrefix(target), prompt, length, SAMPLINGS[0]) for prompt in (first, second))
    worst = max(abs(got.get((a, b), 0.0) - p[a] * q[b]) for a in p for b in q)
    assert 0 in updated and 1 in updated
    if planted:
        assert worst > 1e-5, f"the planted bug moved the distribution by only {worst:.2e}"
    else:
        assert worst < 1e-6, f"max |P_decoder - P_target| = {worst:.2e}"


def test_an_update_is_one_adamw_step_of_forward_kl_where_drafts_were_rejected(monkeypatch):
    """The paper's rule, checked against an independent computation: a request's buffer holds one
    entry per step that rejected a draft token, at that token's position, with the target's own
    distribution there (where the untrained drafter's greedy token is not the target's); the update
    is one AdamW step (its code's 1e-4, no weight decay) on the gradient of the mean forward
    KL(p || q_θ) over those entries, and empties the buffer."""
    target, model = randomise(tiny_llama(seed=1, layers=2), 11), tiny_llama(seed=2, layers=1)
    trainable = list(model.parameters())
    decoder = SpeculativeDecoder(target, OnlineDistillation(model, trainable, interval=1), draft_length=FixedLength(4))
    drafter = decoder.drafter
    output = decoder.generate(QUERIES[0], 12)
    text = QUERIES[0] + output.tokens
    rejections = sum(output.stats.drafted_at) - sum(output.stats.accepted_at)
    assert rejections > 0 and len(drafter.mismatches) == rejections
    with torch.no_grad():
        target_p = target(input_ids=torch.tensor([text])).logits[0].softmax(-1)
        draft_greedy = model(input_ids=torch.tensor([text])).logits[0].argmax(-1)
    for position, p in drafter.mismatches:
        assert torch.allclose(p.to(target_p), target_p[position - 1], atol=1e-5)  # row position - 1 predicts text[position]
        assert int(draft_greedy[position - 1]) != text[position]

    # The KL, computed here from scratch on a copy of the drafter as it served the request.
    before = copy.deepcopy(model)
    log_q = before(input_ids=torch.tensor([text])).logits[0].log_softmax(-1)
    rows = [(position, p.clone()) for position, p in drafter.mismatches]  # out of inference mode, for autograd
    kl = torch.stack([(torch.xlogy(p, p) - p * log_q[position - 1]).sum() for position, p in rows]).mean()
    want = torch.autograd.grad(kl, list(before.parameters()))

    seen = []
    step = drafter.optimizer.step
    monkeypatch.setattr(drafter.optimizer, "step", lambda: (seen.append([t.grad.clone() for t in trainable]), step()))
    decoder.generate(QUERIES[1], 1)  # the next request starts with the update
    assert drafter.updates == 1 and drafter.buffer == [] and len(seen) == 1
    for got, grad in zip(seen[0], want):
        assert torch.allclose(got, grad, atol=1e-6, rtol=1e-4)
    # AdamW's first step from zero moments, no weight decay: θ - lr · g / (|g| + eps).
    for old, new, grad in zip(before.parameters(), model.parameters(), seen[0]):
        assert torch.allclose(new.detach(), old.detach() - 1e-4 * grad / (grad.abs() + 1e-8), atol=1e-7)


def test_the_registry_builder_updates_every_eight_requests():
    """Its code's interval: the buffer fills for 8 requests, the 9th starts with one update."""
    target, model = randomise(tiny_llama(seed=1, layers=2), 11), tiny_llama(seed=2, layers=1)
    decoder = online_speculative_decoding(target, model, DraftLengthPolicy.paper())
    queries = [[1 + i, 5, 9 - i] for i in range(8)]
    for query in queries:
        decoder.generate(query, 6)
    assert decoder.drafter.updates == 0 and len(decoder.drafter.buffer) == 7  # the 8th is still being served
    decoder.generate(QUERIES[0], 1)
    assert decoder.drafter.updates == 1 and decoder.drafter.buffer == []
