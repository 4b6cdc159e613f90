"""The engine's hooks for drafters that read the target: `start` after the prefill, hidden states
by layer (prefill and every verification), composed drafters forwarding what their parts need,
and `Verified.committed` as a snapshot. Checked with a hidden-state drafter on the toy model."""

import pytest
import torch

from specatlas.impls.engine.decoding import SpeculativeDecoder
from specatlas.impls.engine.draft_length import FixedLength
from specatlas.impls.engine.drafting import Draft, Drafter
from specatlas.impls.drafters.model_free.retrieval import SuffixAutomatonDraft
from specatlas.impls.engine.sampling import Sampling

from .toy import ToyLM, enumerate_outputs, sequence_distribution

PROMPT = [1, 2, 1]


class ToyHeads(Drafter):
    """A Medusa-like drafter on ToyLM: it drafts from the target's layer-1 state at the last
    committed position (its next-token logits, shifted by 1), read from the prefill and then
    from each verification's rows, and checks every row it is given against the toy's own."""

    hidden_layers = (1, ToyLM.LAYERS)

    def __init__(self, target: ToyLM):
        self.target, self.state, self.checked, self.starts = target, None, 0, 0

    def start(self, prompt, prefill):
        self.starts += 1
        assert prefill.prompt == tuple(prompt) and set(prefill.hidden_states) == set(self.hidden_layers)
        for layer, rows in prefill.hidden_states.items():
            assert rows.shape[0] == len(prompt) - 1  # rows of prompt[:-1]
            for row in range(len(prompt) - 1):
                torch.testing.assert_close(rows[row], self.target.hidden(layer, tuple(prompt[: row + 1])))
                self.checked += 1
        self.state = prefill.hidden_states[1][-1]

    def propose(self, context, depth, sampling, rng):
        torch.testing.assert_close(self.state, self.target.hidden(1, tuple(context[:-1])))
        q = sampling.probs(self.state - 1)
        if sampling.greedy:
            return Draft.chain([int(q.argmax())] * depth)
        tokens = [rng.categorical(q, len(context) + i, "draft") for i in range(depth)]
        return Draft.chain(tokens, q=q.expand(depth, -1))

    def observe(self, step):
        assert set(step.hidden_states) == set(self.hidden_layers)
        row = step.accepted[-1] + 1 if step.accepted else 0  # the last row the target kept
        for layer, rows in step.hidden_states.items():
            assert rows.shape[0] == step.logits.shape[0]
            torch.testing.assert_close(rows[row], self.target.hidden(layer, step.committed[:-1]))
            self.checked += 1
        self.state = step.hidden_states[1][row]


@pytest.mark.parametrize("sampling", [Sampling(1.0), Sampling(0.7, top_p=0.8)], ids=str)
def test_hidden_state_drafter_is_lossless_and_reads_the_right_rows(sampling):
    target, length = ToyLM(seed=4), 3
    drafters = []

    def run(rng):
        drafters.append(ToyHeads(target))  # a fresh drafter for every enumerated run
        decoder = SpeculativeDecoder(target, drafters[-1], draft_length=FixedLength(2))
        return tuple(decoder.generate(PROMPT, length, sampling, rng).tokens)

    got = enumerate_outputs(run)
    want = sequence_distribution(target, PROMPT, length, sampling)
    worst = max(abs(got.get(seq, 0.0) - p) for seq, p in want.items())
    assert abs(sum(got.values()) - 1) < 1e-9 and worst < 1e-6, f"max |P_decoder - P_target| = {worst:.2e}"
    assert all(d.starts == 1 and d.checked >= 2 * (len(PROMPT) - 1) + 2 for d in drafters)


def test_the_target_is_asked_for_exactly_the_drafters_layers_prefill_included():
    target = ToyLM(seed=4)
    SpeculativeDecoder(target, ToyHeads(target), draft_length=FixedLength(2)).generate(PROMPT, 4)
    assert target.hidden_asked and all(asked == [1, ToyLM.LAYERS] for asked in target.hidden_asked)
    target.hidden_asked.clear()
    SpeculativeDecoder(target).generate(PROMPT, 4)  # no drafter, no hidden states: no cost
    assert target.hidden_asked and not any(target.hidden_asked)


def test_a_composed_drafter_forwards_its_parts_needs_and_start():
    target = ToyLM(seed=4)
    heads = ToyHeads(target)
    composed = SuffixAutomatonDraft(None, auxiliary=heads, threshold=99)  # every draft from the heads
    assert composed.hidden_layers == heads.hidden_layers
    output = SpeculativeDecoder(target, composed, draft_length=FixedLength(2)).generate(PROMPT, 5)
    assert heads.starts == 1 and heads.checked > 0 and sum(output.stats.drafted_at) > 0


def test_verified_committed_is_a_snapshot():
    target = ToyLM(seed=4)

    class Keeper(Drafter):
        steps = []

        def propose(self, context, depth, sampling, rng):
            return Draft()

        def observe(self, step):
            self.steps.append(step)

    SpeculativeDecoder(target, Keeper(), draft_length=FixedLength(1)).generate(PROMPT, 3)
    assert [len(step.committed) for step in Keeper.steps] == [4, 5, 6]


def test_a_prompt_longer_than_the_context_is_refused_before_any_compute():
    from specatlas.impls.engine.decoding import ContextError, Session

    from .toy import tiny_llama

    model = tiny_llama(seed=1)  # 128 positions
    calls = []
    model.register_forward_pre_hook(lambda module, args: calls.append(1))
    with pytest.raises(ContextError, match="the prompt has 128 tokens; the model's context holds 128"):
        SpeculativeDecoder(model).generate([1] * 128, 4)
    assert not calls
    output = SpeculativeDecoder(model).generate([1] * 120, 50)  # the output stops at the context's end
    assert len(output.tokens) == 8
    with pytest.raises(ContextError):
        Session(model, [])


def test_a_zero_residual_does_not_give_nan():
    """p == q up to rounding: p - q <= 0 everywhere. A rejection there (probability ~0, forced
    here) must still draw a real token, not divide 0 by 0."""
    from specatlas.impls.engine.sampling import Randomness
    from specatlas.impls.engine.verification import RejectionSampling

    class AlwaysReject(Randomness):
        def bernoulli(self, p, *key):
            return False

        def categorical(self, probs, *key):
            assert torch.isfinite(probs).all() and abs(float(probs.sum()) - 1) < 1e-9, probs
            return super().categorical(probs, *key)

    logits = torch.tensor([[0.3, 1.2, -0.5], [0.1, 0.2, 0.3]], dtype=torch.float64)
    q = Sampling(1.0).probs(logits[0]) * (1 + 1e-12)  # a hair above p everywhere
    draft = Draft.chain([1], q=q[None])
    accepted, token = RejectionSampling().verify(draft, logits, Sampling(1.0), AlwaysReject(0), 5)
    assert accepted == [] and token in (0, 1, 2)


def test_an_inner_decoder_drafts_for_an_outer_one_without_prefilling_twice():
    """Staged speculation: prompt lookup speeds up a draft model that drafts for the target."""
    from specatlas.impls.engine.decoding import InnerDecoder
    from specatlas.impls.engine.drafting import PromptLookup

    from .toy import tiny_llama

    target, small = tiny_llama(seed=1), tiny_llama(seed=1, layers=1)
    widths = []
    small.register_forward_pre_hook(lambda module, args, kwargs: widths.append(kwargs["input_ids"].shape[1]),
                                    with_kwargs=True)
    baseline = SpeculativeDecoder(target)
    inner = SpeculativeDecoder(small, PromptLookup(), draft_length=FixedLength(2))
    outer = SpeculativeDecoder(target, InnerDecoder(inner), draft_length=FixedLength(3))
    for prompt in ([1], [3, 3, 0], [2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2]):
        widths.clear()
        output = outer.generate(prompt, 16)
        assert output.tokens == baseline.generate(prompt, 16).tokens
        assert sum(output.stats.drafted_at) > 0
        assert sum(width >= 8 for width in widths) == (len(prompt) > 8)  # the prompt is prefilled once


@pytest.mark.parametrize("sampling", [Sampling(1.0), Sampling(0.7, top_k=2)], ids=str)
def test_an_inner_decoder_is_lossless_under_sampling(sampling):
    from specatlas.impls.engine.decoding import InnerDecoder
    from specatlas.impls.engine.drafting import PromptLookup

    target, length = ToyLM(seed=1), 3

    def run(rng):
        inner = SpeculativeDecoder(ToyLM(seed=2, sharpness=1.5), PromptLookup(), draft_length=FixedLength(1))
        decoder = SpeculativeDecoder(target, InnerDecoder(inner), draft_length=FixedLength(2))
        return tuple(decoder.generate(PROMPT, length, sampling, rng).tokens)

    got = enumerate_outputs(run)
    want = sequence_distribution(target, PROMPT, length, sampling)
    worst = max(abs(got.get(seq, 0.0) - p) for seq, p in want.items())
    assert abs(sum(got.values()) - 1) < 1e-9 and worst < 1e-6, f"max |P_decoder - P_target| = {worst:.2e}"


def test_the_stats_time_the_target_forwards_apart_from_the_rest_of_the_verification():
    """`forward_seconds` is the verification forwards alone: the bench's per-step overhead is the
    verification less it. A forward and an acceptance that each sleep a known time bound both sides."""
    import time

    from specatlas.impls.engine import kv
    from specatlas.impls.engine.verification import GreedyMatch

    def slow_forward(*args, **kwargs):
        time.sleep(0.02)
        return kv.forward(*args, **kwargs)

    class SlowAcceptance(GreedyMatch):
        def verify(self, *args):
            time.sleep(0.01)
            return super().verify(*args)

    class Repeat(Drafter):
        def propose(self, context, depth, sampling, rng):
            return Draft.chain([context[-1]] * depth)

    decoder = SpeculativeDecoder(ToyLM(seed=4), Repeat(), greedy_verifier=SlowAcceptance(),
                                 draft_length=FixedLength(2), forward=slow_forward)
    stats = decoder.generate(PROMPT, 6).stats
    steps = len(stats.accepted_lengths)
    assert steps >= 2 and stats.target_forwards == steps + 1  # the prefill is not a verification
    assert 0.02 * steps <= stats.forward_seconds <= stats.verify_seconds - 0.01 * steps
    assert stats.as_dict()["forward_seconds"] == round(stats.forward_seconds, 4)
