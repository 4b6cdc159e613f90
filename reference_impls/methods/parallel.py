"""Model-free parallel drafting, composed on the shared loop: Jacobi, Lookahead, Token Recycling.

Each builder has the signature of `methods/core.py` (target, draft model (unused), `DraftLengthPolicy`)
and returns a `SpeculativeDecoder`. The drafts
are deterministic (point masses), so greedy decoding verifies by exact match and sampling by the
engine's rejection sampling, both lossless.

Sizes: the papers tune their windows and trees for a GPU, where a forward over 80 tokens costs
about as much as over one. By default (the paper's settings) every method runs the paper's structure.
On this project's CPU reference machine wide forwards are not free (SmolLM2-135M: a forward over 8
tokens ~1.8x a one-token step), so the cost-aware policy on a CPU also cuts the structures down
(each method's `sized` variant in `registry.py`) and picks the depth per step, drafting nothing
where drafts do not pay: a labelled hardware variant, never the default.
"""

from __future__ import annotations

from specatlas.impls.engine.decoding import SpeculativeDecoder
from specatlas.impls.drafters.self_drafting.jacobi import Jacobi, Lookahead
from specatlas.impls.engine.draft_length import DraftLengthPolicy
from specatlas.impls.drafters.model_free.recycling import PAPER_TREE, TokenRecycling, template_nodes
from specatlas.impls.registry import METHODS


def jacobi_decoding(target, draft_model=None, policy=DraftLengthPolicy.paper()) -> SpeculativeDecoder:
    """Santilli et al. 2023: guesses for the next positions refined by parallel fixed-point
    iteration; the prefix that has converged to the target's argmax is committed. No block size of
    the paper's (sentences or fixed blocks for MT) carries over to chat models: the window is ours."""
    window = METHODS["santilli2023accelerating"].paper.window
    return SpeculativeDecoder(target, Jacobi(window), draft_length=policy.controller(target, window, max_depth=window))


def lookahead_decoding(target, draft_model=None, policy=DraftLengthPolicy.paper()) -> SpeculativeDecoder:
    """Fu et al. 2024: a Jacobi lookahead branch harvests n-grams into a pool while a verification
    branch checks the pool's n-grams for the last token, in the same forward."""
    sizes = METHODS["fu2024break"].constants_for(policy, target)
    window, ngram, guess_set = sizes.window, sizes.ngram, sizes.guess_set
    branch = window * (ngram - 1)  # the lookahead branch rides along whenever anything is drafted
    return SpeculativeDecoder(target, Lookahead(window, ngram, guess_set),
                              draft_length=policy.controller(target, ngram - 1, lambda k: branch + guess_set * k, ngram - 1))


def token_recycling(target, draft_model=None, policy=DraftLengthPolicy.paper()) -> SpeculativeDecoder:
    """Luo et al. 2025: the target's discarded top-k candidates, kept in an adjacency table, fill a
    static draft tree that is verified in one forward."""
    tree = recycling_template(target, policy)
    depth = max(map(len, tree))
    return SpeculativeDecoder(target, TokenRecycling(tree, METHODS["luo2025turning"].paper.top_k),
                              draft_length=policy.controller(target, depth, template_nodes(tree), depth))


def recycling_template(target, policy: DraftLengthPolicy) -> tuple[tuple[int, ...], ...]:
    """The paper's tree (`PAPER_TREE`), or the sized variant's (`tree`) where the policy runs it."""
    return getattr(METHODS["luo2025turning"].constants_for(policy, target), "tree", PAPER_TREE)
