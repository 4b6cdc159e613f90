"""Sampling against transformers' own logits warpers (on logits full of ties), keyed randomness,
reproducibility whatever the draft length, and exactness under the cost-aware policy (driven by
a fake clock, so its depths vary with the random history the enumeration walks)."""

import pytest
import torch

from specatlas.impls.engine.decoding import SpeculativeDecoder
from specatlas.impls.engine.draft_length import CostAware, FixedLength
from specatlas.impls.engine.drafting import ModelDrafter, PromptLookup
from specatlas.impls.engine.sampling import Randomness, Sampling

from .toy import ToyLM, enumerate_outputs, sequence_distribution

SETTINGS = [(1.0, 0, 1.0), (0.7, 0, 1.0), (1.0, 5, 1.0), (0.8, 1, 1.0), (1.0, 0, 0.9), (0.6, 0, 0.5),
            (1.3, 7, 0.8), (0.9, 3, 0.95), (2.0, 20, 0.3)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("temperature, top_k, top_p", SETTINGS)
def test_probabilities_equal_transformers_warpers(temperature, top_k, top_p, dtype):
    from transformers import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

    generator = torch.Generator().manual_seed(hash((temperature, top_k, top_p)) % 2**31)
    # Half-integer logits over 40 tokens: ties everywhere, at the top-k and top-p boundaries too.
    logits = (torch.randint(-4, 5, (16, 40), generator=generator) * 0.5).to(dtype)
    scores = logits.clone()
    warpers = [TemperatureLogitsWarper(temperature)] + ([TopKLogitsWarper(top_k)] if top_k else []) + \
              ([TopPLogitsWarper(top_p)] if top_p < 1 else [])  # the order `generate` applies them in
    for warper in warpers:
        scores = warper(None, scores)
    want = scores.softmax(-1)
    got = Sampling(temperature, top_p, top_k).probs(logits)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-6 if dtype == torch.float32 else 1e-12)
    assert ((got > 0) == (want > 0)).all()  # the same tokens survive the cuts


def test_keyed_draws_follow_the_distribution_and_depend_only_on_their_key():
    probs = torch.tensor([0.5, 0.0, 0.3, 0.2])
    rng = Randomness(3)
    draws = [rng.categorical(probs, position, "token") for position in range(20000)]
    frequencies = torch.bincount(torch.tensor(draws), minlength=4).double() / len(draws)
    torch.testing.assert_close(frequencies, probs.double(), rtol=0, atol=0.015)
    assert frequencies[1] == 0
    assert Randomness(3).categorical(probs, 7, "token") == draws[7]  # no shared stream: same key, same draw
    assert [Randomness(4).categorical(probs, i, "token") for i in range(50)] != draws[:50]


def run_with(drafter_factory, draft_length, prompt, sampling, seed, length=12):
    target = ToyLM(seed=5)
    decoder = SpeculativeDecoder(target, drafter_factory() if drafter_factory else None, draft_length=draft_length)
    return decoder.generate(prompt, length, sampling, Randomness(seed)).tokens


class RandomDepth(FixedLength):
    """A draft length that changes from step to step, as a timing-dependent policy's would."""

    def __init__(self, seed):
        super().__init__(0)
        self.generator = torch.Generator().manual_seed(seed)

    def choose(self):
        return int(torch.randint(0, 5, (), generator=self.generator))


@pytest.mark.parametrize("sampling", [Sampling(0.8), Sampling(1.2, top_p=0.9, top_k=2)], ids=str)
def test_same_seed_same_text_whatever_the_draft_length(sampling):
    """Deterministic drafts (prompt lookup): a position's token is drawn from (seed, position)
    whatever was drafted, so every draft-length schedule gives the text plain sampling gives."""
    prompt = [0, 1, 2, 0, 1, 2, 0, 1]
    plain = run_with(None, FixedLength(0), prompt, sampling, seed=3)
    for schedule in [FixedLength(1), FixedLength(4), RandomDepth(0), RandomDepth(1)]:
        assert run_with(PromptLookup, schedule, prompt, sampling, seed=3) == plain
    assert any(run_with(None, FixedLength(0), prompt, sampling, seed=s) != plain for s in range(4, 8))


def test_same_seed_same_text_twice_with_a_draft_model():
    sampling, prompt = Sampling(0.8), [0, 1, 2]
    drafter = lambda: ModelDrafter(ToyLM(seed=6, sharpness=1.5), widths=(2, 1))  # noqa: E731
    first = run_with(drafter, FixedLength(3), prompt, sampling, seed=3)
    assert run_with(drafter, FixedLength(3), prompt, sampling, seed=3) == first


class FakeClock:
    """Time advances only when the target runs: by a cost that grows with the forward's width."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def charge(self, width: int):
        self.now += 1.0 + 0.3 * (width - 1)


@pytest.mark.parametrize("make_drafter", ["prompt lookup", "draft model tree"])
def test_cost_aware_policy_is_lossless_under_enumeration(make_drafter):
    """Every enumerated run gets a fresh decoder, policy and clock, so its depths follow its own
    random history (the clock makes them deterministic given that history)."""
    target, prompt, length, sampling = ToyLM(seed=1), [1, 2, 1, 2], 4, Sampling(0.9)
    depths = set()

    def run(rng):
        clock = FakeClock()
        original = target.forward

        def timed(input_ids, **kwargs):
            clock.charge(input_ids.shape[1])
            return original(input_ids, **kwargs)

        target.forward = timed
        try:
            drafter = PromptLookup() if make_drafter == "prompt lookup" else ModelDrafter(ToyLM(seed=2, sharpness=1.5), (2, 1))
            policy = CostAware(3, {64: {1: 1.0, 2: 1.3, 4: 1.9, 8: 3.1}})
            decoder = SpeculativeDecoder(target, drafter, draft_length=policy, clock=clock)
            output = decoder.generate(prompt, length, sampling, rng)
        finally:
            del target.forward
        depths.update(output.stats.accepted_lengths)
        return tuple(output.tokens)

    got = enumerate_outputs(run)
    want = sequence_distribution(target, prompt, length, sampling)
    worst = max(abs(got.get(seq, 0.0) - p) for seq, p in want.items())
    assert abs(sum(got.values()) - 1) < 1e-9 and worst < 1e-6, f"max |P_decoder - P_target| = {worst:.2e}"
    assert max(depths) > 1  # drafts were accepted somewhere in the enumeration
