"""SuffixDecoding's parts: the suffix tree's counts, the frequency-scored speculation tree, the
α·p node budget, and the tree of earlier outputs that carries over from one generation to the
next. (Its greedy and sampled outputs are the target's: test_retrieval_lossless.py and
test_every_method.py.)"""

import random

import pytest

from specatlas.impls.drafters.model_free.suffix_tree import SuffixDecoding, SuffixTree, grow
from specatlas.impls.engine import kv
from specatlas.impls.engine.sampling import Randomness, Sampling


def counts(tree: SuffixTree, text: list[int], longest: int) -> dict[tuple, int]:
    """Every substring of up to `longest` tokens that the tree holds, with its count."""
    out = {}
    for length in range(1, longest + 1):
        for start in range(len(text) - length + 1):
            pattern = tuple(text[start : start + length])
            node = tree.find(pattern)
            out[pattern] = None if node is None else node.count
    return out


def test_the_tree_counts_every_substring_up_to_its_depth():
    text = [1, 2, 1, 2, 3]
    tree = SuffixTree(depth=3)
    tree.extend("a", text)
    want = {}
    for length in range(1, 4):
        for start in range(len(text) - length + 1):
            pattern = tuple(text[start : start + length])
            want[pattern] = want.get(pattern, 0) + 1
    assert counts(tree, text, 3) == want
    assert tree.find([1, 2, 1, 2]) is None  # deeper than the tree


def test_growing_token_by_token_is_adding_the_whole_text():
    rng = random.Random(0)
    text = [rng.randrange(4) for _ in range(60)]
    whole, online = SuffixTree(depth=5), SuffixTree(depth=5)
    whole.extend("a", text)
    for token in text:
        online.extend("a", [token])
    assert counts(online, text, 5) == counts(whole, text, 5)


def test_substrings_never_span_two_sequences():
    tree = SuffixTree(depth=4)
    tree.extend("a", [1, 2])
    tree.extend("b", [3, 4])
    assert tree.find([2, 3]) is None and tree.find([1, 2]).count == 1 and tree.find([3, 4]).count == 1


def test_the_speculation_tree_adds_the_most_probable_node_first():
    """After [7]: 1 three times in four, then 5 in two of those three: D(1) = 3/4, D(1, 5) = 1/2,
    D(2) = D(1, 6) = 1/4 (a tie, broken by which was offered first)."""
    tree = SuffixTree(depth=4)
    for sequence, text in enumerate([[7, 1, 5], [7, 1, 5], [7, 1, 6], [7, 2, 5]]):
        tree.extend(sequence, text)
    grown = grow(tree.find([7]), budget=3, depth=4, min_probability=0.1)
    assert grown.tokens == [1, 5, 2] and grown.parents == [-1, 0, -1]
    assert grown.probabilities == pytest.approx([0.75, 0.5, 0.25])
    assert grow(tree.find([7]), budget=10, depth=4, min_probability=0.3).tokens == [1, 5]  # D < 0.3 dropped
    assert grow(tree.find([7]), budget=10, depth=1, min_probability=0.1).tokens == [1, 2]  # one level


def test_drafts_respect_the_node_budget_and_the_depth():
    """MAX_SPEC = α·p nodes for a pattern of p tokens (and the cap), never deeper than asked."""
    rng = random.Random(1)
    phrase = [rng.randrange(20) for _ in range(12)]
    text = [token for _ in range(6) for token in phrase + [rng.randrange(20)]]
    for factor, depth in ((1.0, 64), (0.5, 4), (2.0, 3)):
        tree = SuffixTree(depth=64)
        tree.extend("a", text[:20])
        budget = lambda length: min(20, int(factor * length + 1e-6))  # noqa: E731
        drafted = 0
        for end in range(21, len(text)):
            tree.extend("a", text[end - 1 : end])
            speculation = tree.speculate(text[:end], budget, depth, 0.1)
            drafted += len(speculation.tokens)
            assert len(speculation.tokens) <= budget(speculation.match)
            assert max(kv.depths(speculation.parents), default=0) <= depth
        assert drafted > 0
    drafter = SuffixDecoding(nodes=lambda d: 2 * d)
    drafter.start(text[:40], None)
    draft = drafter.propose(text[:40], 3, Sampling(), Randomness(0))
    assert draft.tokens and len(draft.tokens) <= 6 and draft.depth <= 3


def test_earlier_outputs_are_drafted_from_in_a_later_generation():
    drafter = SuffixDecoding()
    drafter.start([1, 2, 3], None)
    drafter.propose([1, 2, 3, 10, 11, 12, 13, 14], 8, Sampling(), Randomness(0))
    drafter.start([4, 5, 6], None)  # another request: its prompt never held 10, 11, ...
    draft = drafter.propose([4, 5, 6, 10, 11], 8, Sampling(), Randomness(0))
    # [10, 11] occurs twice in the outputs (then 12 once): D = 1/2 for 12 and for 12, 13; a
    # pattern of 2 tokens grows at most 2 nodes.
    assert draft.tokens == [12, 13] and draft.parents == [-1, 0] and draft.key == ("outputs", 2)
    assert SuffixDecoding().propose([4, 5, 6, 10, 11], 8, Sampling(), Randomness(0)).tokens == []


def test_the_last_step_of_a_generation_is_kept():
    """`observe` adds what the final verification committed, though no proposal follows it."""
    from specatlas.impls.engine.drafting import Draft, Verified

    drafter = SuffixDecoding()
    drafter.start([1, 2], None)
    drafter.propose([1, 2], 4, Sampling(), Randomness(0))
    drafter.observe(Verified(Draft(), None, {}, [], (1, 2, 30, 31), 2))
    assert drafter.outputs.find([30, 31]).count == 1
