"""EAGLE-1 (Li et al. 2024), also EAGLE-2's and FR-Spec's drafter: a one-layer head extrapolating the target's features.

`EagleHead`'s `state_dict()` is SafeAILab/EAGLE's layout (vLLM's and the speculators library's
renames are read too): `fc(concat(embed(token[t+1]), feature[t]))` through one Llama decoder
layer without input norm predicts feature[t+1]; the target's LM head turns a feature into logits.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from specatlas.impls.errors import CheckpointError
from specatlas.impls.families.base import Family, layer_config
from specatlas.impls.heads import MLP, Attention, HeadCache, LayerConfig, RMSNorm
from specatlas.impls.training import acceptance_summary, finish, loss_vocabulary, shared_prompt_prefix, split, train_loop


class EagleLayer(nn.Module):
    """EAGLE-1's decoder layer 0: a Llama layer whose input norm is dropped (fc already mixes the inputs)."""

    def __init__(self, config: LayerConfig):
        super().__init__()
        self.self_attn = Attention(config, config.hidden_size)
        self.mlp = MLP(config)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)

    def forward(self, x, positions, cache=None, mask=None):
        x = x + self.self_attn(x, positions, cache, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class EagleHead(nn.Module):
    """EAGLE-1/2 draft head. `forward(embeds, features, positions)`: embeds[t] is the target's
    embedding of token t+1, features[t] the target's (or the head's own) feature at t; returns
    the predicted features at t+1, which the target's LM head turns into logits."""

    def __init__(self, config: LayerConfig, fc_bias: bool = True):
        super().__init__()
        self.config = config
        self.fc = nn.Linear(2 * config.hidden_size, config.hidden_size, bias=fc_bias)
        self.layers = nn.ModuleList([EagleLayer(config)])

    def forward(self, embeds, features, positions, cache: HeadCache | None = None, mask=None):
        return self.layers[0](self.fc(torch.cat([embeds, features], -1)), positions, cache, mask)


def published_renames(weights: dict) -> tuple[str, dict]:
    """EAGLE-1 and EAGLE-3 weights renamed to our (the reference) keys, and the layout's prefix:
    vLLM's `model.` prefix, `draft_id_to_target_id` and `layers.0` for EAGLE-3's midlayer, the
    speculators library's `fusion_fc`."""
    layout, renamed = "", {}
    for key, value in weights.items():
        new = key
        if new.startswith("model."):
            new, layout = new[len("model."):], "vllm-"
        if new.startswith("fusion_fc."):
            new, layout = "fc." + new[len("fusion_fc."):], "speculators-"
        renamed[new] = value
    if "draft_id_to_target_id" in renamed:
        layout = "vllm-"
        renamed["d2t"] = renamed.pop("draft_id_to_target_id")
    if any(key.startswith("layers.0.hidden_norm.") for key in renamed):  # vLLM's name for EAGLE-3's midlayer
        layout = "vllm-"
        renamed = {("midlayer." + key[len("layers.0."):] if key.startswith("layers.0.") else key): value
                   for key, value in renamed.items()}
    return layout, renamed


def llama_config(head, target) -> dict:
    """The config.json of EAGLE's heads: a one-layer Llama's."""
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": 1,
            **head.config.to_dict(), "vocab_size": target.config.vocab_size,
            "max_position_embeddings": getattr(target.config, "max_position_embeddings", 2048)}


class EagleFamily(Family):
    """The EAGLE-1/2 head: at position t it reads (embedding of token t+1, target feature t) and
    regresses feature t+1 (smooth L1) plus 0.1 x cross-entropy of the target's LM head on its
    prediction against the target's greedy token (EAGLE's loss), with U(-0.1, 0.1) noise on the
    input features (EAGLE's data augmentation). Features are the final normed states, which is
    what the target's LM head reads. Random initialisation, as EAGLE's (a copy of the target's
    last layer is no warm start: it was tuned for the residual stream, whose scale is far larger
    than the normed features')."""

    name, conversations, lr, default_steps, steps_evaluated = "eagle", 4, 5e-4, 1500, 5
    title, paper, aliases = "EAGLE", "li2024eagle", ("eagle", "eagle-1", "eagle2", "eagle-2", "li2024eagle2")

    def detect(self, weights, config):
        layout, renamed = published_renames(weights)
        if "fc.weight" in renamed and any(key.startswith("layers.0.") for key in renamed):
            return layout + "eagle", renamed
        return None

    def build(self, weights, config, target):
        hidden, vocab = target.config.hidden_size, target.config.vocab_size
        layer = layer_config(config, "EAGLE")
        if layer.hidden_size != hidden:
            raise CheckpointError(f"EAGLE head has hidden size {layer.hidden_size}, the target {hidden}")
        if config.get("vocab_size", vocab) != vocab:
            raise CheckpointError(f"EAGLE head was trained for a vocabulary of {config['vocab_size']}, the target has {vocab}")
        return EagleHead(layer, fc_bias=config.get("bias", True)), (target.config.num_hidden_layers,)

    def config_for(self, head, target):
        return llama_config(head, target) | {"bias": head.fc.bias is not None}

    def describe(self, config):
        return ("an EAGLE-1/2 draft head (fc over [embedding, feature] + one decoder layer without input norm; "
                "the target's embeddings and LM head)")

    def fit(self, loaded, features, run, output, budget_minutes, command, progress) -> str:
        model = loaded.model
        final = model.config.num_hidden_layers
        head = EagleHead(LayerConfig.from_dict(model.config.to_dict()))
        embed, lm_weight = model.model.embed_tokens.weight.detach(), model.lm_head.weight.detach()
        train_ids, test_ids = split(len(features.tokens), seed=run.seed)
        start = shared_prompt_prefix(features)
        optimizer = torch.optim.AdamW(head.parameters(), lr=self.lr, weight_decay=0.0, betas=(0.9, 0.95))
        vocabulary = loss_vocabulary(features, train_ids, lm_weight)

        def batches(step, generator):
            picked = [train_ids[i] for i in torch.randperm(len(train_ids), generator=generator)[: self.conversations]]
            width = max(len(features.tokens[c]) for c in picked) - 1
            tokens = torch.zeros(len(picked), width, dtype=torch.long)
            feats = torch.zeros(len(picked), width + 1, embed.shape[1])
            labels = torch.full((len(picked), width), -100, dtype=torch.long)
            for row, c in enumerate(picked):
                length = len(features.tokens[c]) - 1
                tokens[row, :length] = features.tokens[c][1:]
                feats[row, : length + 1] = features.hidden[final][c].float()
                labels[row, start:length] = features.greedy[c][start + 1 :]
            noise = (torch.rand(feats[:, :-1].shape, generator=generator) - 0.5) * 0.2
            return tokens, feats[:, :-1] + noise, feats[:, 1:], labels

        def loss_fn(batch):
            tokens, inputs, wanted, labels = batch
            positions = torch.arange(tokens.shape[1])[None].expand_as(tokens)
            predicted = head(F.embedding(tokens, embed), inputs, positions)
            valid = labels != -100
            regression = F.smooth_l1_loss(predicted[valid], wanted[valid])
            return regression + 0.1 * vocabulary.cross_entropy(predicted[valid], labels[valid])

        state = train_loop(head, optimizer, batches, loss_fn, run, budget_minutes, progress)
        accuracy = self.evaluate(head, features, test_ids, embed, lm_weight, final)
        return finish(self, run, head, loaded, features, train_ids, test_ids, state, accuracy, output, command,
                      {"bias": True})

    @torch.no_grad()
    def evaluate(self, head, features, conversations, embed, lm_weight, final) -> dict:
        return chain_acceptance(features, conversations, embed, self.steps_evaluated,
                                lambda c: features.hidden[final][c].float(), head,
                                lambda predicted: F.linear(predicted, lm_weight).argmax(-1))


def ttt_mask(rows: int, step: int) -> torch.Tensor:
    """What draft step `step` (0: the rows fed the target's features) sees, as `Attention` takes it:
    row t attends causally to the step-0 rows up to t, then to its own row of each later step
    (its ancestors in a drafted chain, and itself). EAGLE-3's training-time test uses this mask,
    and drafting builds the same one per tree node."""
    return torch.cat([torch.ones(rows, rows, dtype=torch.bool).tril()] + [torch.eye(rows, dtype=torch.bool)] * step, 1)


@torch.no_grad()
def chain_acceptance(features, conversations, embed, depth, target_features, advance, draft) -> dict:
    """Chain drafting simulated at every held-out answer position at once, as the drafter runs:
    step 1 reads the target's features, later steps the head's own predictions and drafted
    tokens (`advance(embeds, features, positions, cache, mask)` -> next features, `draft(features)`
    -> target ids), attending as `ttt_mask` says."""
    accepted = []
    for c in conversations:
        tokens, greedy = features.tokens[c], features.greedy[c]
        rows = len(tokens) - 1
        positions, cache = torch.arange(rows)[None], HeadCache()
        predicted = advance(F.embedding(tokens[1:], embed)[None], target_features(c)[None, :-1], positions, cache, None)
        hits = torch.zeros(rows, depth, dtype=torch.bool)
        valid = torch.zeros(rows, depth, dtype=torch.bool)
        for step in range(depth):
            drafted = draft(predicted[0])  # row t: the draft for token t + step + 2
            ahead = torch.arange(rows) + step + 1
            valid[:, step] = ahead < rows + 1
            hits[:, step] = drafted == greedy[ahead.clamp(max=rows)]
            if step + 1 < depth:
                predicted = advance(F.embedding(drafted, embed)[None], predicted, positions + step + 1, cache,
                                    ttt_mask(rows, step + 1))
        full = (torch.arange(rows) >= features.prompt_lengths[c] - 1) & valid.all(1)
        accepted += hits[full].int().cumprod(1).sum(1).tolist()
    return acceptance_summary(accepted, depth)
