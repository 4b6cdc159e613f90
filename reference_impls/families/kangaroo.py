"""Kangaroo (Liu et al. 2024): an adapter on the target's shallow exit, read by the target's LM head.

`KangarooAdapter`: `norm(x + attention(input_layernorm(x)))` on the input of layer l, one attention
layer and two norms; keys as its released `AdapterModel` (`layers.0.input_layernorm`,
`layers.0.self_attn.*`, `norm`). Its drafter is `layer_view.Kangaroo`.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from specatlas.impls.engine.errors import CheckpointError
from specatlas.impls.families.base import Family, layer_config
from specatlas.impls.families.blocks import Attention, HeadCache, LayerConfig, RMSNorm, VocabularyHead
from specatlas.impls.families.training import (acceptance_summary, finish, loss_vocabulary, padded, run_lengths,
                                      shared_prompt_prefix, split, train_loop)


class KangarooAttentionBlock(nn.Module):
    """The adapter's one "decoder layer": input norm and attention with a residual, no MLP."""

    def __init__(self, config: LayerConfig):
        super().__init__()
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.self_attn = Attention(config, config.hidden_size)

    def forward(self, x, positions, cache=None, mask=None):
        return x + self.self_attn(self.input_layernorm(x), positions, cache, mask)


class KangarooAdapter(nn.Module):
    """Kangaroo's adapter: maps the shallow exit's states [B, T, H] to states the target's LM head
    reads. `final_norm` (the target's) initialises `norm` and the attention output starts at
    zero, so an untrained adapter is exactly the plain early exit (norm + LM head after layer l):
    training starts from that drafter rather than from noise. `draft_vocab` (ours, not in its
    released layout): the target token ids the adapter was trained to rank, which it drafts from
    (trained over the most frequent tokens only, its logits for the others mean nothing)."""

    def __init__(self, config: LayerConfig, final_norm: torch.Tensor | None = None, draft_vocab_size: int = 0):
        super().__init__()
        self.config = config
        self.layers = nn.ModuleList([KangarooAttentionBlock(config)])
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        if draft_vocab_size:
            self.register_buffer("draft_vocab", torch.zeros(draft_vocab_size, dtype=torch.long))
        if final_norm is not None:
            with torch.no_grad():
                self.norm.weight.copy_(final_norm)
                self.layers[0].self_attn.o_proj.weight.zero_()

    def forward(self, x, positions, cache: HeadCache | None = None, mask=None):
        return self.norm(self.layers[0](x, positions, cache, mask))


# Kangaroo's released checkpoints do not record the exit layer (its scripts pass --exitlayer 2).
KANGAROO_EXIT_LAYER = 2


class KangarooFamily(Family):
    """Kangaroo's adapter (one attention layer, two norms) on the target's exit after its first l = 2 layers
    (the paper's for Vicuna-7B; the exit states are stored with the data, as the input of EAGLE-3's
    first fused layer). Loss as its train.py: the cross-entropy of the adapter's distribution
    (through the target's LM head) against the target's distribution at the same position,
    -sum_x p(x) log q(x), here both over the draft vocabulary (the `LOSS_VOCAB` most frequent
    tokens), which the adapter then drafts from: trained on those rows only, its logits for the
    others are meaningless (decoding over all 49k tokens drafted rare tokens and lost to the
    untrained exit). AdamW, betas (0.9, 0.95) and gradient clipping as its code; the learning rate
    is higher than its 3e-5 for a budget of minutes."""

    name, exit_layer, conversations, lr, default_steps, steps_evaluated = "kangaroo", KANGAROO_EXIT_LAYER, 2, 2e-3, 3000, 6
    title, paper, aliases = "Kangaroo", "liu2024kangaroo", ("kangaroo",)

    def detect(self, weights, config):
        if "norm.weight" in weights and "layers.0.input_layernorm.weight" in weights and \
                not any(".mlp." in key for key in weights):
            return "kangaroo", weights
        return None

    def build(self, weights, config, target):
        hidden, layers = target.config.hidden_size, target.config.num_hidden_layers
        layer = layer_config({**target.config.to_dict(), **config}, "Kangaroo adapter")
        if layer.hidden_size != hidden:
            raise CheckpointError(f"Kangaroo adapter has hidden size {layer.hidden_size}, the target {hidden}")
        exit_layer = config.get("exit_layer", KANGAROO_EXIT_LAYER)
        if not 1 <= exit_layer < layers:
            raise CheckpointError(f"Kangaroo adapter exits after layer {exit_layer}; the target has {layers} layers")
        return KangarooAdapter(layer, draft_vocab_size=len(weights.get("draft_vocab", ()))), (exit_layer,)

    def config_for(self, head, target):  # our layout: `specatlas_family` says what the module is
        return {"specatlas_family": self.name, "hidden_size": target.config.hidden_size,
                "vocab_size": target.config.vocab_size} | head.config.to_dict()

    def describe(self, config):
        return (f"a Kangaroo adapter (one attention layer and two norms) on the exit after the target's first "
                f"{config.get('exit_layer')} layers, read by the target's LM head")

    def layers(self, model):
        return (self.exit_layer, model.config.num_hidden_layers)

    def fit(self, loaded, features, run, output, budget_minutes, command, progress) -> str:
        model = loaded.model
        final, lm_weight = model.config.num_hidden_layers, model.lm_head.weight.detach()
        train_ids, test_ids = split(features, run.seed)
        start = shared_prompt_prefix(features)
        vocabulary = loss_vocabulary(features, train_ids, lm_weight).frequent
        adapter = KangarooAdapter(LayerConfig.from_dict(model.config.to_dict()), model.model.norm.weight.detach(),
                                  len(vocabulary))
        adapter.draft_vocab.copy_(vocabulary)
        head = lm_weight[vocabulary]
        untrained = self.evaluate(adapter, features, test_ids, lm_weight)
        optimizer = torch.optim.AdamW(adapter.parameters(), lr=self.lr, weight_decay=0.0, betas=(0.9, 0.95))

        def batches(step, generator):
            picked = [train_ids[i] for i in torch.randperm(len(train_ids), generator=generator)[: self.conversations]]
            mask = padded([torch.arange(len(features.tokens[c])) >= start for c in picked], False)
            with torch.no_grad():
                p = F.linear(padded([features.hidden[final][c].float() for c in picked])[mask], head).softmax(-1)
            return padded([features.hidden[self.exit_layer][c].float() for c in picked]), mask, p

        def loss_fn(batch):
            exits, mask, p = batch
            positions = torch.arange(exits.shape[1])[None].expand(exits.shape[0], -1)
            return -(p * F.linear(adapter(exits, positions)[mask], head).log_softmax(-1)).sum(-1).mean()

        state = train_loop(adapter, optimizer, batches, loss_fn, run, budget_minutes, progress)
        accuracy = self.evaluate(adapter, features, test_ids, lm_weight) | {"untrained": untrained}
        return finish(self, run, adapter, loaded, features, train_ids, test_ids, state, accuracy, output, command,
                      {"exit_layer": self.exit_layer},
                      {"targets": f"targets are the target's full distributions; inputs its exit states after layer "
                                  f"{self.exit_layer}"})

    @torch.no_grad()
    def evaluate(self, adapter, features, conversations, lm_weight) -> dict:
        """Top-1 chain acceptance on held-out answers (see `run_lengths`), without the
        confidence exit: the drafter's own acceptance at each depth up to the paper's 6."""
        head, accepted = VocabularyHead(lm_weight, adapter.draft_vocab), []
        for c in conversations:
            exits = features.hidden[self.exit_layer][c].float()
            drafted = head(adapter(exits[None], torch.arange(len(exits))[None])[0]).argmax(-1)
            accepted += run_lengths(drafted == features.greedy[c], features.prompt_lengths[c] - 1, self.steps_evaluated)
        return acceptance_summary(accepted, self.steps_evaluated)
