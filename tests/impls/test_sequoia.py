"""Sequoia (Chen et al. 2024): its dynamic programme against brute force, the hardware-aware choice,
the acceptance measurement and its cache, and losslessness by exact enumeration, with a planted
bug the enumeration must catch."""

from __future__ import annotations

import json
from functools import lru_cache
from itertools import product

import numpy as np
import pytest
import torch

from specatlas.impls.drafters.draft_structure import tree_search
from specatlas.impls.engine.decoding import SpeculativeDecoder
from specatlas.impls.engine.draft_length import FixedLength
from specatlas.impls.engine.sampling import Sampling
from specatlas.impls.drafters.draft_structure.tree_search import (SequoiaDrafter, Tree, hardware_aware, measure_acceptance, optimal_values,
                                                tree_paths)
from specatlas.impls.engine.verification import RejectionSampling

from .test_exact_distribution import PROMPT, SAMPLINGS, deviation
from .toy import ToyLM, enumerate_outputs, sequence_distribution, tiny_llama

ACCEPTANCE = (0.55, 0.2, 0.1)


def expected_tokens(paths, acceptance) -> float:
    """A tree's expected tokens per step under positional acceptance: 1 + Σ over nodes of Π p along the path."""
    total = 1.0
    for path in paths:
        chance = 1.0
        for rank in path:
            chance *= acceptance[rank] if rank < len(acceptance) else 0.0
        total += chance
    return total


@lru_cache(maxsize=None)
def all_trees(nodes: int, levels: int) -> list[tuple[tuple[int, ...], ...]]:
    """Every tree of `nodes` nodes (root included), at most `levels` levels and len(ACCEPTANCE) children per
    node (the vector's width), whose children have ranks 0..b-1."""
    if nodes == 1:
        return [()]
    if levels == 1:
        return []
    out = []
    # Ordered splits of the nodes - 1 below the root into the children's subtree sizes.
    for children in range(1, min(nodes - 1, len(ACCEPTANCE)) + 1):
        for sizes in product(range(1, nodes), repeat=children):
            if sum(sizes) != nodes - 1:
                continue
            for subtrees in product(*(all_trees(size, levels - 1) for size in sizes)):
                out.append(tuple((rank,) + path for rank, sub in enumerate(subtrees) for path in ((),) + sub))
    return out


@pytest.mark.parametrize("levels", [2, 3, 7])
def test_the_dynamic_programme_finds_the_best_tree(levels):
    value, split = optimal_values(ACCEPTANCE, 7, 7)
    for nodes in range(1, 8):
        best = max(expected_tokens(tree, ACCEPTANCE) for tree in all_trees(nodes, levels)) if all_trees(nodes, levels) else None
        if best is None:
            assert value[nodes, levels].max() == -float("inf")
            continue
        assert abs(value[nodes, levels].max() - best) < 1e-12
        paths = tree_paths(value, split, nodes, levels)
        assert len(paths) == nodes - 1 and max(map(len, paths), default=0) <= levels - 1
        assert abs(expected_tokens(paths, ACCEPTANCE) - best) < 1e-12


def test_a_zero_acceptance_never_makes_a_tree_possible():
    """A child the target never keeps (p_b = 0) adds nothing, and impossible subtrees stay impossible."""
    value, split = optimal_values((0.5, 0.0), 6, 3)
    assert not np.isnan(value).any()
    assert value[3, 2].max() == pytest.approx(1.5) and value[4, 2].max() == -float("inf")  # W = 2 children at most
    assert value[4, 3].max() == pytest.approx(1.75) and tree_paths(value, split, 4, 3)[:2] == [(0,), (0, 0)]


def test_the_hardware_decides_the_size():
    """A flat target curve (width is free) buys a large tree; a curve as steep as the width buys the
    smallest tree (the choice is among trees, as the paper's optimiser's), never silently none."""
    widths = (1, 2, 4, 8, 16, 32)
    drafter = {w: 0.01 for w in widths}
    flat = hardware_aware(ACCEPTANCE, {w: 1.0 for w in widths}, drafter, 32, 10)
    assert len(flat.paths) == 31 and flat.expected > 2
    steep = hardware_aware(ACCEPTANCE, {w: float(w) for w in widths}, drafter, 32, 10)
    assert steep.paths == ((0,),) and steep.expected == pytest.approx(1 + ACCEPTANCE[0])
    # In between, the best of the measured sizes, priced with the drafter's forwards.
    curve = {w: 1 + 0.1 * w for w in widths}
    chosen = hardware_aware(ACCEPTANCE, curve, drafter, 32, 10)
    value, split = optimal_values(ACCEPTANCE, 32, 10)
    rates = [value[n, l].max() / (curve[n] + tree_search.drafting_seconds(tree_paths(value, split, n, l), drafter))
             for n in widths[1:] for l in range(2, 11)]
    assert chosen.expected / chosen.seconds == pytest.approx(max(rates)) and 1 < len(chosen.paths) < 31


@pytest.fixture(scope="module")
def tiny():
    return tiny_llama(seed=1, layers=2, vocab=16), tiny_llama(seed=2, layers=1, vocab=16)


def test_measured_acceptance_is_what_greedy_drafts_agree_on(tiny):
    """Greedy: p_k is the share of positions where the drafter's k-th ranked token is the target's choice."""
    target, drafter = tiny
    prompts = [[1, 2, 3], [4, 5]]
    vector = measure_acceptance(target, drafter, Sampling(), RejectionSampling(), prompts, width=4, tokens=8)
    ranks = []
    for prompt in prompts:
        text = prompt + SpeculativeDecoder(target).generate(prompt, 8).tokens
        with torch.no_grad():
            want = target(torch.tensor([text[:-1]])).logits[0, len(prompt) - 1 :].argmax(-1)
            ranked = drafter(torch.tensor([text[:-1]])).logits[0, len(prompt) - 1 :].argsort(-1, descending=True)
        ranks += [int((row == token).nonzero()) for row, token in zip(ranked, want)]
    assert vector == [sum(rank == k for rank in ranks) / len(ranks) for k in range(4)]
    assert 0 < sum(vector) < 1


@pytest.mark.parametrize("sampling", [Sampling(), Sampling(0.8)], ids=["greedy", "T0.8"])
def test_a_drafter_equal_to_the_target_is_always_kept_first(tiny, sampling):
    target, _ = tiny
    vector = measure_acceptance(target, target, sampling, RejectionSampling(), [[1, 2, 3]], width=3, tokens=6)
    assert vector == [1.0, 0.0, 0.0]


def test_the_vector_is_measured_once_and_cached(tiny, tmp_path, monkeypatch):
    from specatlas.impls.drafters.self_drafting import layer_skip

    target, drafter = tiny
    monkeypatch.setenv("SPECATLAS_CACHE", str(tmp_path))
    monkeypatch.setattr(tree_search, "MEASURE_TOKENS", 6)
    monkeypatch.setattr(layer_skip, "calibration_prompts", lambda model, count, purpose: [[1, 2, 3]])
    first = tree_search.acceptance_vector(target, drafter, Sampling(), RejectionSampling(), width=4)
    [stored] = (tmp_path / "sequoia").iterdir()
    assert json.loads(stored.read_text())["acceptance"] == first

    def measured_again(*args, **kwargs):
        raise AssertionError("measured again")

    monkeypatch.setattr(tree_search, "measure_acceptance", measured_again)
    assert tree_search.acceptance_vector(target, drafter, Sampling(), RejectionSampling(), width=4) == first
    stored.write_text('{"acceptance": "import os"}')  # unreadable: measured again, never run
    with pytest.raises(AssertionError, match="measured again"):
        tree_search.acceptance_vector(target, drafter, Sampling(), RejectionSampling(), width=4)


# A Sequoia-shaped tree on the toy's 3 tokens: two children of the root, the first with one of its own.
TREE = Tree(((0,), (0, 0), (1,)), 0.0, 1.0)


class WithReplacementUnmarked(SequoiaDrafter):
    """A planted bug: siblings drawn independently (with replacement) but verified as drawn without."""

    def propose(self, context, depth, sampling, rng):
        self.replacement = True
        draft = super().propose(context, depth, sampling, rng)
        draft.replacement = False
        return draft


def sequoia_decoder(target, drafter_model, sampling, drafter_type=SequoiaDrafter):
    verifier = RejectionSampling()
    drafter = drafter_type(target, drafter_model, verifier)
    drafter.trees[sampling] = TREE  # the tree the optimiser would choose; its search is tested above
    return SpeculativeDecoder(target, drafter, sampling_verifier=verifier, draft_length=FixedLength(2))


@pytest.fixture(scope="module")
def toys():
    return ToyLM(seed=1), ToyLM(seed=2, sharpness=1.5)


@pytest.mark.parametrize("sampling", SAMPLINGS, ids=lambda s: f"T{s.temperature}-p{s.top_p}")
def test_sequoia_keeps_the_target_distribution(toys, sampling):
    target, drafter_model = toys
    got = enumerate_outputs(lambda rng: tuple(sequoia_decoder(target, drafter_model, sampling)
                                              .generate(PROMPT, 3, sampling, rng).tokens))
    worst = deviation(got, sequence_distribution(target, PROMPT, 3, sampling))
    assert worst < 1e-6, f"max |P_decoder - P_target| = {worst:.2e}"


def test_siblings_drawn_with_replacement_but_verified_without_are_caught(toys):
    target, drafter_model = toys
    sampling = SAMPLINGS[0]
    got = enumerate_outputs(lambda rng: tuple(sequoia_decoder(target, drafter_model, sampling, WithReplacementUnmarked)
                                              .generate(PROMPT, 3, sampling, rng).tokens))
    worst = deviation(got, sequence_distribution(target, PROMPT, 3, sampling))
    assert worst > 1e-2, f"the planted bug moved the distribution by only {worst:.2e}"


def test_the_drafter_fills_the_chosen_tree(toys):
    """Guards the tests above: the draft has the tree's shape, siblings distinct (without replacement)."""
    from specatlas.impls.engine.sampling import Randomness

    target, drafter_model = toys
    sampling = SAMPLINGS[0]
    drafter = sequoia_decoder(target, drafter_model, sampling).drafter
    drafter.start(PROMPT, None)
    draft = drafter.propose(list(PROMPT), 2, sampling, Randomness(0))
    assert draft.parents == [-1, -1, 0] and not draft.replacement and draft.tokens[0] != draft.tokens[1]
