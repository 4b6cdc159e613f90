"""Methods as compositions of a drafter (taxonomy axis 1) and verifiers (axis 2) on the shared loop.

Every builder takes the target model, an optional draft model and a draft length ("auto" for
the cost-aware policy, or a fixed int) and returns a `SpeculativeDecoder`. Greedy decoding
verifies by exact match; sampling by rejection sampling, which is lossless for every drafter.
"""

from __future__ import annotations

from specatlas.impls.decoding import SpeculativeDecoder
from specatlas.impls.draft_length import CostAware, FixedLength, calibrate, relative
from specatlas.impls.drafting import ModelDrafter, PromptLookup
from specatlas.impls.models import shallow_slice

MAX_DEPTH = 8


def autoregressive(target, draft_model=None, draft_length="auto") -> SpeculativeDecoder:
    """One target forward per token: the reference every method must match and beat."""
    return SpeculativeDecoder(target)


def speculative_sampling(target, draft_model=None, draft_length="auto") -> SpeculativeDecoder:
    """Leviathan et al. 2023 (Algorithm 1) / Chen et al. 2023: the draft model proposes k tokens
    autoregressively, the target scores all k+1 positions in one forward, each draft token is kept
    with probability min(1, p/q), the first rejection is resampled from norm(max(p - q, 0)), and a
    fully accepted chain earns a bonus token from p."""
    model, label = _draft_model(target, draft_model)
    drafter = ModelDrafter(model, label=label)
    return SpeculativeDecoder(target, drafter, draft_length=draft_policy(target, draft_length))


# Children per node at each depth of SpecInfer's token tree (deeper levels are chains):
# 2 x 2 candidates for the two most uncertain positions, then one continuation per branch.
SPECINFER_WIDTHS = (2, 2)


def specinfer(target, draft_model=None, draft_length="auto") -> SpeculativeDecoder:
    """Miao et al. 2024: the draft model expands a token tree (top-w children when greedy, w
    samples without replacement when sampling); the target verifies the whole tree in one forward
    with a tree attention mask, and multi-step speculative sampling (recursive rejection over
    siblings) picks the accepted root-to-leaf path."""
    model, label = _draft_model(target, draft_model)
    drafter = ModelDrafter(model, SPECINFER_WIDTHS, label)
    return SpeculativeDecoder(target, drafter, draft_length=draft_policy(target, draft_length, tree_nodes(SPECINFER_WIDTHS)))


def prompt_lookup(target, draft_model=None, draft_length="auto") -> SpeculativeDecoder:
    """Saxena 2023: the continuation of the latest earlier match of the current n-gram is the draft;
    no draft model at all."""
    return SpeculativeDecoder(target, PromptLookup(), draft_length=draft_policy(target, draft_length))


def tree_nodes(widths: tuple[int, ...]):
    """Number of draft nodes in a tree of depth k with widths[d] children per node at depth d."""

    def nodes(depth: int) -> int:
        total, level = 0, 1
        for d in range(depth):
            level *= widths[d] if d < len(widths) else 1
            total += level
        return total

    return nodes


def shallow_layers(target) -> int:
    return max(1, target.config.num_hidden_layers // 5)


def _draft_model(target, draft_model):
    if draft_model is not None:
        return draft_model, "draft model"
    # No checkpoint of the embedded model's family is small enough to be a drafter: until a trained
    # drafter exists, the default is an early exit from the target's first layers.
    layers = shallow_layers(target)
    return shallow_slice(target, layers), f"shallow slice of the target (first {layers} layers + its norm and head)"


def draft_policy(target, draft_length, nodes=lambda k: k, max_depth: int = MAX_DEPTH):
    """A fixed draft length, or ("auto") the cost-aware one calibrated on this target.
    `max_depth` caps drafts whose structure is bounded (a Lookahead n-gram, a tree template)."""
    if draft_length != "auto":
        return FixedLength(int(draft_length))
    return CostAware(max_depth, relative(calibrate(target, range(1, nodes(max_depth) + 2))), nodes)
