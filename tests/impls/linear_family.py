"""A toy head family defined in this one file, to show that one file and one line in
`families.FAMILIES` are all a family needs: `test_training` registers it at runtime, trains it on
the tiny model, saves it, loads it back through `checkpoints.load` and decodes with `linear_method`.

The head is one linear map of the target's final state at t, read by the target's LM head: it
drafts the token after the pending one (a single Medusa head without its residual)."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from specatlas.impls.families.checkpoints import load_head
from specatlas.impls.engine.decoding import SpeculativeDecoder
from specatlas.impls.engine.draft_length import DraftLengthPolicy
from specatlas.impls.engine.drafting import Draft, Drafter
from specatlas.impls.families.base import Family
from specatlas.impls.families.training import acceptance_summary, finish, split, train_loop


class LinearHead(nn.Module):
    def __init__(self, hidden: int):
        super().__init__()
        self.linear_head = nn.Linear(hidden, hidden)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.linear_head(hidden)


class LinearFamily(Family):
    name, title, batch, lr, default_steps = "linear", "linear head", 64, 1e-2, 20

    def detect(self, weights, config):
        return ("linear", weights) if "linear_head.weight" in weights else None

    def build(self, weights, config, target):
        return LinearHead(target.config.hidden_size), (target.config.num_hidden_layers,)

    def config_for(self, head, target):
        return {"specatlas_family": self.name, "hidden_size": target.config.hidden_size}

    def describe(self, config):
        return "a linear head on the target's final state"

    def epoch(self, features, train_ids):  # `batch` rows a step, from `table`'s rows
        return sum(len(features.tokens[c]) - 1 for c in train_ids), self.batch, "positions"

    def fit(self, loaded, features, run, output, budget_minutes, command, progress) -> str:
        model = loaded.model
        final, lm_weight = model.config.num_hidden_layers, model.lm_head.weight.detach()
        head = LinearHead(model.config.hidden_size)
        train_ids, test_ids = split(features, run.seed)
        rows, labels = table(features, train_ids, final)
        optimizer = torch.optim.AdamW(head.parameters(), lr=self.lr)

        def batches(step, generator):
            pick = torch.randint(len(rows), (self.batch,), generator=generator)
            return rows[pick], labels[pick]

        def loss_fn(batch):
            x, y = batch
            return F.cross_entropy(F.linear(head(x), lm_weight), y)

        state = train_loop(head, optimizer, batches, loss_fn, run, budget_minutes, progress)
        rows, labels = table(features, test_ids, final)
        with torch.no_grad():
            hits = F.linear(head(rows), lm_weight).argmax(-1) == labels
        return finish(self, run, head, loaded, features, train_ids, test_ids, state,
                      acceptance_summary(hits.int().tolist(), 1), output, command, {})


def table(features, conversations, final):
    """The final state at each position t but the last, and the target's greedy token after t + 1."""
    return (torch.cat([features.hidden[final][c][:-1].float() for c in conversations]),
            torch.cat([features.greedy[c][1:] for c in conversations]))


class LinearDrafter(Drafter):
    """Drafts one token: the head's choice after the target's last kept final state."""

    def __init__(self, head, lm_head_weight, final_layer: int):
        self.head, self.lm_head_weight, self.hidden_layers = head, lm_head_weight, (final_layer,)

    def start(self, prompt, prefill):
        self.state = prefill.hidden_states[self.hidden_layers[0]][-1]

    def propose(self, context, depth, sampling, rng):
        return Draft.chain([int(F.linear(self.head(self.state), self.lm_head_weight).argmax())])

    def observe(self, step):
        self.state = step.hidden_states[self.hidden_layers[0]][step.accepted[-1] + 1 if step.accepted else 0]

    def describe(self):
        return "linear head"


def linear_method(target, draft_model=None, policy=DraftLengthPolicy.paper(), drafter_checkpoint=None) -> SpeculativeDecoder:
    checkpoint = load_head(target, "linear", drafter_checkpoint)
    drafter = LinearDrafter(checkpoint.head, target.lm_head.weight, checkpoint.hidden_layers[0])
    return SpeculativeDecoder(target, drafter, draft_length=policy.controller(target, 1, max_depth=1),
                              weights=checkpoint.files)
