"""Model-free parallel drafting, composed on the shared loop: Jacobi, Lookahead, Token Recycling.

Each builder has the signature of `methods/core.py` (target, draft model (unused), `DraftLengthPolicy`)
and returns a `SpeculativeDecoder`. The drafts
are deterministic (point masses), so greedy decoding verifies by exact match and sampling by the
engine's rejection sampling, both lossless.

Sizes: the papers tune their windows and trees for a GPU, where a forward over 80 tokens costs
about as much as over one. By default (the paper's settings) every method runs the paper's structure.
On this project's CPU reference machine wide forwards are not free (SmolLM2-135M: a forward over 8
tokens ~1.8x a one-token step), so the cost-aware policy on a CPU also cuts the
structures down (sizes below) and picks the depth per step, drafting nothing where drafts do
not pay: a labelled hardware variant, never the default.
"""

from __future__ import annotations

from specatlas.impls.engine.decoding import SpeculativeDecoder
from specatlas.impls.drafters.self_drafting.jacobi import Jacobi, Lookahead
from specatlas.impls.engine.draft_length import DraftLengthPolicy
from specatlas.impls.drafters.model_free.recycling import PAPER_TREE, TokenRecycling, template_nodes

# Santilli et al. iterate over blocks of future positions (whole sentences or fixed blocks for
# MT); no block size carries over to chat models, so the window is this project's: 8 guesses.
JACOBI_WINDOW = 8
# Lookahead (W, N, G): the paper's setting for 7B models on an A100, and the smallest window that
# still harvests 3-grams for a CPU, where every verified token costs ~11% of a step.
LOOKAHEAD_GPU, LOOKAHEAD_CPU = (15, 5, 15), (3, 3, 3)
# Token Recycling's template on a CPU: the paper tree's top-1 path. Chosen by expected tokens per
# unit of forward cost: on 16 Spec-Bench prompts (SmolLM2-135M, full 80-node tree, 1.66 tokens per
# step) the accepted path went through candidate (0,) in 21% of steps, (0, 0) in 7.5%, every other
# node in at most 5.5%, so at ~11% of a step per verified token only the top-1 chain pays.
CPU_TREE = tuple((0,) * depth for depth in range(1, 7))


def jacobi_decoding(target, draft_model=None, policy=DraftLengthPolicy.paper()) -> SpeculativeDecoder:
    """Santilli et al. 2023: guesses for the next positions refined by parallel fixed-point
    iteration; the prefix that has converged to the target's argmax is committed."""
    return SpeculativeDecoder(target, Jacobi(JACOBI_WINDOW),
                              draft_length=policy.controller(target, JACOBI_WINDOW, max_depth=JACOBI_WINDOW))


def lookahead_decoding(target, draft_model=None, policy=DraftLengthPolicy.paper()) -> SpeculativeDecoder:
    """Fu et al. 2024: a Jacobi lookahead branch harvests n-grams into a pool while a verification
    branch checks the pool's n-grams for the last token, in the same forward."""
    window, ngram, guess_set = LOOKAHEAD_CPU if _sized_for_cpu(target, policy) else LOOKAHEAD_GPU
    branch = window * (ngram - 1)  # the lookahead branch rides along whenever anything is drafted
    return SpeculativeDecoder(target, Lookahead(window, ngram, guess_set),
                              draft_length=policy.controller(target, ngram - 1, lambda k: branch + guess_set * k, ngram - 1))


def token_recycling(target, draft_model=None, policy=DraftLengthPolicy.paper()) -> SpeculativeDecoder:
    """Luo et al. 2025: the target's discarded top-k candidates, kept in an adjacency table, fill a
    static draft tree that is verified in one forward."""
    tree = recycling_template(target, policy)
    depth = max(map(len, tree))
    return SpeculativeDecoder(target, TokenRecycling(tree),
                              draft_length=policy.controller(target, depth, template_nodes(tree), depth))


def recycling_template(target, policy: DraftLengthPolicy) -> tuple[tuple[int, ...], ...]:
    """The paper's 80-node tree, or on the cost-aware policy on a CPU its top-1 path."""
    return CPU_TREE if _sized_for_cpu(target, policy) else PAPER_TREE


def _sized_for_cpu(target, policy: DraftLengthPolicy) -> bool:
    return policy.is_cost_aware and target.device.type == "cpu"
