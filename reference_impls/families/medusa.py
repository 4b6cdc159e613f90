"""Medusa (Cai et al. 2024): heads on the target's final state, head k drafting the token k + 2 ahead.

`MedusaHeads`' `state_dict()` is the published layout (FasterDecoding/Medusa; vLLM's renames are
read too): head k is `x + SiLU(W x + b)` ResBlocks on the target's final (normed) hidden state at
position t, predicting the token at t + k + 2 (the target's own head predicts t + 1). v1 ends each
head with its own vocabulary projection (`{k}.{L}.weight`); v2 reuses the target's LM head.
"""

from __future__ import annotations

import re

import torch
from torch import nn
from torch.nn import functional as F

from specatlas.impls.engine.drafting import Draft, Drafter, grow_template
from specatlas.impls.engine.errors import CheckpointError
from specatlas.impls.families.base import Family, positions_epoch
from specatlas.impls.families.training import (finish, loss_vocabulary, shared_prompt_prefix, split, top1_chain,
                                               train_loop)


class ResBlock(nn.Module):
    def __init__(self, hidden: int):
        super().__init__()
        self.linear = nn.Linear(hidden, hidden)
        nn.init.zeros_(self.linear.weight)  # Medusa's init: each head starts as the identity
        nn.init.zeros_(self.linear.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + F.silu(self.linear(x))


class MedusaHeads(nn.ModuleList):
    """`num_heads` heads of `num_layers` ResBlocks, with (v1) or without (v2) their own vocabulary
    projection. A ModuleList of Sequentials, so keys read `{head}.{layer}.linear.weight`."""

    def __init__(self, hidden: int, num_heads: int, num_layers: int = 1, vocab_size: int | None = None):
        heads = []
        for _ in range(num_heads):
            blocks: list[nn.Module] = [ResBlock(hidden) for _ in range(num_layers)]
            if vocab_size is not None:
                blocks.append(nn.Linear(hidden, vocab_size, bias=False))
            heads.append(nn.Sequential(*blocks))
        super().__init__(heads)
        self.hidden, self.num_layers, self.own_vocab = hidden, num_layers, vocab_size is not None

    def features(self, hidden: torch.Tensor) -> torch.Tensor:
        """[..., H] -> [heads, ..., H]: each head's ResBlock output, before any vocabulary projection."""
        return torch.stack([head[: self.num_layers](hidden) for head in self])

    def forward(self, hidden: torch.Tensor, lm_head_weight: torch.Tensor | None = None) -> torch.Tensor:
        """[..., H] -> logits [heads, ..., vocab]; v2 heads need the target's LM head weight."""
        if self.own_vocab:
            return torch.stack([head(hidden) for head in self])
        if lm_head_weight is None:
            raise ValueError("Medusa v2 heads reuse the target's LM head: pass lm_head_weight")
        return F.linear(self.features(hidden), lm_head_weight)


MEDUSA_KEY = re.compile(r"^(\d+)\.(\d+)\.(linear\.weight|linear\.bias|weight)$")
VLLM_MEDUSA_KEY = re.compile(r"^(?:blocks\.(\d+)\.layers\.(\d+)|lm_heads\.(\d+))\.(weight|bias)$")


class MedusaFamily(Family):
    """Medusa-2-style heads (ResBlocks reusing the target's LM head; the backbone stays frozen, so
    this is the paper's Medusa-1 training of Medusa v2-layout heads). Loss: sum over heads of
    0.8^k x cross-entropy against the target's greedy token k+2 positions ahead (the paper's
    decaying weights), AdamW at 1e-3 with a cosine schedule."""

    # A step schedule: Medusa's script trains one epoch of ShareGPT (FasterDecoding/Medusa
    # scripts/train_vicuna_7b.sh, --num_train_epochs 1); `--epochs 1` asks for that here.
    name, num_heads, batch, lr, default_steps = "medusa", 4, 256, 1e-3, 2000
    title, paper, aliases, weight_file = "Medusa", "cai2024medusa", ("medusa", "medusa-2"), "medusa_lm_head.safetensors"
    epoch = positions_epoch

    def detect(self, weights, config):
        if any(VLLM_MEDUSA_KEY.match(key) for key in weights):
            renamed = {}
            layers = config.get("num_hidden_layers", config.get("medusa_num_layers", 1))
            for key, value in weights.items():
                match = VLLM_MEDUSA_KEY.match(key)
                if match is None:
                    renamed[key] = value  # reported as unexpected
                elif match.group(3) is not None:
                    renamed[f"{match.group(3)}.{layers}.weight"] = value
                else:
                    renamed[f"{match.group(1)}.{match.group(2)}.linear.{match.group(4)}"] = value
            return "vllm-medusa", renamed
        if any(MEDUSA_KEY.match(key) for key in weights):
            layers = config.get("medusa_num_layers", 1)
            own_vocab = any(key.endswith(f".{layers}.weight") and MEDUSA_KEY.match(key) for key in weights)
            return "medusa-v1" if own_vocab else "medusa-v2", weights
        return None

    def build(self, weights, config, target):
        hidden, vocab, layers = target.config.hidden_size, target.config.vocab_size, target.config.num_hidden_layers
        indices = {int(MEDUSA_KEY.match(key).group(1)) for key in weights if MEDUSA_KEY.match(key)}
        num_heads = config.get("medusa_num_heads", config.get("num_heads", len(indices)))
        num_layers = config.get("medusa_num_layers", config.get("num_hidden_layers", 1))
        block = weights.get("0.0.linear.weight")
        if block is not None and block.shape[-1] != hidden:
            raise CheckpointError(f"Medusa heads have hidden size {block.shape[-1]}, the target {hidden}")
        projection = weights.get(f"0.{num_layers}.weight")
        if projection is not None and projection.shape[0] != vocab:
            raise CheckpointError(f"Medusa heads project to {projection.shape[0]} tokens, the target's vocabulary has {vocab}")
        return MedusaHeads(hidden, num_heads, num_layers, vocab if projection is not None else None), (layers,)

    def config_for(self, head, target):
        config = {"medusa_num_heads": len(head), "medusa_num_layers": head.num_layers,
                  "hidden_size": target.config.hidden_size, "vocab_size": target.config.vocab_size}
        if not head.own_vocab:
            config["version"] = "2"
        return config

    def describe(self, config):
        return (f"{config.get('medusa_num_heads')} Medusa heads (one ResBlock each, reusing the target's LM head: "
                "Medusa v2 layout)")

    def fit(self, loaded, features, run, output, budget_minutes, command, progress) -> str:
        model = loaded.model
        final = model.config.num_hidden_layers
        hidden, lm_weight = model.config.hidden_size, model.lm_head.weight.detach()
        heads = MedusaHeads(hidden, self.num_heads)
        train_ids, test_ids = split(features, run.seed)
        start = shared_prompt_prefix(features)
        rows, labels = self._table(features, train_ids, start, final)
        optimizer = torch.optim.AdamW(heads.parameters(), lr=self.lr, weight_decay=0.0)

        def batches(step, generator):
            pick = torch.randint(len(rows), (self.batch,), generator=generator)
            return rows[pick].float(), labels[pick]

        vocabulary = loss_vocabulary(features, train_ids, lm_weight)

        def loss_fn(batch):
            x, y = batch
            outputs = heads.features(x)  # [heads, B, H]
            return sum(0.8**k * vocabulary.cross_entropy(outputs[k], y[:, k]) for k in range(self.num_heads))

        state = train_loop(heads, optimizer, batches, loss_fn, run, budget_minutes, progress)
        accuracy = self.evaluate(heads, features, test_ids, lm_weight, final, vocabulary)
        return finish(self, run, heads, loaded, features, train_ids, test_ids, state, accuracy, output, command, {})

    def _table(self, features, conversations, start, final):
        rows, labels = [], []
        for c in conversations:
            greedy, length = features.greedy[c], len(features.tokens[c])
            rows.append(features.hidden[final][c][start:])
            label = torch.full((length - start, self.num_heads), -100, dtype=torch.long)
            for k in range(self.num_heads):
                # Head k at position t drafts the token after t + k + 1: the target's greedy choice there.
                label[: max(0, length - start - k - 1), k] = greedy[start + k + 1 :]
            labels.append(label)
        return torch.cat(rows), torch.cat(labels)

    @torch.no_grad()
    def evaluate(self, heads, features, conversations, lm_weight, final, vocabulary) -> dict:
        """Top-1 chain acceptance on held-out answers: at each answer position, how many heads in a
        row draft the target's greedy tokens; and how many drafts fall outside the loss `vocabulary`."""
        def drafted(c):
            rows, labels = self._table(features, [c], features.prompt_lengths[c] - 1, final)
            return F.linear(heads.features(rows.float()), lm_weight).argmax(-1).T, labels  # [rows, heads] each

        return top1_chain(map(drafted, conversations), self.num_heads, vocabulary)


# --------------------------------------------------------------------------------------------
# Drafting


# Medusa's tree for Vicuna-7B (`mc_sim_7b_63` in FasterDecoding/Medusa medusa_choices.py): 63 nodes,
# depth 4; node (i, j) is head 1's (i+1)-th token followed by head 2's (j+1)-th.
MEDUSA_TREE = tuple(map(tuple, [
    [0], [0, 0], [1], [0, 1], [2], [0, 0, 0], [1, 0], [0, 2], [3], [0, 3], [4], [0, 4], [2, 0], [0, 5], [0, 0, 1],
    [5], [0, 6], [6], [0, 7], [0, 1, 0], [1, 1], [7], [0, 8], [0, 0, 2], [3, 0], [0, 9], [8], [9], [1, 0, 0],
    [0, 2, 0], [1, 2], [0, 0, 3], [4, 0], [2, 1], [0, 0, 4], [0, 0, 5], [0, 0, 0, 0], [0, 1, 1], [0, 0, 6], [0, 3, 0],
    [5, 0], [1, 3], [0, 0, 7], [0, 0, 8], [0, 0, 9], [6, 0], [0, 4, 0], [1, 4], [7, 0], [0, 1, 2], [2, 0, 0], [3, 1],
    [2, 2], [8, 0], [0, 5, 0], [1, 5], [1, 0, 1], [0, 2, 1], [9, 0], [0, 6, 0], [0, 0, 0, 1], [1, 6], [0, 7, 0]]))


class MedusaDrafter(Drafter):
    """Medusa (Cai et al. 2024), per step:
    1. h = the target's last kept final state (the one whose logits gave the pending token);
    2. head k's top tokens are candidates for the token k+2 positions after h;
    3. the tree template combines them (node (i, j): head 1's i-th, then head 2's j-th);
    4. the target verifies the tree in one forward; its kept rows give the next h."""

    def __init__(self, heads, lm_head_weight, final_layer: int, tree=MEDUSA_TREE, label: str = ""):
        self.heads, self.lm_head_weight, self.tree, self.label = heads, lm_head_weight, tree, label
        self.hidden_layers = (final_layer,)
        self.state = None

    def start(self, prompt, prefill):
        rows = prefill.hidden_states[self.hidden_layers[0]]
        self.state = rows[-1] if len(rows) else None

    def propose(self, context, depth, sampling, rng):
        if self.state is None:
            return Draft()
        logits = self.heads(self.state, self.lm_head_weight)  # [heads, vocab]
        ranked = logits.topk(max(path[-1] for path in self.tree) + 1, dim=-1).indices.tolist()
        # Every node at depth d shares head d's candidates: they do not depend on the path.
        return grow_template(self.tree, depth, ranked[0], lambda paths, chains, width: [ranked[len(paths[0])]] * len(paths))

    def observe(self, step):
        row = step.accepted[-1] + 1 if step.accepted else 0
        self.state = step.hidden_states[self.hidden_layers[0]][row]

    def describe(self):
        return f"Medusa heads ({len(self.heads)} heads, {len(self.tree)}-node tree; {self.label})"
