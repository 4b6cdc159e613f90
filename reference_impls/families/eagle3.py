"""EAGLE-3 (Li et al. 2025): a head on the target's fused low/mid/high states, trained with training-time test.

`Eagle3Head`'s `state_dict()` is SafeAILab/EAGLE's EAGLE-3 layout (vLLM's renames are read too):
the target's states at `eagle3_layers` fused by `fc` (3H -> H); the midlayer attends over
concat(input_layernorm(embedding), hidden_norm(feature)) (2H wide) and its output is both the next
step's feature and, through its own norm and LM head, logits over a draft vocabulary mapped to
target ids by `d2t` (target = draft + d2t[draft]).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from specatlas.impls.engine.errors import CheckpointError
from specatlas.impls.families.base import draft_vocabulary, layer_config
from specatlas.impls.families.eagle import (EAGLE2_DEPTH, EAGLE2_TOP_K, EAGLE2_TOTAL, EagleDrafter, EagleFamily,
                                            chain_acceptance, llama_config, published_renames)
from specatlas.impls.families.blocks import MLP, Attention, HeadCache, LayerConfig, RMSNorm, StepCache, eagle3_layers
from specatlas.impls.families.training import draft_tokens, finish, shared_prompt_prefix, split, train_loop


class Eagle3MidLayer(nn.Module):
    """EAGLE-3's layer: attention over concat(input_layernorm(embedding), hidden_norm(feature)), residual from the feature."""

    def __init__(self, config: LayerConfig):
        super().__init__()
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.hidden_norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.self_attn = Attention(config, 2 * config.hidden_size)
        self.mlp = MLP(config)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)

    def forward(self, embeds, hidden, positions, cache=None, mask=None):
        both = torch.cat([self.input_layernorm(embeds), self.hidden_norm(hidden)], -1)
        hidden = hidden + self.self_attn(both, positions, cache, mask)
        return hidden + self.mlp(self.post_attention_layernorm(hidden))


class Eagle3Head(nn.Module):
    """EAGLE-3 draft head. `features` are either the target's fused states [.., 3 * H_target]
    (first step) or the head's own previous outputs [.., H]; `fc` applies only to the former.
    Returns (next features [.., H], draft-vocabulary logits)."""

    def __init__(self, config: LayerConfig, target_hidden: int, vocab_size: int, draft_vocab_size: int):
        super().__init__()
        self.config = config
        self.fc = nn.Linear(3 * target_hidden, config.hidden_size, bias=False)
        self.midlayer = Eagle3MidLayer(config)
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.lm_head = nn.Linear(config.hidden_size, draft_vocab_size, bias=False)
        # Identity maps until trained: draft id i is target id i.
        self.register_buffer("d2t", torch.zeros(draft_vocab_size, dtype=torch.long))
        t2d = torch.zeros(vocab_size, dtype=torch.bool)
        t2d[:draft_vocab_size] = True
        self.register_buffer("t2d", t2d)

    def forward(self, embeds, features, positions, cache: HeadCache | None = None, mask=None):
        hidden = self.hidden(embeds, features, positions, cache, mask)
        return hidden, self.logits(hidden)

    def hidden(self, embeds, features, positions, cache: HeadCache | None = None, mask=None):
        """The next features only (a drafter projects just the rows it ranks)."""
        if features.shape[-1] != self.config.hidden_size:
            features = self.fc(features)
        return self.midlayer(embeds, features, positions, cache, mask)

    def logits(self, hidden):
        return self.lm_head(self.norm(hidden))

    def to_target(self, draft_ids: torch.Tensor) -> torch.Tensor:
        return draft_ids + self.d2t[draft_ids]


# EAGLE-3 keeps the 32k most frequent of Llama-3's 128k tokens. SmolLM2's 49k vocabulary would allow a
# quarter, 12,288, but its training answers use fewer distinct tokens than that (~5k in 263 answers):
# the draft vocabulary is every token the target chose in the training answers, at most 8,192 (the
# tokens every other family's loss scores), so none it could learn to draft is left out.
DRAFT_VOCAB = 8192


class Eagle3Family(EagleFamily):
    """The EAGLE-3 head: `fc` fuses the target's low/mid/high states (`eagle3_layers`); the midlayer
    reads (embedding of token t+1, fused state t) and its own norm and LM head rank a draft
    vocabulary of the target's most frequent tokens (d2t/t2d, sorted by id as EAGLE-3's code
    does). Training-time test (SafeAILab/EAGLE traineagle3): the head is unrolled for 7 steps,
    step k reading its own step k-1 outputs and the answer's tokens shifted by k, at positions
    shifted by k, attending as `ttt_mask` says; the loss is sum 0.8^k x cross-entropy against the
    target's greedy token k+2 positions ahead, on positions whose label is in the draft
    vocabulary (EAGLE-3 masks the rest). Steps 1..6 continue 64 random rows of the conversation,
    not all (exact for those rows: a row's later steps read only step 0's rows and its own), so a
    step costs ~3x less for the same step-0 signal. No feature regression (EAGLE-3 drops it). EAGLE-3's
    code distils the target's distribution over the draft vocabulary; on greedy self-distilled
    data its argmax is the label used here. Random init, AdamW at 5e-4 as for EAGLE; one
    conversation a step (unrolled 7 times it costs as much as several of EAGLE's: on a CPU budget
    more, smaller steps learn faster)."""

    # A step schedule: EAGLE-3's training script runs 40 epochs (SafeAILab/EAGLE eagle/traineagle3/main.py, num_epochs).
    name, conversations, ttt_steps, deep_rows = "eagle3", 1, 7, 64
    title, paper, aliases = "EAGLE-3", "li2025eagle", ("eagle3", "eagle-3")

    def detect(self, weights, config):
        layout, renamed = published_renames(weights)
        if not any(key.startswith("midlayer.") for key in renamed):
            return None
        return layout + "eagle3", renamed

    def build(self, weights, config, target):
        hidden, vocab, layers = target.config.hidden_size, target.config.vocab_size, target.config.num_hidden_layers
        layer = layer_config(config, "EAGLE-3")
        # The midlayer reads [token embedding, features]: the head's width is the target's.
        for name, value in (("hidden size", layer.hidden_size), ("target hidden size", config.get("target_hidden_size") or hidden)):
            if value != hidden or type(value) is not int:
                raise CheckpointError(f"EAGLE-3 head has {name} {value!r:.40}, the target {hidden}")
        if config.get("vocab_size", vocab) != vocab:
            raise CheckpointError(f"EAGLE-3 head was trained for a vocabulary of {config['vocab_size']!r:.40}, "
                                  f"the target has {vocab}")
        draft_vocab = config.get("draft_vocab_size") or vocab
        if "d2t" in weights:
            weights["t2d"] = draft_vocabulary(weights["d2t"], weights.get("t2d"), draft_vocab, vocab, "EAGLE-3")
        eagle = config.get("eagle_config")
        aux = config.get("eagle_aux_hidden_state_layer_ids") or \
            (eagle.get("eagle_aux_hidden_state_layer_ids") if isinstance(eagle, dict) else None) or eagle3_layers(layers)
        if not (isinstance(aux, list | tuple) and len(aux) == 3 and all(type(i) is int and 0 <= i <= layers for i in aux)):
            raise CheckpointError(f"EAGLE-3 eagle_aux_hidden_state_layer_ids = {aux!r:.60} is not 3 target "
                                  f"states from 0 to {layers}")
        return Eagle3Head(layer, hidden, vocab, draft_vocab), tuple(aux)

    def config_for(self, head, target):
        return llama_config(head, target) | {
            "draft_vocab_size": head.lm_head.out_features, "target_hidden_size": target.config.hidden_size,
            "eagle_aux_hidden_state_layer_ids": list(eagle3_layers(target.config.num_hidden_layers))}

    def describe(self, config):
        return (f"an EAGLE-3 draft head (fused low/mid/high target states, training-time test; a draft "
                f"vocabulary of the {config.get('draft_vocab_size')} most frequent target tokens)")

    def layers(self, model) -> tuple[int, ...]:
        return eagle3_layers(model.config.num_hidden_layers)

    def fit(self, loaded, features, run, output, budget_minutes, command, progress) -> str:
        model = loaded.model
        layers = self.layers(model)
        vocab, hidden = model.config.vocab_size, model.config.hidden_size
        embed = model.model.embed_tokens.weight.detach()
        train_ids, test_ids = split(features, run.seed)
        used, draft_id = draft_tokens(features, train_ids, vocab, DRAFT_VOCAB)
        head = Eagle3Head(LayerConfig.from_dict(model.config.to_dict()), hidden, vocab, len(used))
        head.d2t.copy_(used - torch.arange(len(used)))
        head.t2d.zero_()
        head.t2d[used] = True
        start = shared_prompt_prefix(features)
        fused = lambda c: torch.cat([features.hidden[layer][c] for layer in layers], -1).float()  # noqa: E731
        optimizer = torch.optim.AdamW(head.parameters(), lr=self.lr, weight_decay=0.0, betas=(0.9, 0.95))

        def batches(step, generator):
            picked = [train_ids[i] for i in torch.randperm(len(train_ids), generator=generator)[: self.conversations]]
            width = max(len(features.tokens[c]) for c in picked) - 1
            tokens = torch.zeros(len(picked), width + self.ttt_steps, dtype=torch.long)  # room for the shifts
            feats = torch.zeros(len(picked), width, 3 * hidden)
            labels = torch.full((len(picked), width + self.ttt_steps), -100, dtype=torch.long)
            for row, c in enumerate(picked):
                length = len(features.tokens[c]) - 1
                tokens[row, :length] = features.tokens[c][1:]
                feats[row, :length] = fused(c)[:-1]
                labels[row, start:length] = draft_id[features.greedy[c][start + 1 :]]
            trained = torch.arange(start, width)
            deep = trained[torch.randperm(len(trained), generator=generator)[: self.deep_rows]].sort().values
            return tokens, feats, labels, deep

        def loss_fn(batch):
            tokens, states, labels, deep = batch
            loss = 0.0
            for k, (rows, predicted) in enumerate(training_time_test(head, tokens, states, embed, self.ttt_steps, deep)):
                wanted = labels[:, rows + k]  # row t, step k: the target's greedy token t+k+2
                if (wanted != -100).any():
                    loss = loss + 0.8**k * F.cross_entropy(head.logits(predicted)[wanted != -100], wanted[wanted != -100])
            return loss

        state = train_loop(head, optimizer, batches, loss_fn, run, budget_minutes, progress)
        accuracy = chain_acceptance(features, test_ids, embed, self.steps_evaluated, fused,
                                    lambda *args: head.hidden(*args),
                                    lambda predicted: head.to_target(head.logits(predicted).argmax(-1)))
        return finish(self, run, head, loaded, features, train_ids, test_ids, state, accuracy, output, command, {})


def training_time_test(head, tokens, states, embed, steps: int, deep: torch.Tensor | None = None):
    """EAGLE-3's training-time test: (row indices, the head's outputs [B, len(rows), H]) at each of
    `steps` draft steps. Row t of step k reads token t+k+1 (`tokens` [B, rows + steps - 1]) and
    its own step k-1 output (step 0: the target's fused states `states` [B, rows, 3H]) at position
    t+k, attending as `ttt_mask` says (`StepCache` computes that sparsely): exactly what drafting a
    chain from row t computes. Steps after the first continue only the rows `deep` (all if None)."""
    rows, cache = torch.arange(states.shape[1]), StepCache()
    for k in range(steps):
        if k == 1 and deep is not None:
            rows, states, cache.rows = deep, states[:, deep], deep
        states = head.hidden(F.embedding(tokens[:, rows + k], embed), states, rows[None] + k, cache)
        yield rows, states


# --------------------------------------------------------------------------------------------
# Drafting


class Eagle3Drafter(EagleDrafter):
    """EAGLE-3 (Li et al. 2025) drafts EAGLE-2's dynamic tree with its own head: committed rows
    read the target's low/mid/high states fused (fc), draft rows the head's own outputs, and
    the head ranks its draft vocabulary through its own norm and LM head (d2t maps to target ids)."""

    name = "EAGLE-3"

    def __init__(self, head, embed_weight, hidden_layers: tuple[int, ...],
                 dynamic: tuple[int, int, int] = (EAGLE2_TOTAL, EAGLE2_DEPTH, EAGLE2_TOP_K), label: str = ""):
        vocabulary = head.to_target(torch.arange(len(head.d2t), device=head.d2t.device))
        super().__init__(head, embed_weight, None, hidden_layers[-1], None, dynamic, label, vocabulary)
        self.hidden_layers = tuple(hidden_layers)

    def _advance(self, embeds, features, positions, visible):
        return self.head.hidden(embeds, features, positions, self.cache, visible)

    def _logits(self, features):
        return self.head.logits(features)
