"""The retrieval drafters' indexes against brute force, and the drafting rules of each paper."""

import json
import random

import numpy as np
import pytest
import torch

from specatlas.datastore import INSTRUCTIONS, read_corpus
from specatlas.impls.drafters.model_free.retrieval import (AUXILIARY, Datastore, ReferenceCopy, RetrievalTree,
                                       SuffixAutomaton, SuffixAutomatonDraft, suffix_array, trie_draft)
from specatlas.impls.engine.drafting import Prefill, Verified
from specatlas.impls.drafters.model_free.recycling import TokenRecycling
from specatlas.impls.engine.sampling import Randomness, Sampling
from specatlas.contamination import shared_text
from specatlas.impls.drafters.model_free import retrieval
from specatlas.impls.registry import METHODS

GREEDY, RNG = Sampling(), Randomness(0)


def rest_tree(store, nodes, **changed):
    """REST's drafter with the registry's constants (`changed` overrides some)."""
    paper = vars(METHODS["he2024rest"].paper)
    constants = {name: paper[name] for name in ("longest_suffix", "shortest_suffix", "retrieved")} | changed
    return RetrievalTree(store, nodes, **constants)


def random_texts(count=150, seed=0):
    rng = random.Random(seed)
    for _ in range(count):
        alphabet = rng.choice([1, 2, 3, 30])
        yield [rng.randint(0, alphabet) for _ in range(rng.randint(1, 50))]


def test_suffix_array_sorts_every_suffix():
    for text in random_texts():
        assert suffix_array(np.array(text)).tolist() == sorted(range(len(text)), key=lambda i: text[i:])


def test_longest_suffix_and_its_occurrences():
    for text in random_texts(60, seed=1):
        store = Datastore(text)
        context = text[-5:] + [0, 1]
        length, lo, hi = store.longest_suffix(context, max_length=6)
        occurs = lambda pattern: [s for s in range(len(text)) if text[s : s + len(pattern)] == pattern]  # noqa: E731
        want = max((n for n in range(1, 7) if occurs(context[-n:])), default=0)
        assert length == want
        if length:
            assert sorted(store.suffixes[lo:hi].tolist()) == occurs(context[-length:])


def test_suffix_automaton_tracks_the_longest_earlier_match():
    for text in random_texts(80, seed=2):
        automaton = SuffixAutomaton()
        for end, token in enumerate(text, start=1):
            automaton.extend(token)
            seen = text[:end]
            earlier = lambda n: [s for s in range(end - n) if seen[s : s + n] == seen[-n:]]  # noqa: E731
            want = max((n for n in range(1, end) if earlier(n)), default=0)
            assert automaton.matched == want
            if want:  # the draft continues the earliest earlier occurrence
                first = earlier(want)[0]
                assert automaton.continuation(3) == seen[first + want : first + want + 3]


def test_trie_keeps_the_most_frequent_prefixes_as_a_tree():
    rows = np.array([[1, 2, 3], [1, 2, 4], [1, 5, -1], [6, 7, 8], [1, 2, 3]])
    draft = trie_draft(rows, budget=4)
    paths = []
    for node in range(len(draft.tokens)):
        path, at = [], node
        while at >= 0:
            path.insert(0, draft.tokens[at])
            at = draft.parents[at]
        paths.append(tuple(path))
    # counts: (1,)=4, (1,2)=3, (1,2,3)=2, then ties at 1 broken by length: (6,) first.
    assert paths == [(1,), (1, 2), (1, 2, 3), (6,)]
    assert all(parent < node for node, parent in enumerate(draft.parents))


def test_rest_drafts_the_continuations_of_the_longest_suffix():
    store = Datastore([5, 1, 2, 3, 9, 7, 1, 2, 3, 9, 8, 4, 2, 3, 6])
    draft = rest_tree(store, lambda depth: 3 * depth).propose([0, 1, 2, 3], 2, GREEDY, RNG)
    # [1, 2, 3] occurs twice (then 9 7 / 9 8); the shorter [2, 3] is not consulted.
    assert draft.tokens == [9, 7, 8] and draft.parents == [-1, 0, 0]
    assert rest_tree(store, lambda depth: 3).propose([0, 0, 6], 2, GREEDY, RNG).tokens == []


def test_rest_reads_at_most_the_retrieved_cap_of_a_common_suffix(monkeypatch):
    """A 2-gram occurring 400 times: one lookup reads only the first `retrieved` entries of its
    suffix-array interval, however large the datastore."""
    rng = random.Random(0)
    tokens = [token for _ in range(400) for token in (7, 8, rng.randrange(4), rng.randrange(4))]
    store, seen = Datastore(tokens), []
    counted = retrieval.trie_draft
    monkeypatch.setattr(retrieval, "trie_draft", lambda rows, budget: seen.append(rows) or counted(rows, budget))
    draft = rest_tree(store, lambda depth: 6, retrieved=50).propose([9, 7, 8], 2, GREEDY, RNG)
    lo, hi = store.interval([7, 8])
    assert hi - lo == 400 and [rows.shape for rows in seen] == [(50, 2)]
    starts = store.suffixes[lo : lo + 50] + 2
    assert seen[0].tolist() == [tokens[start : start + 2] for start in starts] and draft.tokens
    assert METHODS["he2024rest"].paper.retrieved == 5000  # the paper's code's cap


def test_trie_counts_equal_brute_force_prefix_counts():
    rng = np.random.default_rng(0)
    for _ in range(200):
        rows = rng.integers(0, 3, (int(rng.integers(1, 30)), 4))
        for row in rows:
            row[int(rng.integers(1, 5)) :] = -1  # continuations that end early
        budget = int(rng.integers(1, 12))
        draft = trie_draft(rows, budget)
        counts = {}
        for row in rows.tolist():
            for end in range(1, (row.index(-1) if -1 in row else len(row)) + 1):
                counts[tuple(row[:end])] = counts.get(tuple(row[:end]), 0) + 1
        paths = []
        for node, token in enumerate(draft.tokens):
            parent = draft.parents[node]
            paths.append((*paths[parent], token) if parent >= 0 else (token,))
        cut = sorted(counts.values(), reverse=True)[min(budget, len(counts)) - 1]
        # every prefix more frequent than the budget-th count is kept (ties at the cut may not all fit)
        assert len(set(paths)) == len(paths) <= budget and set(paths) <= set(counts)
        assert {path for path, count in counts.items() if count > cut} <= set(paths)
        assert all(parent < node for node, parent in enumerate(draft.parents))


def test_llma_copies_from_the_first_occurrence_of_the_longest_ngram():
    reference = [1, 2, 3, 4, 9, 2, 3, 5, 2, 3, 4, 7]
    drafter = ReferenceCopy(reference)
    assert drafter.propose([8, 2, 3], 3, GREEDY, RNG).tokens == [4, 9, 2]  # first [2, 3]
    assert drafter.propose([9, 2, 3], 3, GREEDY, RNG).tokens == [5, 2, 3]  # longer [9, 2, 3] wins
    assert drafter.propose([0, 6], 3, GREEDY, RNG).tokens == []


def test_llma_searches_only_the_prompt_not_the_generated_text():
    drafter, prompt = ReferenceCopy(), [1, 2, 3, 4]
    drafter.start(prompt, Prefill(tuple(prompt)))
    assert drafter.propose(prompt, 2, GREEDY, RNG).tokens == []  # nothing follows [4] in the prompt
    assert drafter.propose(prompt + [7, 8, 2], 2, GREEDY, RNG).tokens == [3, 4]
    assert drafter.propose(prompt + [7, 8, 2, 3, 4, 7], 2, GREEDY, RNG).tokens == []  # 7 is not in the prompt
    drafter.start([7, 8, 9, 7], Prefill((7, 8, 9, 7)))  # a new generation, a new reference
    assert drafter.propose([7, 8, 9, 7], 2, GREEDY, RNG).tokens == [8, 9]


def test_sam_prefers_the_context_unless_the_datastore_match_is_longer_by_the_bias():
    store = Datastore([1, 2, 3, 4, 5, 6, 40, 41, 42])
    drafter = SuffixAutomatonDraft(store, bias=2)
    # In the context, [5, 6] occurred before (then 30); the datastore matches [3..6]: 4 - 2 > 2 is false.
    drafter.start([5, 6, 30, 3, 4, 5, 6], Prefill((5, 6, 30, 3, 4, 5, 6)))
    assert drafter.propose([5, 6, 30, 3, 4, 5, 6], 2, GREEDY, RNG).tokens == [30, 3]
    # [2..6] matches 5 tokens in the datastore: 5 - 2 > 2, so the static draft wins.
    drafter.start([5, 6, 30, 2, 3, 4, 5, 6], Prefill((5, 6, 30, 2, 3, 4, 5, 6)))
    assert drafter.propose([5, 6, 30, 2, 3, 4, 5, 6], 2, GREEDY, RNG).tokens == [40, 41]


def test_sam_hands_short_matches_to_its_auxiliary_drafter_which_learns_from_every_step():
    recycling = TokenRecycling(tree=((0,), (0, 0)), k=1)
    drafter = SuffixAutomatonDraft(None, auxiliary=recycling, threshold=3)
    context = [7, 8, 9, 1, 7, 8, 9]  # [7, 8, 9] occurred before: a 3-token match, the SAM draft
    drafter.start(context, Prefill(tuple(context)))
    draft = drafter.propose(context, 2, GREEDY, RNG)
    assert draft.tokens == [1, 7] and draft.key == ("context", 3)
    # The step committed [1, 2]: the rows' argmax (the table's top-1) is recycled through SAM.
    logits = torch.nn.functional.one_hot(torch.tensor([1, 2, 5]), 10).float()
    drafter.observe(Verified(draft, logits, {}, [0], tuple(context + [1, 2]), 9))
    assert recycling.table == {9: [1], 1: [2], 7: [5]}
    # [.., 1, 2]: 2 never occurred before, so no match: the auxiliary drafts.
    draft = drafter.propose(context + [1, 2], 2, GREEDY, RNG)
    assert draft.key == AUXILIARY and draft.tokens == []  # 2 has no table row yet
    drafter.observe(Verified(draft, logits[1:2], {}, [], tuple(context + [1, 2, 7]), 2))
    # [.., 2, 7]: only [7] matches (1 < 3 tokens): the recycled row of 7, then nothing after 5.
    assert drafter.propose(context + [1, 2, 7], 2, GREEDY, RNG).tokens == [5]


def test_sam_asks_a_block_auxiliary_for_no_more_than_its_block():
    """SAM-Decoding[PARD]: a step handed to the block drafter asks for at most the block it was
    trained for, whatever SAM-Decoding's own draft length; a match still drafts its full length."""
    asked = []

    class Block(TokenRecycling):
        def propose(self, context, depth, sampling, rng):
            asked.append(depth)
            return super().propose(context, depth, sampling, rng)

    drafter = SuffixAutomatonDraft(None, auxiliary=Block(tree=((0,),), k=1), threshold=3, auxiliary_depth=3)
    context = [7, 8, 9, 1, 2, 3, 4, 5, 6, 7, 8, 9]
    drafter.start(context, Prefill(tuple(context)))
    assert len(drafter.propose(context, 8, GREEDY, RNG).tokens) == 8 and asked == []
    drafter.propose(context + [40], 8, GREEDY, RNG)
    assert asked == [3]


def test_datastore_round_trip(tmp_path):
    store = Datastore.from_documents([[3, 1, 2], [1, 2]], separator=0, meta={"model": "toy"})
    store.save(tmp_path / "store.npz")
    loaded = Datastore.load(tmp_path / "store.npz")
    assert loaded.tokens == [3, 1, 2, 0, 1, 2, 0] and loaded.meta == {"model": "toy"}
    assert loaded.suffixes.tolist() == store.suffixes.tolist()


def test_corpus_reader(tmp_path):
    (tmp_path / "a.txt").write_text("first doc\nline two\n\n\nsecond doc\n")
    (tmp_path / "b.jsonl").write_text(json.dumps({"text": "plain"}) + "\n\n"
                                      + json.dumps({"id": 3, "turns": ["q1", "q2"], "meta": {"note": "n"}}) + "\n")
    assert read_corpus(tmp_path / "a.txt") == ["first doc\nline two", "second doc"]
    assert read_corpus(tmp_path / "b.jsonl") == ["plain", "q1\nq2\nn"]


def test_self_generation_instructions_are_our_own():
    assert len(set(INSTRUCTIONS)) == len(INSTRUCTIONS) >= 60
    assert not shared_text(INSTRUCTIONS)


@pytest.mark.parametrize("arrays, message", [
    (dict(tokens=np.array([1, 2, 3]), suffixes=np.array([0, 1, 7])), "points outside its tokens"),
    (dict(tokens=np.array([1, -2, 3]), suffixes=np.array([0, 1, 2])), "a token id is negative"),
    (dict(tokens=np.array([[1, 2], [3, 4]]), suffixes=np.array([0, 1, 2, 3])), "are not tokens and their suffix array"),
    (dict(tokens=np.array([1.5, 2.0]), suffixes=np.array([0, 1])), "are not tokens and their suffix array"),
    (dict(tokens=np.array([1, 2]), suffixes=np.array([0, 1]), meta=np.array("[1]")), "meta is not a JSON object"),
])
def test_a_damaged_datastore_is_refused_before_use(tmp_path, arrays, message):
    path = tmp_path / "ds.npz"
    np.savez(path, **({"meta": np.array("{}")} | arrays))
    with pytest.raises(ValueError, match=message):
        Datastore.load(path)
