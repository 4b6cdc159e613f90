"""Every registered method, built by its registry builder on a tiny random Llama with random
trained pieces (see `tiny_world`), under the paper's settings, a fixed draft length and the
cost-aware policy: greedy output token-identical to plain decoding, drafts really verified, and
the paper's draft shape where the registry states one. Sampling: lossless methods with
deterministic drafts give the seed's text whatever the draft length; every method gives the same
text for the same seed twice."""

from __future__ import annotations

import pytest

from specatlas.impls.engine import kv
from specatlas.impls.engine.draft_length import DraftLengthPolicy
from specatlas.impls.registry import METHODS
from specatlas.impls.engine.sampling import Randomness, Sampling


PROMPTS = [[3, 5, 7, 9, 3, 5, 7], [12, 40, 12, 40, 8, 1, 12, 40]]
NEW_TOKENS = 24
POLICIES = [DraftLengthPolicy.paper(), DraftLengthPolicy.fixed(3), DraftLengthPolicy.cost_aware()]
SPECULATIVE = [spec for spec in METHODS.values() if spec.id != "baseline"]


@pytest.fixture(scope="module")
def baseline(world):
    decoder = METHODS["baseline"].build(world.target)
    return [decoder.generate(prompt, NEW_TOKENS).tokens for prompt in PROMPTS]


class Recorder:
    """A verifier that notes the shape of every draft it is given, then defers to the real one."""

    def __init__(self, verifier):
        self.verifier, self.shapes, self.sampled_drafts = verifier, [], 0

    def verify(self, draft, logits, sampling, rng, position):
        nodes = len(draft.tokens) - draft.auxiliary
        depths = kv.depths(draft.parents[:nodes])
        self.shapes.append((max(depths, default=0), nodes))
        self.sampled_drafts += draft.q is not None
        return self.verifier.verify(draft, logits, sampling, rng, position)


def recorded(decoder) -> tuple[Recorder, Recorder]:
    """(greedy, sampling) recorders installed on `decoder`."""
    decoder.greedy_verifier = Recorder(decoder.greedy_verifier)
    decoder.sampling_verifier = Recorder(decoder.sampling_verifier)
    return decoder.greedy_verifier, decoder.sampling_verifier


@pytest.mark.parametrize("policy", POLICIES, ids=lambda policy: policy.name)
@pytest.mark.parametrize("spec", SPECULATIVE, ids=lambda spec: spec.id)
def test_greedy_output_is_plain_decoding(world, baseline, spec, policy):
    decoder = world.build(spec, policy)
    recorder, _ = recorded(decoder)
    drafted = 0
    for prompt, want in zip(PROMPTS, baseline):
        output = decoder.generate(prompt, NEW_TOKENS)
        assert output.tokens == want, f"{spec.id} ({policy.name}) diverged from plain decoding on {prompt}"
        drafted += sum(output.stats.drafted_at)
    if not policy.is_cost_aware:  # the cost-aware policy may find that no draft pays on this machine
        assert drafted > 0, f"{spec.id} ({policy.name}) never drafted"
    if policy == DraftLengthPolicy.paper() and spec.paper_draft is not None:
        depth, nodes = spec.paper_draft
        seen_depth, seen_nodes = max(d for d, _ in recorder.shapes), max(n for _, n in recorder.shapes)
        if spec.draft_exact:
            assert (seen_depth, seen_nodes) == (depth, nodes), \
                f"{spec.id}: widest draft {seen_nodes} nodes of depth {seen_depth}, the paper's is {nodes} of depth {depth}"
        else:  # adaptive methods stop early: the paper's shape bounds their drafts
            assert seen_depth <= depth and seen_nodes <= nodes, \
                f"{spec.id}: a draft of {seen_nodes} nodes, depth {seen_depth} exceeds the paper's {nodes}, depth {depth}"


SAMPLING = Sampling(0.9, top_k=20)


def sampled(decoder, seed: int) -> list[int]:
    return decoder.generate(PROMPTS[1], NEW_TOKENS, SAMPLING, Randomness(seed)).tokens


@pytest.mark.parametrize("spec", SPECULATIVE, ids=lambda spec: spec.id)
def test_the_seed_fixes_the_sampled_text(world, spec):
    short, long = world.build(spec, DraftLengthPolicy.fixed(2)), world.build(spec, DraftLengthPolicy.fixed(5))
    _, recorder = recorded(short)
    text = sampled(short, 3)
    assert sampled(world.build(spec, DraftLengthPolicy.fixed(2)), 3) == text, f"{spec.id}: the same seed gave another text"
    assert sampled(world.build(spec, DraftLengthPolicy.fixed(2)), 4) != text, f"{spec.id}: another seed gave the same text"
    if spec.lossless and recorder.sampled_drafts == 0:
        # Deterministic drafts are verified by drawing the target's own token at each position.
        assert sampled(long, 3) == text, f"{spec.id}: the draft length changed the seed's text"


def test_the_cost_aware_policy_runs_and_names_the_hardware_sized_structure(world):
    """SpecInfer's tree is the paper's under the paper's settings and a fixed draft length, its
    labelled 2 x 2 variant under the cost-aware policy; a bench row says which it ran."""
    from specatlas.bench.contenders import specatlas_method

    spec = METHODS["miao2024specinfer"]
    paper_tree = (1, 1, 3, 1, 1, 1, 1, 1)
    for policy, widths in ((DraftLengthPolicy.paper(), paper_tree), (DraftLengthPolicy.fixed(3), paper_tree),
                           (DraftLengthPolicy.cost_aware(), (2, 2))):
        assert spec.build(world.target, world.draft_model, policy).drafter.widths == widths, policy.name
    paper = specatlas_method(spec, world.target, world.draft_model, DraftLengthPolicy.paper()).setup
    sized = specatlas_method(spec, world.target, world.draft_model, DraftLengthPolicy.cost_aware()).setup
    assert "paper settings: token tree expansion <1, 1, 3, 1, 1, 1, 1, 1>" in paper and "hardware-sized" not in paper
    assert "hardware-sized structure 2x2-then-chains (2 x 2 candidates" in sized and "paper settings" not in sized
