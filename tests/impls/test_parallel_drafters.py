"""Jacobi, Lookahead and Token Recycling drafters: their bookkeeping, and losslessness proven exactly
(output distribution under sampling equal to the target's to 1e-6; greedy output equal to the
baseline's through real attention)."""

import pytest
import torch

from specatlas.impls.engine import kv
from specatlas.impls.engine.decoding import SpeculativeDecoder
from specatlas.impls.engine.draft_length import FixedLength
from specatlas.impls.engine.drafting import Draft, Prefill, Verified
from specatlas.impls.drafters.self_drafting.jacobi import Jacobi, Lookahead
from specatlas.impls.drafters.model_free.recycling import PAPER_TREE, TokenRecycling, template_nodes
from specatlas.impls.engine.sampling import Randomness, Sampling

from .toy import VOCAB, ToyLM, enumerate_outputs, sequence_distribution, tiny_llama

GREEDY, RNG = Sampling(), Randomness(0)


def verified(draft: Draft, argmax: list[int], accepted: list[int], committed: list[int], vocab: int = 100) -> Verified:
    """A verification step whose target argmax at row r is argmax[r]."""
    logits = torch.nn.functional.one_hot(torch.tensor(argmax), vocab).float()
    return Verified(draft, logits, {}, accepted, tuple(committed), committed[-len(accepted) - 2])


def test_jacobi_next_guesses_are_the_outputs_after_the_accepted_prefix():
    jacobi = Jacobi(window=4)
    jacobi.start([7, 8, 9], Prefill((7, 8, 9)))
    draft = jacobi.propose([7, 8, 9], 3, GREEDY, RNG)
    assert draft.tokens == [9, 7, 8] and kv.is_chain(draft.parents)  # started from the prompt
    # Guess 1 accepted (row 0 said 9) and row 1 commits 50; rows 2, 3 are the next iterate for
    # the 2 positions after 50 (row 3's supersedes the undrafted 4th guess); the rest is padding.
    jacobi.observe(verified(draft, [9, 50, 51, 52], [0], [7, 8, 9, 9, 50]))
    assert jacobi.guesses == [51, 52, 52, 52]
    # Undrafted guesses are kept: after a 1-token draft, guesses 3 and 4 move up by one.
    draft = jacobi.propose([7, 8, 9, 9, 50], 1, GREEDY, RNG)
    jacobi.observe(verified(draft, [60, 61], [], [7, 8, 9, 9, 50, 60]))
    assert jacobi.guesses == [61, 52, 52, 52]
    assert jacobi.propose([7, 8, 9, 9, 50, 60], 2, GREEDY, RNG).tokens == [61, 52]


def test_jacobi_and_lookahead_restart_on_a_new_text():
    jacobi = Jacobi(window=3)
    jacobi.guesses = [1, 1, 1]
    jacobi.start([4, 5], Prefill((4, 5)))
    assert jacobi.propose([4, 5], 3, GREEDY, RNG).tokens == [5, 4, 5]
    lookahead = Lookahead(window=2, ngram=3, guess_set=2)
    lookahead.levels, lookahead.pool[5] = [[1, 1], [2, 2]], [(3, 3)]
    lookahead.start([4, 5], Prefill((4, 5)))
    assert lookahead.levels == [[4, 5]] and not lookahead.pool


def test_lookahead_branch_attends_to_level_zero_then_its_own_column():
    """Level l of column j sees level 0 up to column j and its column's levels above it (the
    paper's Figure 2 mask), expressed as a tree: position j+1+l after the pending token."""
    window, levels = 3, 3
    lookahead = Lookahead(window, ngram=levels + 1, guess_set=2)
    lookahead.levels = [[10, 11, 12], [20, 21, 22], [30, 31, 32]]
    lookahead.pool[3] = [(40, 41, 42), (40, 43, 44)]
    draft = lookahead.propose([1, 2, 3], 2, GREEDY, RNG)
    # Verification branch first: the two 2-token prefixes share their first token (a trie).
    assert draft.tokens[:3] == [40, 43, 41] and draft.parents[:3] == [-1, 0, 0]
    assert draft.auxiliary == window * levels and draft.proposed == 3 and draft.depth == 2
    first = draft.proposed
    node = {(level, column): first + level * window + column for level in range(levels) for column in range(window)}
    sees = kv.tree_mask([-1] + [p + 1 for p in draft.parents], 1 + len(draft.tokens), 0, torch.float32, "cpu")[0, 0] == 0
    depth = kv.depths(draft.parents)
    for (level, column), index in node.items():
        want = {0} | {node[0, c] + 1 for c in range(column + 1)} | {node[l, column] + 1 for l in range(1, level + 1)}
        assert set(sees[index + 1].nonzero().flatten().tolist()) == want
        assert depth[index] == column + 1 + level


def test_lookahead_window_fills_then_harvests_column_ngrams():
    lookahead = Lookahead(window=2, ngram=3, guess_set=2)
    context = [5, 6, 7]
    lookahead.start(context, Prefill(tuple(context)))
    draft = lookahead.propose(context, 2, GREEDY, RNG)
    assert draft.tokens == [6, 7] and draft.auxiliary == 2 and not lookahead.pool  # warm-up: level 0 only
    lookahead.observe(verified(draft, [8, 20, 21], [], context + [8]))
    assert lookahead.levels == [[6, 7], [20, 21]]
    context.append(8)
    draft = lookahead.propose(context, 2, GREEDY, RNG)
    assert draft.parents == [-1, 0, 0, 1] and draft.auxiliary == 4
    lookahead.observe(verified(draft, [9, 0, 0, 30, 31], [], context + [9]))
    assert lookahead.levels == [[20, 21], [30, 31]]
    assert lookahead.pool == {6: [(20, 30)], 7: [(21, 31)]}  # each column, read top to bottom
    for tail in [(1, 1), (2, 2), (20, 30)]:  # least recently seen out, re-seen moves to the back
        lookahead._remember(6, tail)
    assert lookahead.pool[6] == [(2, 2), (20, 30)]


def test_token_recycling_fills_its_template_from_the_table_and_recycles_every_row():
    recycling = TokenRecycling(tree=((0,), (1,), (0, 0), (0, 1), (1, 0)), k=2)
    assert recycling.propose([1, 2], 2, GREEDY, RNG).tokens == []  # an empty table drafts nothing
    recycling.table = {2: [10, 11], 10: [12, 13]}  # 11 has no row yet: node (1, 0) is dropped
    draft = recycling.propose([1, 2], 2, GREEDY, RNG)
    assert draft.tokens == [10, 11, 12, 13] and draft.parents == [-1, -1, 0, 0]
    assert recycling.propose([1, 2], 1, GREEDY, RNG).tokens == [10, 11]  # depth cuts the template
    draft = recycling.propose([1, 2], 2, GREEDY, RNG)
    logits = torch.tensor([[0, 0, 0, 9, 8], [0, 9, 8, 0, 0], [9, 0, 0, 0, 8], [0, 0, 9, 8, 0], [8, 0, 0, 0, 9]]).float()
    recycling.observe(Verified(draft, logits, {}, [0], (1, 2, 10, 1), 2))
    assert recycling.table == {2: [3, 4], 10: [1, 2], 11: [0, 4], 12: [2, 3], 13: [4, 0]}
    recycling.observe(Verified(Draft(), logits[:1], {}, [], (1, 2, 10, 1, 3), 1))  # a plain step
    assert recycling.table[1] == [3, 4]


def test_paper_tree_template():
    assert len(PAPER_TREE) == 80 and [template_nodes(PAPER_TREE)(d) for d in range(1, 7)] == [8, 29, 54, 69, 77, 80]
    assert all(path[:-1] in PAPER_TREE for path in PAPER_TREE if len(path) > 1)


def decoders(target):
    """Fresh decoders (drafter state would otherwise carry over between enumerated runs)."""
    return {
        "jacobi": lambda: SpeculativeDecoder(target, Jacobi(window=2), draft_length=FixedLength(2)),
        "lookahead": lambda: SpeculativeDecoder(target, Lookahead(window=2, ngram=3, guess_set=2), draft_length=FixedLength(2)),
        "token recycling": lambda: SpeculativeDecoder(target, hot_recycling(), draft_length=FixedLength(2)),
    }


def hot_recycling(vocab: int = VOCAB) -> TokenRecycling:
    """A table inherited from an earlier query (the paper's hot start), so that short runs draft."""
    recycling = TokenRecycling(PAPER_TREE, k=2)
    recycling.table = {token: [(token + 1) % vocab, token] for token in range(vocab)}
    return recycling


SAMPLINGS = [Sampling(1.0), Sampling(0.7, top_p=0.8)]


@pytest.mark.parametrize("sampling", SAMPLINGS, ids=lambda s: f"T{s.temperature}-p{s.top_p}")
@pytest.mark.parametrize("name", ["jacobi", "lookahead", "token recycling"])
def test_output_distribution_equals_target(name, sampling):
    target, prompt, length = ToyLM(seed=3), [0, 1, 0, 1, 2], 4
    build, drafted = decoders(target)[name], []

    def run(rng):
        decoder = build()
        output = decoder.generate(prompt, length, sampling, rng)
        drafted.append(sum(output.stats.drafted_at))
        return tuple(output.tokens)

    got = enumerate_outputs(run)
    want = sequence_distribution(target, prompt, length, sampling)
    assert abs(sum(got.values()) - 1) < 1e-9 and set(got) <= set(want)
    worst = max(abs(got.get(seq, 0.0) - p) for seq, p in want.items())
    assert worst < 1e-6, f"{name}: max |P_decoder - P_target| = {worst:.2e}"
    # Point-mass drafts are accepted with probability p(token) > 0, so every verified draft puts
    # accept branches into the enumeration; without one the test would prove nothing.
    assert max(drafted) > 0, "no draft was ever verified"


@pytest.mark.parametrize("name", ["jacobi", "lookahead", "token recycling"])
def test_greedy_output_equals_baseline(name):
    """On a real (random, tiny) transformer: auxiliary window rows and trees go through real attention."""
    target = tiny_llama(seed=1)
    baseline, build = SpeculativeDecoder(target), decoders(target)[name]
    for prompt in ([1], [3, 3, 0], [2, 1, 2, 1, 2], [0, 1, 2, 3, 0, 1]):
        assert build().generate(prompt, 16).tokens == baseline.generate(prompt, 16).tokens
