"""Methods as compositions of a drafter (taxonomy axis 1) and verifiers (axis 2) on the shared loop.

Every builder takes the target model, an optional draft model and a `DraftLengthPolicy` (the
paper's settings by default, a fixed depth on the paper's structure, or the cost-aware policy
with structures sized for the device) and returns a `SpeculativeDecoder`. Greedy decoding
verifies by exact match; sampling by rejection sampling, which is lossless for every drafter.
"""

from __future__ import annotations

import copy

from specatlas.impls.families.checkpoints import load_head, shipped_head_folder
from specatlas.impls.engine.decoding import SpeculativeDecoder
from specatlas.impls.engine.draft_length import FIXED, DraftLengthPolicy, FixedLength
from specatlas.impls.engine.drafting import ModelDrafter, PromptLookup
from specatlas.impls.engine.models import is_embedded, shallow_slice
from specatlas.impls.drafters.draft_structure.tree_search import MAX_LEVELS, SequoiaDrafter
from specatlas.impls.drafters.draft_structure.pipeline import Pearl
from specatlas.impls.engine.verification import (BlockVerification, KSequential, RejectionSampling, SpecHub,
                                                 TraversalVerification, Verifier)
from specatlas.impls.families.online import PROPOSED as OSD_PROPOSED, OnlineDistillation


def autoregressive(target, draft_model=None, policy=DraftLengthPolicy.paper()) -> SpeculativeDecoder:
    """One target forward per token: the reference every method must match and beat."""
    return SpeculativeDecoder(target)


# Leviathan et al. 2023, Table 2: γ = 7 for the headline result (T5-XXL drafted by T5-small on
# WMT EnDe, 3.4x). Chen et al. 2023 (Chinchilla 70B with a 4B drafter): K = 4.
LEVIATHAN_GAMMA, CHEN_K = 7, 4


def speculative_sampling(target, draft_model=None, policy=DraftLengthPolicy.paper()) -> SpeculativeDecoder:
    """Leviathan et al. 2023 (Algorithm 1): the draft model proposes γ tokens autoregressively,
    the target scores all γ+1 positions in one forward, each draft token is kept with
    probability min(1, p/q), the first rejection is resampled from norm(max(p - q, 0)), and a
    fully accepted chain earns a bonus token from p. Paper default: γ = 7 (Table 2)."""
    return _draft_model_method(target, draft_model, policy, LEVIATHAN_GAMMA)


def chen_speculative_sampling(target, draft_model=None, policy=DraftLengthPolicy.paper()) -> SpeculativeDecoder:
    """Chen et al. 2023: the same algorithm (modified rejection sampling over K drafted tokens);
    paper default K = 4."""
    return _draft_model_method(target, draft_model, policy, CHEN_K)


# Sun et al. 2025 (block verification), Table 1: γ = 8 (PaLM-2-S drafted by PaLM-2-XXS).
BLOCK_GAMMA = 8


def block_verification(target, draft_model=None, policy=DraftLengthPolicy.paper()) -> SpeculativeDecoder:
    """Sun et al. 2025: speculative decoding's draft model and loop, its γ drafted tokens verified
    jointly as a block (`BlockVerification`) instead of token by token. Paper default: γ = 8."""
    return _draft_model_method(target, draft_model, policy, BLOCK_GAMMA, BlockVerification())


def _draft_model_method(target, draft_model, policy, paper_depth, verifier: Verifier | None = None):
    model, label = default_draft_model(target, draft_model)
    return SpeculativeDecoder(target, ModelDrafter(model, label=label), sampling_verifier=verifier or RejectionSampling(),
                              draft_length=policy.controller(target, paper_depth))


# SpecInfer's expansion-based token tree: children per node at each depth, the configuration
# ⟨1, 1, 3, 1, 1, 1, 1, 1⟩ of its evaluation (a chain that branches into 3 at depth 3).
SPECINFER_WIDTHS = (1, 1, 3, 1, 1, 1, 1, 1)
# On the cost-aware policy: 2 x 2 candidates for the two most uncertain positions, then chains.
SPECINFER_WIDTHS_AUTO = (2, 2)


def specinfer(target, draft_model=None, policy=DraftLengthPolicy.paper()) -> SpeculativeDecoder:
    """Miao et al. 2024: the draft model expands a token tree (top-w children when greedy, w
    samples without replacement when sampling); the target verifies the whole tree in one forward
    with a tree attention mask, and multi-step speculative sampling (recursive rejection over
    siblings) picks the accepted root-to-leaf path. Paper default: expansion ⟨1,1,3,1,1,1,1,1⟩."""
    model, label = default_draft_model(target, draft_model)
    widths = SPECINFER_WIDTHS_AUTO if policy.is_cost_aware else SPECINFER_WIDTHS
    return SpeculativeDecoder(target, ModelDrafter(model, widths, label),
                              draft_length=policy.controller(target, len(SPECINFER_WIDTHS), expansion_nodes(widths)))


# MCSD's code (NJUNLP/MCSD: its README's evaluation command, `SpeculativeGenerator`'s defaults):
# k-config 4,2,2 (4 candidates after the text, 2 after each of them, 2 after each of those),
# drawn without replacement (`--replacement` draws them independently).
MCSD_K_CONFIG = (4, 2, 2)


def multi_candidate(target, draft_model=None, policy=DraftLengthPolicy.paper(), replacement=False) -> SpeculativeDecoder:
    """Yang et al. 2024 (MCSD): the draft model samples k_d candidates after every node at depth d
    (with or without replacement), the target scores the whole tree in one forward with tree
    attention, and multi-candidate speculative sampling tries each node's candidates in turn (kept
    with probability min(1, p/q), else p <- norm(max(p - q, 0)): `RejectionSampling`). Defaults
    of its code: k-config (4, 2, 2), candidates drawn without replacement."""
    model, label = default_draft_model(target, draft_model)
    drafter = ModelDrafter(model, MCSD_K_CONFIG, label, replacement)
    depth = len(MCSD_K_CONFIG)
    return SpeculativeDecoder(target, drafter,
                              draft_length=policy.controller(target, depth, expansion_nodes(MCSD_K_CONFIG), max_depth=depth))


# Traversal verification: ours, not the paper's (its trees for this model are not restated here):
# a binary tree of depth 4, 2 children per node drawn without replacement (30 nodes); on the
# cost-aware policy 2 x 2 candidates at the first two depths, then chains.
TRAVERSAL_WIDTHS = (2, 2, 2, 2)
TRAVERSAL_WIDTHS_AUTO = (2, 2)


def traversal_verification(target, draft_model=None, policy=DraftLengthPolicy.paper()) -> SpeculativeDecoder:
    """Weng et al. 2025: the draft model expands a token tree (siblings drawn without replacement),
    the target scores it in one forward, and traversal verification (`TraversalVerification`)
    judges it leaf to root by whole sequences instead of token by token from the root."""
    model, label = default_draft_model(target, draft_model)
    widths = TRAVERSAL_WIDTHS_AUTO if policy.is_cost_aware else TRAVERSAL_WIDTHS
    return SpeculativeDecoder(target, ModelDrafter(model, widths, label), sampling_verifier=TraversalVerification(),
                              draft_length=policy.controller(target, len(TRAVERSAL_WIDTHS), expansion_nodes(widths)))


# SpecTr: k i.i.d. drafts of L tokens each. Ours, not the paper's: its settings for this model are
# not restated here.
SPECTR_DRAFTS, SPECTR_LENGTH = 4, 4


def spectr(target, draft_model=None, policy=DraftLengthPolicy.paper()) -> SpeculativeDecoder:
    """Sun et al. 2023 (SpecTr): the draft model samples k independent drafts of L tokens (a tree
    whose root has k i.i.d. children, each continued by a chain), the target scores them in one
    forward, and K-SEQ draft selection (`KSequential`) keeps a token among the agreeing drafts'
    next tokens at each position."""
    model, label = default_draft_model(target, draft_model)
    drafter = ModelDrafter(model, (SPECTR_DRAFTS,), label, replacement=True)
    return SpeculativeDecoder(target, drafter, sampling_verifier=KSequential(),
                              draft_length=policy.controller(target, SPECTR_LENGTH, expansion_nodes((SPECTR_DRAFTS,))))


# SpecHub's code (its README's command): a binary tree of depth 4 (growmap k-ary_trees/2^5: 31
# nodes with the root, 30 drafts), every node's two children a hub pair.
SPECHUB_WIDTHS = (2, 2, 2, 2)
SPECHUB_WIDTHS_AUTO = (2, 2)


def spechub(target, draft_model=None, policy=DraftLengthPolicy.paper()) -> SpeculativeDecoder:
    """Sun et al. 2024 (SpecHub): the draft model expands a binary token tree whose sibling pairs
    hold the hub, the draft's most likely token (`drafting.hub_pair`); the target scores it in one
    forward and SpecHub's closed-form transport (`SpecHub`) decides each pair from the root down."""
    model, label = default_draft_model(target, draft_model)
    widths = SPECHUB_WIDTHS_AUTO if policy.is_cost_aware else SPECHUB_WIDTHS
    return SpeculativeDecoder(target, ModelDrafter(model, widths, label, hub=True), sampling_verifier=SpecHub(),
                              draft_length=policy.controller(target, len(SPECHUB_WIDTHS), expansion_nodes(widths)))


def sequoia(target, draft_model=None, policy=DraftLengthPolicy.paper()) -> SpeculativeDecoder:
    """Chen et al. 2024 (Sequoia): the draft model fills the token tree that maximises expected
    tokens per second on this hardware (`tree_search`: dynamic programming over the measured
    positional acceptance vector, the size and depth from the measured cost curves); siblings
    are the drafter's top tokens (greedy) or drawn without replacement, verified by recursive
    rejection with q conditioned on the earlier siblings. Paper defaults (its code): acceptance
    over 16 children, trees of at most 128 nodes and 10 levels; a fixed draft length bounds the
    tree's depth instead."""
    model, label = default_draft_model(target, draft_model)
    verifier = RejectionSampling()
    levels = policy.depth + 1 if policy.name == FIXED else MAX_LEVELS
    drafter = SequoiaDrafter(target, model, verifier, label, levels)
    if policy.is_cost_aware:
        length = policy.controller(target, levels - 1, drafter.nodes, levels - 1)
    else:
        length = FixedLength(levels - 1, None if policy.name == FIXED else "at most Sequoia's")
    return SpeculativeDecoder(target, drafter, sampling_verifier=verifier, draft_length=length)


def online_speculative_decoding(target, draft_model=None, policy=DraftLengthPolicy.paper()) -> SpeculativeDecoder:
    """Liu et al. 2024 (OSD): speculative sampling whose drafter is distilled online on the
    requests it serves (`OnlineDistillation`: the target's distributions where a draft token was
    rejected, a forward-KL step every 8 requests). Its code's defaults: 5 proposed tokens. The
    drafter learns in memory: a given draft model is copied first, a shallow slice of the target
    gets layers of its own, the shipped drafter's file is never written."""
    model, label = default_draft_model(target, None if draft_model is None else copy.deepcopy(draft_model))
    shared = {id(parameter) for parameter in target.parameters()}
    trainable = [parameter for parameter in model.parameters() if id(parameter) not in shared]
    if not trainable:  # the shallow slice shares the target's layers: it learns on a copy of them
        layers = shallow_layers(target)
        model = shallow_slice(target, layers, copy.deepcopy(target.model.layers[:layers]))
        trainable = list(model.model.layers.parameters())
    return SpeculativeDecoder(target, OnlineDistillation(model, trainable, label),
                              draft_length=policy.controller(target, OSD_PROPOSED))


# PEARL's README example and run_para_sd.sh for 7B drafting 70B: --gamma 5.
PEARL_GAMMA = 5


def pearl(target, draft_model=None, policy=DraftLengthPolicy.paper()) -> SpeculativeDecoder:
    """Liu et al. 2025 (PEARL): the draft model drafts γ tokens while the target verifies the previous
    round's, pre-verify and post-verify (`pipeline.Pearl`), speculative sampling on each token."""
    model, label = default_draft_model(target, draft_model)
    return Pearl(target, ModelDrafter(model, label=label), draft_length=policy.controller(target, PEARL_GAMMA))


# Prompt lookup decoding's reference code: max_ngram_size = 3, num_pred_tokens = 10.
PLD_NGRAM, PLD_TOKENS = 3, 10


def prompt_lookup(target, draft_model=None, policy=DraftLengthPolicy.paper()) -> SpeculativeDecoder:
    """Saxena 2023: the continuation of the latest earlier match of the current n-gram is the draft;
    no draft model at all. Defaults of its reference code: n-grams of 3 down to 1, 10 tokens."""
    return SpeculativeDecoder(target, PromptLookup(PLD_NGRAM),
                              draft_length=policy.controller(target, PLD_TOKENS, max_depth=PLD_TOKENS))


def expansion_nodes(widths: tuple[int, ...]):
    """Draft nodes of an expansion tree (SpecInfer's: widths[d] children per node at depth d) of
    depth k, as a function of k."""

    def nodes(depth: int) -> int:
        total, level = 0, 1
        for d in range(depth):
            level *= widths[d] if d < len(widths) else 1
            total += level
        return total

    return nodes


def shallow_layers(target) -> int:
    return max(1, target.config.num_hidden_layers // 5)


def default_draft_model(target, draft_model):
    """(drafter, what it is): `draft_model` when given, else the default for `target`."""
    if draft_model is not None:
        return draft_model, "draft model"
    # No checkpoint of the embedded model's family is small enough to be a drafter: the default is
    # the distilled drafter shipped for it (DistillSpec), else an early exit from the target's first layers.
    distilled = shipped_drafter(target)
    if distilled is not None:
        return distilled
    layers = shallow_layers(target)
    return shallow_slice(target, layers), f"shallow slice of the target (first {layers} layers + its norm and head)"


def shipped_drafter(target):
    """(the distilled drafter shipped for the embedded model, what it is) when `target` is that
    model and the drafter is shipped; else None."""
    if not is_embedded(target) or not shipped_head_folder("distillspec").is_dir():
        return None
    checkpoint = load_head(target, "distillspec")
    return checkpoint.head.drafter(target), f"DistillSpec drafter ({checkpoint.head.describe()}; {checkpoint.describe()})"
