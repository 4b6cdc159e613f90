"""Self-speculation and cascades, composed on the shared loop: Draft & Verify, SWIFT, staged speculation.

Each builder has the signature of `methods/core.py` (target, draft model, `DraftLengthPolicy`) and
returns a `SpeculativeDecoder`. Greedy decoding verifies by exact match; sampling by the engine's rejection sampling (chains and SWIFT's trees with the draft's own
distribution; the cascade's greedy drafts as point masses), lossless for every drafter.
"""

from __future__ import annotations

from specatlas.impls.engine.decoding import InnerDecoder, SpeculativeDecoder
from specatlas.impls.engine.draft_length import DraftLengthPolicy, FixedLength
from specatlas.impls.engine.drafting import PromptLookup
from specatlas.impls.methods.core import default_draft_model
from specatlas.impls.drafters.self_drafting.layer_skip import ExitThreshold, LayerSkip, Swift, skipped_layers
from specatlas.impls.registry import METHODS


def draft_and_verify(target, draft_model=None, policy=DraftLengthPolicy.paper(), skipped=None) -> SpeculativeDecoder:
    """Zhang et al. 2024: draft with the target minus the layers its Bayesian search skips (run once
    per model and cached; `skipped` overrides it), stop drafting below an adaptive confidence
    threshold, verify with the full target."""
    paper = METHODS["zhang2024draft"].paper
    skipped = skipped_layers(target) if skipped is None else skipped
    drafter = LayerSkip(target, skipped, ExitThreshold(paper.threshold, adaptive=True))
    return SpeculativeDecoder(target, drafter,
                              draft_length=policy.controller(target, paper.max_draft, max_depth=paper.max_draft))


def swift(target, draft_model=None, policy=DraftLengthPolicy.paper(), window=None) -> SpeculativeDecoder:
    """Xia et al. 2025: the skipped layers are optimised during decoding on the text generated so far
    (`window`: the tokens scored, its context window); drafting stops below a confidence and the
    draft's top candidates at each depth are verified as a tree."""
    paper = METHODS["xia2025swift"].paper
    drafter = Swift(target) if window is None else Swift(target, window)
    narrowest = min(paper.candidates)
    return SpeculativeDecoder(target, drafter, draft_length=policy.controller(
        target, paper.max_draft, lambda k: narrowest * k, max_depth=paper.max_draft))


def staged(target, draft_model=None, policy=DraftLengthPolicy.paper(), tree_nodes=None) -> SpeculativeDecoder:
    """Spector & Ré 2023: the draft model's own decoding is speculative (prompt lookup drafts for it,
    in place of the paper's Katz-backoff n-gram model), it keeps its cache across steps, and its
    draft is verified by the target as a tree of its most probable continuations (`tree_nodes`,
    the definition's `nodes` unless given; 0: the chain alone)."""
    paper, lookup = METHODS["spector2023accelerating"].paper, METHODS["saxena2023prompt"].paper
    tree_nodes = paper.nodes if tree_nodes is None else tree_nodes
    model, label, weights = default_draft_model(target, draft_model)
    inner = SpeculativeDecoder(model, PromptLookup(lookup.ngram), draft_length=FixedLength(lookup.tokens, "prompt lookup's"))
    length = policy.controller(target, paper.depth, lambda k: min(tree_nodes, 2 * k) if tree_nodes else k,
                               source="this project's")
    return SpeculativeDecoder(target, InnerDecoder(inner, tree_nodes, label), draft_length=length, weights=weights)
