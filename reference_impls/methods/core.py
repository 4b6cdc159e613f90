"""Methods as compositions of a drafter (taxonomy axis 1) and verifiers (axis 2) on the shared loop.

Every builder takes the target model, an optional draft model and a `DraftLengthPolicy` (the
paper's settings by default, a fixed depth on the paper's structure, or the cost-aware policy
with structures sized for the device) and returns a `SpeculativeDecoder`, which carries the
trained files the build loaded (`weights`: its provenance, nothing recorded elsewhere). Greedy decoding
verifies by exact match; sampling by rejection sampling, which is lossless for every drafter.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import NamedTuple

from torch import nn

from specatlas.impls.families.checkpoints import load_head, shipped_head_folder
from specatlas.impls.engine.decoding import SpeculativeDecoder
from specatlas.impls.engine.draft_length import FIXED, DraftLengthPolicy
from specatlas.impls.engine.drafting import ModelDrafter, PromptLookup
from specatlas.impls.engine.models import is_embedded, shallow_slice
from specatlas.impls.drafters.draft_structure.tree_search import MAX_LEVELS, SequoiaDrafter
from specatlas.impls.drafters.draft_structure.pipeline import Pearl
from specatlas.impls.engine.verification import (BlockVerification, KSequential, RejectionSampling, SpecHub,
                                                 TraversalVerification, Verifier)
from specatlas.impls.families.online import OnlineDistillation
from specatlas.impls.registry import METHODS, expansion_nodes


def autoregressive(target, draft_model=None, policy=DraftLengthPolicy.paper()) -> SpeculativeDecoder:
    """One target forward per token: the reference every method must match and beat."""
    return SpeculativeDecoder(target)


def speculative_sampling(target, draft_model=None, policy=DraftLengthPolicy.paper()) -> SpeculativeDecoder:
    """Leviathan et al. 2023 (Algorithm 1): the draft model proposes γ tokens autoregressively,
    the target scores all γ+1 positions in one forward, each draft token is kept with
    probability min(1, p/q), the first rejection is resampled from norm(max(p - q, 0)), and a
    fully accepted chain earns a bonus token from p."""
    return _draft_model_method(target, draft_model, policy, METHODS["leviathan2023fast"].paper.gamma)


def chen_speculative_sampling(target, draft_model=None, policy=DraftLengthPolicy.paper()) -> SpeculativeDecoder:
    """Chen et al. 2023: the same algorithm (modified rejection sampling over K drafted tokens)."""
    return _draft_model_method(target, draft_model, policy, METHODS["chen2023accelerating"].paper.k)


def block_verification(target, draft_model=None, policy=DraftLengthPolicy.paper()) -> SpeculativeDecoder:
    """Sun et al. 2025: speculative decoding's draft model and loop, its γ drafted tokens verified
    jointly as a block (`BlockVerification`) instead of token by token."""
    return _draft_model_method(target, draft_model, policy, METHODS["sun2025block"].paper.gamma, BlockVerification())


def _draft_model_method(target, draft_model, policy, paper_depth, verifier: Verifier | None = None):
    model, label, weights = default_draft_model(target, draft_model)
    return SpeculativeDecoder(target, ModelDrafter(model, label=label), sampling_verifier=verifier or RejectionSampling(),
                              draft_length=policy.controller(target, paper_depth), weights=weights)


def specinfer(target, draft_model=None, policy=DraftLengthPolicy.paper()) -> SpeculativeDecoder:
    """Miao et al. 2024: the draft model expands a token tree (top-w children when greedy, w
    samples without replacement when sampling); the target verifies the whole tree in one forward
    with a tree attention mask, and multi-step speculative sampling (recursive rejection over
    siblings) picks the accepted root-to-leaf path. The tree: widths[d] children per node at depth d."""
    return _expansion_tree(target, draft_model, policy, METHODS["miao2024specinfer"])


def _expansion_tree(target, draft_model, policy, spec, verifier: Verifier | None = None, hub: bool = False):
    """A draft model expanding `spec`'s tree of `widths` (the paper's, or the cost-aware policy's
    sized one), siblings drawn without replacement when sampling."""
    model, label, weights = default_draft_model(target, draft_model)
    widths = spec.constants_for(policy, target).widths
    length = policy.controller(target, len(spec.paper.widths), expansion_nodes(widths))
    return SpeculativeDecoder(target, ModelDrafter(model, widths, label, hub=hub),
                              sampling_verifier=verifier or RejectionSampling(), draft_length=length, weights=weights)


def multi_candidate(target, draft_model=None, policy=DraftLengthPolicy.paper(), replacement=False) -> SpeculativeDecoder:
    """Yang et al. 2024 (MCSD): the draft model samples k_d candidates after every node at depth d
    (with or without replacement), the target scores the whole tree in one forward with tree
    attention, and multi-candidate speculative sampling tries each node's candidates in turn (kept
    with probability min(1, p/q), else p <- norm(max(p - q, 0)): `RejectionSampling`). Defaults
    of its code: k_d by depth (`k_config`), candidates drawn without replacement (`replacement`
    draws them independently)."""
    model, label, weights = default_draft_model(target, draft_model)
    k_config = METHODS["yang2024multi"].paper.k_config
    drafter = ModelDrafter(model, k_config, label, replacement)
    depth = len(k_config)
    return SpeculativeDecoder(target, drafter,
                              draft_length=policy.controller(target, depth, expansion_nodes(k_config), max_depth=depth),
                              weights=weights)


def traversal_verification(target, draft_model=None, policy=DraftLengthPolicy.paper()) -> SpeculativeDecoder:
    """Weng et al. 2025: the draft model expands a token tree (siblings drawn without replacement),
    the target scores it in one forward, and traversal verification (`TraversalVerification`)
    judges it leaf to root by whole sequences instead of token by token from the root."""
    return _expansion_tree(target, draft_model, policy, METHODS["weng2025traversal"], TraversalVerification())


def spectr(target, draft_model=None, policy=DraftLengthPolicy.paper()) -> SpeculativeDecoder:
    """Sun et al. 2023 (SpecTr): the draft model samples k independent drafts of L tokens (a tree
    whose root has k i.i.d. children, each continued by a chain), the target scores them in one
    forward, and K-SEQ draft selection (`KSequential`) keeps a token among the agreeing drafts'
    next tokens at each position."""
    model, label, weights = default_draft_model(target, draft_model)
    paper = METHODS["sun2023spectr"].paper
    drafter = ModelDrafter(model, (paper.drafts,), label, replacement=True)
    return SpeculativeDecoder(target, drafter, sampling_verifier=KSequential(),
                              draft_length=policy.controller(target, paper.length, expansion_nodes((paper.drafts,))),
                              weights=weights)


def spechub(target, draft_model=None, policy=DraftLengthPolicy.paper()) -> SpeculativeDecoder:
    """Sun et al. 2024 (SpecHub): the draft model expands a binary token tree whose sibling pairs
    hold the hub, the draft's most likely token (`drafting.hub_pair`); the target scores it in one
    forward and SpecHub's closed-form transport (`SpecHub`) decides each pair from the root down."""
    return _expansion_tree(target, draft_model, policy, METHODS["sun2024spechub"], SpecHub(), hub=True)


def sequoia(target, draft_model=None, policy=DraftLengthPolicy.paper()) -> SpeculativeDecoder:
    """Chen et al. 2024 (Sequoia): the draft model fills the token tree that maximises expected
    tokens per second on this hardware (`tree_search`: dynamic programming over the measured
    positional acceptance vector, the size and depth from the measured cost curves); siblings
    are the drafter's top tokens (greedy) or drawn without replacement, verified by recursive
    rejection with q conditioned on the earlier siblings. Paper defaults (its code): acceptance
    over 16 children, trees of at most 128 nodes and 10 levels; a fixed draft length bounds the
    tree's depth instead."""
    model, label, weights = default_draft_model(target, draft_model)
    verifier = RejectionSampling()
    levels = policy.depth + 1 if policy.name == FIXED else MAX_LEVELS
    drafter = SequoiaDrafter(target, model, verifier, label, levels)
    length = policy.controller(target, levels - 1, drafter.nodes, levels - 1, source="at most Sequoia's")
    return SpeculativeDecoder(target, drafter, sampling_verifier=verifier, draft_length=length, weights=weights)


def online_speculative_decoding(target, draft_model=None, policy=DraftLengthPolicy.paper()) -> SpeculativeDecoder:
    """Liu et al. 2024 (OSD): speculative sampling whose drafter is distilled online on the
    requests it serves (`OnlineDistillation`: the target's distributions where a draft token was
    rejected, a forward-KL step every 8 requests). Its code's defaults: 5 proposed tokens. The
    drafter learns in memory: a given draft model is copied first, a shallow slice of the target
    gets layers of its own, the shipped drafter's file is never written."""
    model, label, weights = default_draft_model(target, None if draft_model is None else copy.deepcopy(draft_model))
    shared = {id(parameter) for parameter in target.parameters()}
    trainable = [parameter for parameter in model.parameters() if id(parameter) not in shared]
    if not trainable:  # the shallow slice shares the target's layers: it learns on a copy of them
        layers = shallow_layers(target)
        model = shallow_slice(target, layers, copy.deepcopy(target.model.layers[:layers]))
        trainable = list(model.model.layers.parameters())
    return SpeculativeDecoder(target, OnlineDistillation(model, trainable, label),
                              draft_length=policy.controller(target, METHODS["liu2024online"].paper.proposed), weights=weights)


def pearl(target, draft_model=None, policy=DraftLengthPolicy.paper()) -> SpeculativeDecoder:
    """Liu et al. 2025 (PEARL): the draft model drafts γ tokens while the target verifies the previous
    round's, pre-verify and post-verify (`pipeline.Pearl`), speculative sampling on each token."""
    model, label, weights = default_draft_model(target, draft_model)
    return Pearl(target, ModelDrafter(model, label=label),
                 draft_length=policy.controller(target, METHODS["liu2025parallel"].paper.gamma), weights=weights)


def prompt_lookup(target, draft_model=None, policy=DraftLengthPolicy.paper()) -> SpeculativeDecoder:
    """Saxena 2023: the continuation of the latest earlier match of the current n-gram is the draft;
    no draft model at all: n-grams of `ngram` tokens down to 1, `tokens` drafted."""
    paper = METHODS["saxena2023prompt"].paper
    return SpeculativeDecoder(target, PromptLookup(paper.ngram),
                              draft_length=policy.controller(target, paper.tokens, max_depth=paper.tokens))


def shallow_layers(target) -> int:
    return max(1, target.config.num_hidden_layers // 5)


class DraftModel(NamedTuple):
    model: nn.Module
    label: str  # what it is, as results name it
    weights: dict[str, Path]  # the trained files loaded for it (the shipped drafter's), by name


def default_draft_model(target, draft_model) -> DraftModel:
    """`draft_model` when given, else the default for `target`."""
    if draft_model is not None:
        return DraftModel(draft_model, "draft model", {})
    # No checkpoint of the embedded model's family is small enough to be a drafter: the default is
    # the distilled drafter shipped for it (DistillSpec), else an early exit from the target's first layers.
    distilled = shipped_drafter(target)
    if distilled is not None:
        return distilled
    layers = shallow_layers(target)
    return DraftModel(shallow_slice(target, layers),
                      f"shallow slice of the target (first {layers} layers + its norm and head)", {})


def shipped_drafter(target) -> DraftModel | None:
    """The distilled drafter shipped for the embedded model when `target` is that model and the
    drafter is shipped; else None."""
    if not is_embedded(target) or not shipped_head_folder("distillspec").is_dir():
        return None
    checkpoint = load_head(target, "distillspec")
    return DraftModel(checkpoint.head.drafter(target),
                      f"DistillSpec drafter ({checkpoint.head.describe()}; {checkpoint.describe()})", checkpoint.files)
