"""SpecDec++ (Huang et al. 2024): an acceptance-prediction head on the draft model that ends each draft.

`AcceptanceHead`: ResBlocks (x + SiLU(Wx + b)) then a linear map to two logits (rejected,
accepted) on the draft model's final (normed) state at a drafted token's row: the predicted
chance that the target accepts that token. Keys as its released `AcceptancePredictionHead`
(`model.{i}.linear.*`, `model.{L}.*`); its code repeats one ResBlock object L times (shared
weights), here each block has its own. `PredictedRejection` is the paper's stopping rule.
"""

from __future__ import annotations

import re

import torch
from torch import nn

from specatlas.impls.engine.errors import CheckpointError
from specatlas.impls.families.base import Family
from specatlas.impls.families.medusa import ResBlock
from specatlas.impls.families.training import acceptance_summary, finish, run_lengths, split, train_loop

HEAD_KEY = re.compile(r"^model\.(\d+)\.(linear\.weight|linear\.bias|weight|bias)$")


class AcceptanceHead(nn.Module):
    def __init__(self, hidden: int, num_layers: int = 3):
        super().__init__()
        self.model = nn.Sequential(*[ResBlock(hidden) for _ in range(num_layers)], nn.Linear(hidden, 2))
        self.hidden, self.num_layers = hidden, num_layers

    def forward(self, states: torch.Tensor) -> torch.Tensor:
        return self.model(states)

    def acceptance(self, states: torch.Tensor) -> torch.Tensor:
        """The predicted probability that each row's token is accepted."""
        parameter = self.model[-1].weight
        return self.model(states.to(parameter)).float().softmax(-1)[..., 1]


class SpecDecFamily(Family):
    """The acceptance head, trained as its train.py: on the target's answers X, the draft model
    samples Y_t ~ q(. | X_<t) at every answer position; the label of Y_t is its acceptance
    probability min(1, p(Y_t)/q(Y_t)) under the target's p (sampling at T = 1); the input is the
    text with Y in place of X except at a random `mixing` fraction of positions (kept as X and not
    scored), so the head sees draft tokens in the context as it does while drafting. Loss: the
    binary cross-entropy against those soft labels with the rejected class weighted
    `weight_rejected` times (its README's command: weight 6, 3 layers, mixing ratio 0.15),
    normalised by the total weight. The draft model is the methods' default for the target (the
    shipped distilled drafter for the embedded model) and stays frozen; it is run, and the
    samples drawn, per batch. AdamW with the shared schedule (ours: its 3 epochs over 40k Alpaca
    answers do not fit here)."""

    uses_draft_model = True

    name, num_layers, weight_rejected, mixing, lr, default_steps = "specdecpp", 3, 6.0, 0.15, 1e-3, 1000
    conversations, steps_evaluated = 2, 8
    title, paper, aliases = "SpecDec++", "huang2024specdec", ("specdec++", "specdecpp")

    def detect(self, weights, config):
        if config.get("specatlas_family") == self.name or (weights and all(HEAD_KEY.match(key) for key in weights)):
            return "specdecpp", weights
        return None

    def build(self, weights, config, target):
        final = weights.get(f"model.{config.get('num_layers', 3)}.weight")
        if final is None or final.dim() != 2 or final.shape[0] != 2:
            raise CheckpointError(f"a SpecDec++ head ends in a linear map to 2 logits (model.{config.get('num_layers', 3)}"
                                  ".weight); this checkpoint's num_layers or weights disagree")
        if not 0 < final.shape[1] <= 16 * target.config.hidden_size or not 0 <= config.get("num_layers", 3) <= 16:
            raise CheckpointError(f"a SpecDec++ head of width {final.shape[1]} and {config.get('num_layers')} layers "
                                  "is not a size this target allows")
        return AcceptanceHead(final.shape[1], config.get("num_layers", 3)), ()

    def config_for(self, head, target):  # its released config.json: hidden_size (the draft model's), num_layers
        return {"specatlas_family": self.name, "hidden_size": head.hidden, "num_layers": head.num_layers}

    def describe(self, config):
        return (f"a SpecDec++ acceptance-prediction head ({config.get('num_layers')} ResBlocks and a 2-way linear map) "
                f"on {config.get('draft_model', 'the draft model')}'s final state")

    def fit(self, loaded, features, run, output, budget_minutes, command, progress) -> str:
        if run.draft_model is None:
            raise ValueError("SpecDec++ trains on a draft model's states: pass draft_model to train")
        model = loaded.model
        drafter, label = run.draft_model
        train_ids, test_ids = split(features, run.seed)
        head = AcceptanceHead(drafter.config.hidden_size, self.num_layers)
        optimizer = torch.optim.AdamW(head.parameters(), lr=self.lr, weight_decay=0.0)

        def batches(step, generator):
            picked = [train_ids[i] for i in torch.randperm(len(train_ids), generator=generator)[: self.conversations]]
            rows = [self._examples(model, drafter, features, c, generator) for c in picked]
            return torch.cat([states for states, _ in rows]), torch.cat([labels for _, labels in rows])

        def loss_fn(batch):
            states, accepted = batch
            log = head(states).float().log_softmax(-1)
            weights = torch.stack([self.weight_rejected * (1 - accepted), accepted], -1)
            return -(weights * log).sum() / weights.sum().clamp_min(1e-9)

        state = train_loop(head, optimizer, batches, loss_fn, run, budget_minutes, progress)
        accuracy = self.evaluate(model, drafter, head, features, test_ids)
        return finish(self, run, head, loaded, features, train_ids, test_ids, state, accuracy, output, command,
                      {"draft_model": label},
                      {"trained_on": f"on the target's greedy answers with tokens drafted by the {label}",
                       "targets": "labels are the drafts' acceptance probabilities min(1, p/q) (the target's p and "
                                  "the draft model's q at T = 1); the acceptance rows below are the draft model's "
                                  "own chain, the head's fit is `calibration` in training.json"})

    @torch.no_grad()
    def _examples(self, model, drafter, features, c: int, generator) -> tuple[torch.Tensor, torch.Tensor]:
        """(the draft model's final states at the drafted tokens' rows [n, H], their acceptance
        probabilities [n]) for conversation c, drafts sampled with `generator`."""
        text = features.tokens[c]
        first = features.prompt_lengths[c] - 1  # row t drafts the token at t + 1: answer rows from here
        rows = torch.arange(first, len(text) - 1)
        if not len(rows):  # a one-token answer: nothing drafted after the prompt
            return torch.zeros(0, drafter.config.hidden_size), torch.zeros(0)
        q = drafter(input_ids=text[None]).logits[0, rows].float().softmax(-1)
        p = (features.hidden[model.config.num_hidden_layers][c][rows].float() @ model.lm_head.weight.T.float()).softmax(-1)
        drafts = torch.multinomial(q, 1, generator=generator)[:, 0]
        accepted = (p.gather(1, drafts[:, None]) / q.gather(1, drafts[:, None]))[:, 0].clamp(max=1.0)
        kept = torch.rand(len(rows), generator=generator) < self.mixing  # the target's own token there, not scored
        mixed = text.clone()
        mixed[rows + 1] = torch.where(kept, text[rows + 1], drafts)
        states = drafter(input_ids=mixed[None], output_hidden_states=True).hidden_states[-1][0, rows + 1]
        return states[~kept].float(), accepted[~kept]

    @torch.no_grad()
    def evaluate(self, model, drafter, head, features, conversations) -> dict:
        """On held-out answers: the draft model's top-1 chain acceptance (what the head stops), and
        the head's calibration on sampled drafts: mean predicted vs actual acceptance probability
        and the binary cross-entropy of its predictions (the entropy of the labels is its floor)."""
        accepted, predicted, actual = [], [], []
        generator = torch.Generator().manual_seed(0)
        for c in conversations:
            drafted = drafter(input_ids=features.tokens[c][None]).logits[0].argmax(-1)
            accepted += run_lengths(drafted == features.greedy[c], features.prompt_lengths[c] - 1, self.steps_evaluated)
            states, labels = self._examples(model, drafter, features, c, generator)
            predicted.append(head.acceptance(states))
            actual.append(labels)
        predicted, actual = torch.cat(predicted).clamp(1e-6, 1 - 1e-6), torch.cat(actual)
        entropy = lambda x: -(actual * x.log() + (1 - actual) * (1 - x).log()).mean()  # noqa: E731
        return acceptance_summary(accepted, self.steps_evaluated) | {"calibration": {
            "mean_predicted": round(float(predicted.mean()), 4), "mean_actual": round(float(actual.mean()), 4),
            "cross_entropy": round(float(entropy(predicted)), 4),
            "label_entropy": round(float(entropy(actual.clamp(1e-6, 1 - 1e-6))), 4), "drafts": len(actual)}}


class PredictedRejection:
    """SpecDec++'s stopping rule (its Algorithm and code): while drafting, multiply the head's
    predicted acceptance of each drafted token; stop once 1 - that product, the predicted
    probability that at least one token so far is rejected, exceeds `threshold` h, and never
    before `minimum` tokens. The head reads a token's row, so its prediction comes with the
    forward that drafts the next token: the draft stopped after token n holds n tokens, the rule
    judging the first n - 1 (the code's order; the n-th costs no extra draft forward). The
    largest draft is the draft length's (its upper bound)."""

    def __init__(self, head: AcceptanceHead, layer: int, threshold: float, minimum: int):
        self.head, self.layers, self.threshold, self.minimum = head, (layer,), threshold, minimum
        self.kept = 1.0

    def start(self) -> None:
        self.kept = 1.0

    def stop(self, drafted: int, states: dict) -> bool:
        self.kept *= float(self.head.acceptance(states[self.layers[0]][-1]))
        return drafted >= self.minimum and 1 - self.kept > self.threshold
