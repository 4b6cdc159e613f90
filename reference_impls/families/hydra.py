"""Hydra (Ankner et al. 2024): sequentially dependent draft heads.

`HydraHeads`' `state_dict()` is zankner/Hydra's `HydraMLP` layout (published as `hydra_lm_head.pt`;
`specatlas train` writes the same keys to model.safetensors): head k
reads the target's final state and the embeddings of the k + 1 tokens before the one it drafts,
so a branch's candidates depend on the tokens drafted before them.
"""

from __future__ import annotations

import re

import torch
from torch import nn
from torch.nn import functional as F

from specatlas.impls.engine.drafting import Draft, grow_template
from specatlas.impls.engine.errors import CheckpointError
from specatlas.impls.families.base import Family, positions_epoch
from specatlas.impls.families.medusa import MEDUSA_TREE, MedusaDrafter
from specatlas.impls.families.training import (finish, loss_vocabulary, shared_prompt_prefix, split, teacher_forced,
                                                top1_chain, train_loop)


class HydraBlock(nn.Module):
    """Hydra's ResBlock: res_connection(x) + SiLU(linear(x)). A head's first block reads
    (conditions + 1) x H inputs, so its residual is a learnt projection down to H (identity otherwise)."""

    def __init__(self, hidden: int, conditions: int = 0):
        super().__init__()
        self.linear = nn.Linear(hidden * (conditions + 1), hidden)
        nn.init.zeros_(self.linear.weight)  # Hydra's init, as Medusa's
        self.res_connection = nn.Linear(hidden * (conditions + 1), hidden) if conditions else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.res_connection(x) + F.silu(self.linear(x))


class HydraHeads(nn.Module):
    """`num_heads` sequentially dependent heads (Hydra's grounded MLP heads, zankner/Hydra
    `HydraMLP`): head k is `num_layers` HydraBlocks over concat(hidden, embeddings of k + 1 tokens),
    then its own vocabulary projection (`hydra_lm_head.{k}`, optional) or the target's LM head."""

    def __init__(self, hidden: int, num_heads: int, num_layers: int = 1, vocab_size: int | None = None):
        super().__init__()
        self.hydra_mlp = nn.ModuleList(
            nn.Sequential(HydraBlock(hidden, k + 1), *(HydraBlock(hidden) for _ in range(num_layers - 1)))
            for k in range(num_heads))
        if vocab_size is not None:
            self.hydra_lm_head = nn.ModuleList(nn.Linear(hidden, vocab_size) for _ in range(num_heads))
        self.hidden, self.num_layers, self.own_vocab = hidden, num_layers, vocab_size is not None

    def __len__(self) -> int:
        return len(self.hydra_mlp)

    def features(self, k: int, hidden: torch.Tensor, embeds: torch.Tensor) -> torch.Tensor:
        """Head k's output before the vocabulary projection: hidden [.., H], embeds [.., k + 1, H]."""
        return self.hydra_mlp[k](torch.cat([hidden, embeds.flatten(-2)], -1))

    def logits(self, k: int, features: torch.Tensor, lm_head_weight: torch.Tensor) -> torch.Tensor:
        return self.hydra_lm_head[k](features) if self.own_vocab else F.linear(features, lm_head_weight)


HYDRA_KEY = re.compile(r"^hydra_(?:mlp|lm_head)\.(\d+)\.")


class HydraFamily(Family):
    """Hydra's grounded MLP heads (one HydraBlock each; the base Hydra of the paper, not Hydra++'s
    prefix-attention layer or 4-block heads). Head k at position t reads (final state t, embeddings
    of tokens t+1 .. t+k+1, teacher-forced from the target's own answer) and is trained with
    cross-entropy against the target's greedy token at t+k+2, all heads weighted equally (Hydra's
    train.py; with greedy self-distilled data its teacher objective has the same argmax). AdamW
    at 1e-3, cosine schedule, 256 positions a step."""

    # A step schedule: Hydra++ trains 10 epochs of ShareGPT (zankner/Hydra README, --num_train_epochs 10).
    name, num_heads, batch, lr, default_steps = "hydra", 4, 256, 1e-3, 2000
    title, paper, aliases = "Hydra", "ankner2024hydra", ("hydra",)
    epoch = positions_epoch

    def detect(self, weights, config):
        if any(key.startswith("hydra_mlp.") for key in weights):
            own_vocab = any(key.startswith("hydra_lm_head.") for key in weights)
            return "hydra" if own_vocab else "hydra-shared-lm-head", weights
        return None

    def build(self, weights, config, target):
        hidden, vocab, layers = target.config.hidden_size, target.config.vocab_size, target.config.num_hidden_layers
        arch = config.get("hydra_head_arch", "mlp")
        if arch != "mlp" or not config.get("grounded_heads", True) or config.get("hidden_state_offset", 0):
            raise CheckpointError(f"Hydra heads of arch {arch!r} (grounded_heads: {config.get('grounded_heads')}, "
                                  f"hidden_state_offset: {config.get('hidden_state_offset', 0)}) are not supported: "
                                  "only grounded MLP heads on the final state")
        block = weights.get("hydra_mlp.0.0.linear.weight")
        if block is not None and block.shape[0] != hidden:
            raise CheckpointError(f"Hydra heads have hidden size {block.shape[0]}, the target {hidden}")
        projection = weights.get("hydra_lm_head.0.weight")
        if projection is not None and projection.shape[0] != vocab:
            raise CheckpointError(f"Hydra heads project to {projection.shape[0]} tokens, the target's vocabulary has {vocab}")
        heads = config.get("hydra_num_heads") or 1 + max(int(m.group(1)) for m in map(HYDRA_KEY.match, weights) if m)
        return HydraHeads(hidden, heads, config.get("hydra_num_layers", 1), vocab if projection is not None else None), \
            (layers,)

    def config_for(self, head, target):  # zankner/Hydra's HydraConfig
        return {"hydra_num_heads": len(head), "hydra_num_layers": head.num_layers, "hydra_head_arch": "mlp",
                "grounded_heads": True, "hidden_state_offset": 0, "hidden_size": target.config.hidden_size,
                "vocab_size": target.config.vocab_size}

    def describe(self, config):
        return (f"{config.get('hydra_num_heads')} Hydra heads (sequentially dependent MLP heads over the final "
                "state and the embeddings of the tokens before; the target's LM head is reused)")

    def fit(self, loaded, features, run, output, budget_minutes, command, progress) -> str:
        model = loaded.model
        final = model.config.num_hidden_layers
        embed, lm_weight = model.model.embed_tokens.weight.detach(), model.lm_head.weight.detach()
        heads = HydraHeads(model.config.hidden_size, self.num_heads)
        train_ids, test_ids = split(features, run.seed)
        start = shared_prompt_prefix(features)
        rows, inputs, labels = teacher_forced(features, train_ids, start, final, self.num_heads)
        optimizer = torch.optim.AdamW(heads.parameters(), lr=self.lr, weight_decay=0.0)
        vocabulary = loss_vocabulary(features, train_ids, lm_weight)

        def batches(step, generator):
            pick = torch.randint(len(rows), (self.batch,), generator=generator)
            return rows[pick].float(), F.embedding(inputs[pick], embed), labels[pick]

        def loss_fn(batch):
            hidden, embeds, y = batch
            return sum(vocabulary.cross_entropy(heads.features(k, hidden, embeds[:, : k + 1]), y[:, k])
                       for k in range(self.num_heads))

        state = train_loop(heads, optimizer, batches, loss_fn, run, budget_minutes, progress)
        accuracy = self.evaluate(heads, features, test_ids, embed, lm_weight, final, vocabulary)
        return finish(self, run, heads, loaded, features, train_ids, test_ids, state, accuracy, output, command, {})

    @torch.no_grad()
    def evaluate(self, heads, features, conversations, embed, lm_weight, final, vocabulary) -> dict:
        """Top-1 chain acceptance on held-out answers, and how many drafts fall outside the loss
        `vocabulary`. Teacher-forced inputs give the drafting chain's count exactly: head k's inputs
        differ from the drafted ones only after an earlier head missed, where the count has stopped anyway."""
        def drafted(c):
            rows, inputs, labels = teacher_forced(features, [c], features.prompt_lengths[c] - 1, final, self.num_heads)
            embeds = F.embedding(inputs, embed)
            return torch.stack([heads.logits(k, heads.features(k, rows.float(), embeds[:, : k + 1]), lm_weight).argmax(-1)
                                for k in range(self.num_heads)], 1), labels

        return top1_chain(map(drafted, conversations), self.num_heads, vocabulary)


# --------------------------------------------------------------------------------------------
# Drafting


# Hydra drafts Medusa's tree: `hydra_generate` defaults to the same mc_sim_7b_63 (zankner/Hydra hydra_choices.py).
HYDRA_TREE = MEDUSA_TREE


class HydraDrafter(MedusaDrafter):
    """Hydra (Ankner et al. 2024), per step:
    1. h = the target's last kept final state, x = the pending token its logits chose;
    2. head 1 ranks candidates for the token after x from (h, E(x));
    3. each tree node with children is expanded by the next head from (h, E(x), E(its path's
       tokens)): unlike Medusa's, a branch's candidates depend on the tokens drafted before them;
    4. the target verifies the tree in one forward; its kept rows give the next h."""

    def __init__(self, heads, embed_weight, lm_head_weight, final_layer: int, tree=HYDRA_TREE, label: str = ""):
        super().__init__(heads, lm_head_weight, final_layer, tree, label)
        self.embed_weight = embed_weight

    def propose(self, context, depth, sampling, rng):
        if self.state is None:
            return Draft()

        def rank(paths, chains, width):
            k = len(chains[0])  # head k drafts depth k + 1
            ids = torch.tensor([[context[-1], *chain] for chain in chains], device=self.state.device)
            features = self.heads.features(k, self.state.expand(len(chains), -1), F.embedding(ids, self.embed_weight))
            logits = self.heads.logits(k, features, self.lm_head_weight)
            return logits.topk(min(width, logits.shape[-1]), dim=-1).indices.tolist()

        root = rank([()], [[]], max(path[-1] for path in self.tree if len(path) == 1) + 1)[0]
        return grow_template(self.tree, min(depth, len(self.heads)), root, rank)

    def describe(self):
        return f"Hydra heads ({len(self.heads)} heads, {len(self.tree)}-node tree; {self.label})"
