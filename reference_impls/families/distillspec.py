"""DistillSpec (Zhou et al. 2024): a drafter for a target with no smaller sibling, the target's first layers distilled.

The drafter is the target's first k decoder layers, copied and fine-tuned on the target's
distribution (`DistillFamily`), over the target's own embeddings and final norm and its LM head
restricted to a draft vocabulary (the tokens the target uses most). Only the layers and the
vocabulary's ids ship; the rest is the target's, by reference.

The restricted head is for speed: the 49k-row head is most of a two-layer drafter's step, 8k
rows cost a sixth of it. Verification is unchanged and stays lossless: the verifier sees the
drafter's actual distribution, which is zero outside the draft vocabulary (a greedy draft is
matched exactly; a sampled one goes through rejection sampling with that q).
"""

from __future__ import annotations

from functools import partial

import torch
from torch import nn
from torch.nn import functional as F

from specatlas.impls.engine.errors import CheckpointError
from specatlas.impls.families.base import Family
from specatlas.impls.families.blocks import VocabularyHead
from specatlas.impls.engine.models import eos_ids, shallow_slice
from specatlas.impls.families.training import (acceptance_summary, finish, loss_vocabulary, padded, run_lengths,
                                      shared_prompt_prefix, split, train_loop)


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


class DistillFamily(Family):
    """DistillSpec (Zhou et al. 2024): a drafter distilled from the target's distribution. The
    student is the target's first `num_layers` layers (copied; the target's embeddings, final norm
    and LM head restricted to the loss vocabulary, which is also its draft vocabulary: see
    `DraftLayers`). Data: the paper's on-policy recipe, sequences the student samples from the
    training prompts, scored by the target's full distribution; it starts on the cached target
    answers (off-policy, whose distributions are stored), because an untrained student's samples
    are poor text, then alternates the two. Loss: the total variation distance between the
    target's distribution p and the student's q. DistillSpec compares forward and reverse KL, JSD
    and TVD and finds the best depends on task and decoding; TVD is the one the acceptance rate
    is written in (a draft token is accepted with probability 1 - TVD(p, q)), and the one that
    stays exact with a restricted head: q is zero outside the draft vocabulary S, so
    TVD = (sum_S |p - q| + p(not S)) / 2 needs p on S only (KL would be infinite)."""

    name, num_layers, lr, default_steps, steps_evaluated = "distillspec", 2, 2e-4, 1500, 5
    # Per step: 2 conversations (the student runs over all their tokens for context; the loss scores at most
    # `scored_rows` positions, whose target distributions need the full 49k-row head) or 2 samples of 48 tokens.
    conversations, scored_rows, on_policy_prompts, on_policy_tokens, off_policy_warmup = 2, 256, 2, 48, 50
    title, paper, aliases = "DistillSpec", "zhou2024distillspec", ("distillspec",)

    def detect(self, weights, config):
        # Our layout, which PARD's shares but for its mask: the config names the family that wrote it.
        if "draft_vocab" in weights and any(".mlp." in key for key in weights) \
                and config.get("specatlas_family", self.name) == self.name:
            return "distillspec", weights
        return None

    def build(self, weights, config, target):
        layers = target.config.num_hidden_layers
        self.check_sizes(config, target, "the drafter's layers were distilled")
        if not 1 <= config.get("num_hidden_layers", 0) < layers:
            raise CheckpointError(f"the drafter needs 1..{layers - 1} layers, its config says {config.get('num_hidden_layers')}")
        return DraftLayers(target, config["num_hidden_layers"], config["draft_vocab_size"]), ()

    def config_for(self, head, target):  # our layout: `specatlas_family` says what the module is
        return {"specatlas_family": self.name, "hidden_size": target.config.hidden_size,
                "vocab_size": target.config.vocab_size, "num_hidden_layers": len(head.layers),
                "draft_vocab_size": len(head.draft_vocab)}

    def describe(self, config):
        return (f"a DistillSpec drafter: the target's first {config.get('num_hidden_layers')} decoder layers, "
                f"distilled; the target's embeddings, final norm and LM head (restricted to "
                f"{config.get('draft_vocab_size')} tokens) are shared, not shipped")

    def fit(self, loaded, features, run, output, budget_minutes, command, progress) -> str:
        model = loaded.model
        final, lm_weight = model.config.num_hidden_layers, model.lm_head.weight.detach()
        train_ids, test_ids = split(features, run.seed)
        start = shared_prompt_prefix(features)
        vocabulary = loss_vocabulary(features, train_ids, lm_weight).frequent
        student = DraftLayers.from_target(model, self.num_layers, vocabulary).train().requires_grad_(True)
        drafter, head = student.drafter(model), lm_weight[vocabulary]
        untrained = self.evaluate(drafter, features, test_ids)
        optimizer = torch.optim.AdamW(student.parameters(), lr=self.lr, weight_decay=0.0)
        pad = int(features.tokens[0][0])  # any id: padded positions are masked out of attention and loss
        stops = torch.tensor(sorted(eos_ids(model, loaded.tokenizer)))

        def pick(count, generator):
            return [train_ids[i] for i in torch.randperm(len(train_ids), generator=generator)[:count]]

        def off_policy(generator):
            picked = pick(self.conversations, generator)
            tokens = padded([features.tokens[c] for c in picked], pad)
            mask = padded([torch.ones(len(features.tokens[c]), dtype=torch.bool) for c in picked], False)
            scored = padded([torch.arange(len(features.tokens[c])) >= start for c in picked], False)
            rows = scored.nonzero()
            rows = rows[torch.randperm(len(rows), generator=generator)[self.scored_rows :]]
            scored[rows[:, 0], rows[:, 1]] = False
            with torch.no_grad():
                p = F.linear(padded([features.hidden[final][c].float() for c in picked])[scored], lm_weight)
            return tokens, mask, scored, p.softmax(-1)[:, vocabulary]

        @torch.no_grad()
        def on_policy(generator):  # the samples draw from torch's global RNG, seeded per step by train_loop
            prompts = [features.tokens[c][: features.prompt_lengths[c]] for c in pick(self.on_policy_prompts, generator)]
            width = max(map(len, prompts))
            # Left-padded, so every sample starts at column `width`; the student samples at T = 1.
            batch = torch.stack([torch.cat([prompt.new_full((width - len(prompt),), pad), prompt]) for prompt in prompts])
            mask = torch.stack([torch.arange(width) >= width - len(prompt) for prompt in prompts])
            drafter.eval()
            tokens = drafter.generate(input_ids=batch, attention_mask=mask.long(), do_sample=True, temperature=1.0,
                                      top_k=0, top_p=1.0, max_new_tokens=self.on_policy_tokens, pad_token_id=pad)
            drafter.train()
            ends = torch.isin(tokens[:, width:], stops).long()
            kept = ends.cumsum(1) - ends == 0  # the samples up to their first end token (generate pads after it)
            mask = torch.cat([mask, kept], 1)
            # Position t is scored when token t + 1 is a sample: the student's choices, the target's judgement.
            scored = torch.zeros_like(mask)
            scored[:, width - 1 : -1] = kept
            logits = model(input_ids=tokens, attention_mask=mask.long(), position_ids=positions(mask)).logits
            return tokens, mask, scored, logits[scored].softmax(-1)[:, vocabulary]

        def batches(step, generator):
            return on_policy(generator) if step >= self.off_policy_warmup and step % 2 else off_policy(generator)

        state = train_loop(student, optimizer, batches, partial(total_variation, drafter, head), run, budget_minutes,
                           progress)
        accuracy = self.evaluate(drafter, features, test_ids) | {"untrained": untrained}
        return finish(self, run, student, loaded, features, train_ids, test_ids, state, accuracy, output, command, {},
                      {"trained_on": "by distillation: on the target's greedy answers, then alternately on sequences "
                                     "the drafter sampled itself (on-policy)",
                       "targets": "the loss is the total variation distance to the target's full distribution"})

    @torch.no_grad()
    def evaluate(self, drafter, features, conversations) -> dict:
        """Top-1 chain acceptance of the drafter on held-out answers (see `run_lengths`)."""
        accepted = []
        for c in conversations:
            drafted = drafter(input_ids=features.tokens[c][None]).logits[0].argmax(-1)
            accepted += run_lengths(drafted == features.greedy[c], features.prompt_lengths[c] - 1, self.steps_evaluated)
        return acceptance_summary(accepted, self.steps_evaluated)


def positions(mask: torch.Tensor) -> torch.Tensor:
    """Position ids of a padded batch: each row counts its own tokens (padding repeats 0)."""
    return (mask.long().cumsum(1) - 1).clamp(min=0)


def total_variation(drafter, head: torch.Tensor, batch) -> torch.Tensor:
    """DistillSpec's loss on a batch (tokens, mask, scored, p): the total variation distance between
    the target's p over the draft vocabulary and the drafter's q at the scored positions; the target's
    mass outside the vocabulary counts wholly as distance, as the drafter can never match it."""
    tokens, mask, scored, p = batch
    hidden = drafter.model(input_ids=tokens, attention_mask=mask.long(), position_ids=positions(mask)).last_hidden_state
    q = F.linear(hidden[scored], head).softmax(-1)
    return 0.5 * ((p - q).abs().sum(-1) + 1 - p.sum(-1)).mean()
