"""Layer-skipping self-speculation (Draft & Verify, SWIFT) and the staged cascade's tree, on tiny
transformers: the replayed drafts equal real draft forwards to 1e-9, the exit and search rules do
what the papers' code does, and every method reproduces greedy decoding."""

import json

import numpy as np
import pytest
import torch

from specatlas.impls.engine import draft_length, kv

from specatlas.impls.methods import self_speculative as methods_self
from specatlas.impls.drafters.self_drafting import layer_skip as ss
from specatlas.impls.drafters.self_drafting.bayes import GaussianProcess
from specatlas.impls.engine.decoding import InnerDecoder, Session, SpeculativeDecoder
from specatlas.impls.engine.draft_length import DraftLengthPolicy
from specatlas.impls.engine.drafting import TargetLayers
from specatlas.impls.engine.layer_view import LayerView
from specatlas.impls.engine.sampling import Randomness, Sampling

from .toy import tiny_llama

TEXT = [1, 2, 3, 4, 5, 1, 2, 6, 7, 8, 9]
START = 5


@pytest.fixture(scope="module")
def model():
    return tiny_llama(seed=7, layers=6)


def full_cache(model, tokens):
    cache = kv.new_cache(model)
    kv.forward(model, cache, tokens)
    return cache


@torch.no_grad()
def test_replayed_rows_equal_real_draft_forwards(model):
    view = LayerView(model, [0, 2, 5])
    cache = full_cache(model, TEXT)
    target = TargetLayers(model, cache)
    first_drafts = ss.replay(target, view, START, TEXT[START:], own_rows=False)
    spans = ss.replay(target, view, START, TEXT[START:], own_rows=True)
    for i in range(len(TEXT) - START):
        # After position START + i: the target's rows before it, the view's row of it (a first draft)...
        first = view(model, full_cache(model, TEXT[: START + i]), [TEXT[START + i]]).logits[-1]
        torch.testing.assert_close(first_drafts[i], first, rtol=0, atol=1e-9)
        # ... or the view's rows of everything from START on (a draft of the whole span).
        span = view(model, full_cache(model, TEXT[:START]), TEXT[START : START + i + 1]).logits[-1]
        torch.testing.assert_close(spans[i], span, rtol=0, atol=1e-9)
    assert kv.cache_length(cache) == len(TEXT)
    torch.testing.assert_close(kv.forward(model, cache, [3]).logits[-1],
                               kv.forward(model, kv.new_cache(model), TEXT + [3]).logits[-1], rtol=0, atol=1e-9)


def test_adaptive_exit_threshold_follows_the_acceptance_rate():
    threshold = ss.ExitThreshold(0.6, adaptive=True)
    for _ in range(20):
        threshold.update(drafted=4, accepted=1, reached_max=False)
    assert threshold.value > 0.6 + 0.01  # drafts rejected: stop earlier
    high = threshold.value
    for _ in range(40):
        threshold.update(drafted=4, accepted=4, reached_max=False)
    assert threshold.value < high - 0.01  # drafts accepted: draft deeper
    low = threshold.value
    threshold.update(drafted=12, accepted=12, reached_max=True)
    assert threshold.value == pytest.approx(low)  # already at the maximum length: hold
    fixed = ss.ExitThreshold(0.8)
    fixed.update(drafted=4, accepted=0, reached_max=False)
    assert fixed.value == 0.8


@pytest.mark.parametrize("exit_below, drafted", [(1.01, 1), (0.0, 4)])
@torch.no_grad()
def test_drafting_stops_after_a_token_below_the_threshold(model, exit_below, drafted):
    prompt = [1, 2, 3]
    session = Session(model, prompt)
    drafter = ss.LayerSkip(model, [1, 3], ss.ExitThreshold(exit_below))
    drafter.start(prompt, session.prefill)
    draft = drafter.propose(prompt, 4, Sampling(), Randomness(0))
    assert draft.depth == drafted and kv.cache_length(session.cache) == len(prompt) - 1


@torch.no_grad()
def test_swift_trees_hold_the_drafts_top_candidates_under_each_chain_token(model):
    prompt = [1, 2, 3]
    session = Session(model, prompt)
    drafter = ss.LayerSkip(model, [2], ss.ExitThreshold(0.0), candidates=lambda confidence, greedy: 3)
    drafter.start(prompt, session.prefill)
    draft = drafter.propose(prompt, 3, Sampling(), Randomness(0))
    assert draft.parents == [-1, -1, -1, 0, 0, 0, 3, 3, 3] and draft.depth == 3
    assert [ss.swift_candidates(c, True) for c in (0.99, 0.9, 0.6, 0.1)] == [3, 5, 8, 10]
    assert [ss.swift_candidates(c, False) for c in (0.99, 0.9, 0.6, 0.1)] == [1, 3, 5, 10]


def test_every_method_reproduces_greedy_decoding(model):
    baseline = SpeculativeDecoder(model)
    decoders = [methods_self.draft_and_verify(model, skipped=[1, 3]), methods_self.swift(model, window=4),
                methods_self.staged(model, tiny_llama(seed=7, layers=1)),
                methods_self.staged(model, tiny_llama(seed=7, layers=1), policy=DraftLengthPolicy.cost_aware())]
    for decoder in decoders:
        drafted = 0
        for prompt in ([1], [3, 3, 0], [2, 1, 2, 1, 2, 1, 2], [0, 1, 2, 3, 0, 1]):
            output = decoder.generate(prompt, 20)
            assert output.tokens == baseline.generate(prompt, 20).tokens, decoder.drafter.describe()
            drafted += sum(output.stats.drafted_at)
        assert drafted > 0


def test_swift_optimises_its_layer_set_on_the_fly(model):
    decoder = methods_self.swift(model, window=4)
    drafter = decoder.drafter
    assert drafter.skipped == [1, 3]  # every other layer between the first and the last
    decoder.generate([1, 2, 3], 24)
    assert drafter.iterations > 0 and len(drafter.gp.y) == drafter.iterations
    assert drafter.best_score == max(drafter.gp.y)
    assert drafter.skipped == [1, 3] or len(drafter.skipped) == drafter.count
    assert 0 not in drafter.skipped and model.config.num_hidden_layers - 1 not in drafter.skipped


# Seconds by forward width under which the drafts the cost-aware policy guesses for these methods
# (`nodes`: 3 nodes a depth for SWIFT, 2 for staged) pay, but their real trees (SWIFT: 5 to 10
# candidates at a depth drafted with confidence <= 0.95; staged: 16 nodes) never do.
NARROW_ONLY = {64: {1: 1.0, 4: 1.0, 6: 1e3, 128: 1e3}}


def drafter_forwards_by_step(decoder, forwards, prompt, tokens) -> list[tuple[bool, int]]:
    """(drafted, drafter forwards in it) for each step of one generation: `forwards()` counts them;
    those between two of the policy's records are the later step's. The clock stands still, so the
    cost curve and the acceptance alone decide."""
    steps, record, seen = [], decoder.draft_length.record, [forwards()]

    def recording(draft, *args):
        steps.append((draft.depth > 0, forwards() - seen[0]))
        seen[0] = forwards()
        record(draft, *args)

    decoder.draft_length.record, decoder.clock = recording, lambda: 0.0
    decoder.generate(prompt, tokens)
    return steps


@pytest.mark.parametrize("method", ["swift", "staged"])
def test_a_plain_step_of_the_cost_aware_policy_runs_no_drafter_forward(model, monkeypatch, method):
    monkeypatch.setattr(draft_length, "calibrate_contexts", lambda *args, **kwargs: NARROW_ONLY)
    policy, counted = DraftLengthPolicy.cost_aware(), [0]
    if method == "swift":  # every view forward, drafts and the layer-set search alike
        forward = TargetLayers.forward

        def counting(self, *args, **kwargs):
            counted[0] += 1
            return forward(self, *args, **kwargs)

        monkeypatch.setattr(TargetLayers, "forward", counting)
        decoder = methods_self.swift(model, policy=policy, window=4)
    else:
        draft_model = tiny_llama(seed=7, layers=1)
        draft_model.register_forward_pre_hook(lambda *args: counted.__setitem__(0, counted[0] + 1))
        decoder = methods_self.staged(model, draft_model, policy=policy)
    steps = drafter_forwards_by_step(decoder, lambda: counted[0], [1, 2, 3], 40)
    plain = [count for drafted, count in steps if not drafted]
    assert len(plain) > 20 and sum(plain) == 0, f"{sum(plain)} drafter forwards in {len(plain)} plain steps"
    assert any(drafted and count for drafted, count in steps)  # the probes draft


def test_simulated_speed_counts_verifications_and_draft_forwards():
    # Every draft right and confident: one step drafts 9 (all the text allows) and commits 10.
    assert ss.simulated_speed([True] * 10, [1.0] * 10, 0.5, ss.ExitThreshold(0.6)) == (10, 1 + 9 * 0.5)
    # Never confident: one draft per step, right at every step here, so each step commits 2.
    assert ss.simulated_speed([True, False] * 3, [0.1] * 6, 0.5, ss.ExitThreshold(0.6)) == (6, 3 * 1.5)


def test_the_bayesian_search_finds_a_faster_set_than_a_random_one(model):
    skipped, score = ss.search_skipped(model, [[1, 2, 3], [3, 3, 0, 1]], iterations=10)
    assert len(skipped) < model.config.num_hidden_layers and score > 0


def test_gp_prefers_unexplored_points_and_fits_what_it_saw():
    gp = GaussianProcess()
    points = np.eye(4)
    for point, value in zip(points, [1.0, 2.0, 3.0, 4.0]):
        gp.register(point, value)
    assert gp.best()[1] == 4.0
    assert gp.ucb(points[3:], kappa=0.0)[0] == pytest.approx(4.0, abs=0.2)


def test_the_skipped_set_is_searched_once_per_model_and_cached(model, monkeypatch, tmp_path):
    monkeypatch.setenv("SPECATLAS_CACHE", str(tmp_path))
    calls = []
    monkeypatch.setattr(ss, "calibration_prompts", lambda model, count: [[1, 2, 3]])
    monkeypatch.setattr(ss, "search_skipped", lambda model, prompts, iterations: calls.append(iterations) or ([2, 4], 1.5))
    assert ss.skipped_layers(model) == [2, 4] and ss.skipped_layers(model) == [2, 4]
    assert calls == [ss.DV_ITERATIONS_CPU]
    (saved,) = (tmp_path / "draft-and-verify").iterdir()
    assert json.loads(saved.read_text())["skipped"] == [2, 4]


def test_the_staged_tree_keeps_the_most_probable_nodes():
    inner = InnerDecoder(SpeculativeDecoder(tiny_llama(seed=7, layers=1)), tree_nodes=5)
    probs = torch.tensor([[0.6, 0.3, 0.1, 0.0], [0.1, 0.2, 0.7, 0.0], [0.05, 0.05, 0.1, 0.8]])
    draft = inner._tree([0, 2, 3], probs)
    # Scores: chain 0.6, 0.42, 0.336; alternatives 0.3 (depth 1), 0.12 (depth 2), 0.06 ...
    assert draft.tokens == [0, 1, 2, 1, 3] and draft.parents == [-1, -1, 0, 0, 2]
