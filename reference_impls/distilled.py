"""DistillSpec's drafter for a target with no smaller sibling: the target's first layers, distilled.

The drafter is the target's first k decoder layers, copied and fine-tuned on the target's
distribution (`training.DistillFamily`), over the target's own embeddings and final norm and its
LM head restricted to a draft vocabulary (the tokens the target uses most). Only the layers and
the vocabulary's ids ship; the rest is the target's, by reference.

The restricted head is for speed: the 49k-row head is most of a two-layer drafter's step, 8k
rows cost a sixth of it. Verification is unchanged and stays lossless: the verifier sees the
drafter's actual distribution, which is zero outside the draft vocabulary (a greedy draft is
matched exactly; a sampled one goes through rejection sampling with that q).
"""

from __future__ import annotations

import torch
from torch import nn

from specatlas.impls.heads import VocabularyHead
from specatlas.impls.models import shallow_slice


class DraftLayers(nn.Module):
    """What ships: the drafter's decoder layers (the target's layer class and config) and its
    draft vocabulary (target token ids, most frequent first)."""

    def __init__(self, target, num_layers: int, draft_vocab_size: int):
        super().__init__()
        layer = type(target.model.layers[0])
        self.layers = nn.ModuleList(layer(target.config, i) for i in range(num_layers))
        self.register_buffer("draft_vocab", torch.zeros(draft_vocab_size, dtype=torch.long))

    @classmethod
    def from_target(cls, target, num_layers: int, draft_vocab: torch.Tensor) -> DraftLayers:
        """Training's starting point: copies of the target's first layers (the shallow slice)."""
        module = cls(target, num_layers, len(draft_vocab))
        module.layers.load_state_dict(target.model.layers[:num_layers].state_dict())
        module.draft_vocab.copy_(draft_vocab)
        return module.to(target.device, target.dtype)

    def drafter(self, target) -> nn.Module:
        """A causal LM: these layers between the target's embeddings and its norm and restricted head."""
        return shallow_slice(target, len(self.layers), self.layers, VocabularyHead(target.lm_head.weight, self.draft_vocab))

    def describe(self) -> str:
        return f"{len(self.layers)} distilled layers of the target, its head over {len(self.draft_vocab):,} tokens"

