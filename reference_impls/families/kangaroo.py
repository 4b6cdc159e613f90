"""Kangaroo (Liu et al. 2024): an adapter on the target's shallow exit, read by the target's LM head.

`KangarooAdapter`: `norm(x + attention(input_layernorm(x)))` on the input of layer l, one attention
layer and two norms; keys as its released `AdapterModel` (`layers.0.input_layernorm`,
`layers.0.self_attn.*`, `norm`). Its drafter, `Kangaroo`, runs the target's shallow layers through
`engine.layer_view` and hands their states to the verification (`Draft.exit_states`).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from specatlas.impls.engine.drafting import Draft, Drafter
from specatlas.impls.engine.errors import CheckpointError
from specatlas.impls.engine.layer_view import LayerView
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


class Kangaroo(Drafter):
    """Kangaroo (Liu et al. 2024): self-speculative decoding by double early exit. Per step:

    1. the target's first l layers (in a scratch of the target's own cache) turn the last token
       into its exit state, the input of layer l;
    2. the adapter (its own small cache over the committed tokens' exit states) and the target's
       LM head (over the adapter's draft vocabulary when it has one) give the next draft token;
    3. repeat from the drafted token, for at most `depth` tokens, stopping after a token whose
       top-1 probability is below `threshold` (the second early exit: a doubtful draft is the last
       one, as in its reference code);
    4. the draft carries the exit states of the pending and drafted tokens with their rows of
       layers < l (`Draft.exit_states`), and the verification continues them from layer l
       (`forward_from_exit`); only the last draft's shallow rows are new. The cache then holds
       exactly the full model's rows.

    Every draft is the drafter's own choice (greedy) or draw (recorded in `Draft.q`), so exact
    matching and rejection sampling stay lossless.
    """

    def __init__(self, model, adapter, exit_layer: int, threshold: float, label: str = ""):
        self.shallow = LayerView(model, range(exit_layer))
        self.adapter, self.exit_layer, self.threshold, self.label = adapter, exit_layer, threshold, label
        vocab = getattr(adapter, "draft_vocab", None)
        self.head = model.lm_head if vocab is None else VocabularyHead(model.lm_head.weight, vocab)
        self.hidden_layers = (exit_layer,)

    def start(self, prompt, prefill):
        self.target, self.adapter_cache, self.fed = prefill.target, HeadCache(), 0
        self.pending = prefill.hidden_states[self.exit_layer]  # committed exit states the adapter has not read

    def observe(self, step):
        rows = [0] + [node + 1 for node in step.accepted]  # the pending token and the accepted drafts
        self.pending = torch.cat([self.pending, step.hidden_states[self.exit_layer][rows]])

    def _logits(self, states: torch.Tensor, first: int) -> torch.Tensor:
        positions = torch.arange(first, first + len(states), device=states.device)[None]
        return self.head(self.adapter(states[None], positions, self.adapter_cache)[0])

    def propose(self, context, depth, sampling, rng):
        if len(self.pending):
            self._logits(self.pending, self.fed)  # fills the adapter's cache; the logits are not needed
            self.fed, self.pending = self.fed + len(self.pending), self.pending[:0]
        token, tokens, states, q = context[-1], [], [], []
        with self.target.scratch() as scratch:
            for level in range(depth):
                position = len(context) - 1 + level
                out = scratch.forward(self.shallow, [token], hidden_layers=(self.exit_layer,), head=False)
                states.append(out.hidden_states[self.exit_layer])
                logits = self._logits(states[-1], position)[-1]
                if sampling.greedy:
                    token = int(logits.argmax())
                else:
                    q.append(sampling.probs(logits))
                    token = rng.categorical(q[-1], position + 1, "draft")
                tokens.append(token)
                if float(logits.float().softmax(-1).max()) < self.threshold:
                    break
            exit_states = scratch.exit_states(self.exit_layer, torch.cat(states))
        self.adapter_cache.keep(list(range(self.fed)))  # draft rows: the verified exit states replace them
        return Draft.chain(tokens, q=torch.stack(q) if q else None, exit_states=exit_states)

    def describe(self):
        return (f"Kangaroo: the target's layers 0..{self.exit_layer - 1} on its own cache + adapter, "
                f"drafting stops below top-1 confidence {self.threshold} ({self.label})")
