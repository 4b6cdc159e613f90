"""Model-free parallel drafting, composed on the shared loop: Jacobi, Lookahead, Token Recycling.

Each builder has the signature of `methods.py` (target, draft model (unused), draft length:
"auto" for the cost-aware policy or a fixed depth) and returns a `SpeculativeDecoder`. The drafts
are deterministic (point masses), so greedy decoding verifies by exact match and sampling by the
engine's rejection sampling, both lossless.

Sizes: the papers tune their windows and trees for a GPU, where a forward over 80 tokens costs
about as much as over one. On this project's CPU reference machine it does not (SmolLM2-135M:
a forward over 8 tokens ~1.8x a one-token step, over 24 ~3x), so the defaults below are the
papers' structures cut down, and the cost-aware policy picks the depth per step, drafting
nothing where drafts do not pay.
"""

from __future__ import annotations

from specatlas.impls.decoding import SpeculativeDecoder
from specatlas.impls.draft_length import CostAware, FixedLength, calibrate
from specatlas.impls.jacobi import Jacobi, Lookahead
from specatlas.impls.recycling import PAPER_TREE, TokenRecycling, tree_nodes

JACOBI_WINDOW = 8
# Lookahead (W, N, G); the paper's 7B/A100 setting is (15, 5, 15).
LOOKAHEAD = (4, 4, 4)
# The paper's tree restricted to its top-1 chain plus, at every depth, one second-ranked swap
# (the nodes whose candidate ranks sum to at most 1): 23 of its 80 nodes.
CPU_TREE = tuple(path for path in PAPER_TREE if sum(path) <= 1)


def jacobi_decoding(target, draft_model=None, draft_length="auto") -> SpeculativeDecoder:
    """Santilli et al. 2023: guesses for the next positions refined by parallel fixed-point
    iteration; the prefix that has converged to the target's argmax is committed."""
    return SpeculativeDecoder(target, Jacobi(JACOBI_WINDOW), draft_length=_policy(target, draft_length, JACOBI_WINDOW))


def lookahead_decoding(target, draft_model=None, draft_length="auto") -> SpeculativeDecoder:
    """Fu et al. 2024: a Jacobi lookahead branch harvests n-grams into a pool while a verification
    branch checks the pool's n-grams for the last token, in the same forward."""
    window, ngram, guess_set = LOOKAHEAD
    branch = window * (ngram - 1)  # the lookahead branch rides along whenever anything is drafted
    return SpeculativeDecoder(target, Lookahead(window, ngram, guess_set),
                              draft_length=_policy(target, draft_length, ngram - 1, lambda k: branch + guess_set * k))


def token_recycling(target, draft_model=None, draft_length="auto") -> SpeculativeDecoder:
    """Luo et al. 2025: the target's discarded top-k candidates, kept in an adjacency table, fill a
    static draft tree that is verified in one forward."""
    tree = CPU_TREE if target.device.type == "cpu" else PAPER_TREE
    return SpeculativeDecoder(target, TokenRecycling(tree),
                              draft_length=_policy(target, draft_length, max(map(len, tree)), tree_nodes(tree)))


def _policy(target, draft_length, max_depth: int, nodes=lambda k: k):
    if draft_length != "auto":
        return FixedLength(int(draft_length))
    return CostAware(max_depth, calibrate(target, range(1, nodes(max_depth) + 2)), nodes)
