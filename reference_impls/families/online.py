"""Online speculative decoding (Liu et al. 2024): the drafter distilled on the queries it serves.

A served drafter meets queries unlike its training data. OSD keeps, for every request, the
positions where the draft and the target disagreed, with the target's distribution there (the
verification forward computed it: no extra target work), and every `interval` requests takes a
distillation step on them and empties the buffer:

    for each request:  generate by speculative decoding with the current drafter q_θ;
                       R <- (position t, p(· | x_<t)) at every step's first rejected draft token
    append R to the buffer Q;  after `interval` requests:
                       θ <- θ - η ∇θ mean over Q of KL(p || q_θ)  (forward KL, the target's p the teacher);
                       Q <- []

Settings from its code (LiuXiaoxuanPKU/OSD: bash_scripts/*/online.sh, distill/distill_trainer.py):
5 proposed tokens, an update every 8 requests, one AdamW step at a constant learning rate of 1e-4
without weight decay, the loss on the mismatched positions only. The forward KL is taken over the
drafter's support: a distilled drafter with a restricted head (`families.distillspec`) gives zero
probability outside its vocabulary, where KL(p || q) is infinite whatever θ; the cross-entropy
-Σ_S p log q_θ over its vocabulary S has the same gradient as KL to p restricted to S.

Only the drafter's own weights learn (never the target's, which a drafter may share: embeddings,
norm, head), in memory: the shipped weights on disk never change. Verification is speculative
sampling with the drafter's q of the moment, so the output is the target's whatever the drafter
has become; the drafter changes only between requests, when its cache is rebuilt anyway.
"""

from __future__ import annotations

import torch

from specatlas.impls.engine.cpu_kernels import repack
from specatlas.impls.engine.drafting import ModelDrafter
from specatlas.impls.registry import METHODS

# Its code's defaults (its definition's numbers, `registry.py`; the learning rate is stated there in words).
_PAPER = METHODS["liu2024online"].paper
PROPOSED, INTERVAL, LEARNING_RATE = _PAPER.proposed, _PAPER.interval, 1e-4


class OnlineDistillation(ModelDrafter):
    """A draft model (a chain) whose `trainable` parameters are distilled online on what it serves."""

    def __init__(self, model, trainable, label: str = "draft model", interval: int = INTERVAL,
                 learning_rate: float = LEARNING_RATE):
        super().__init__(model, label=label)
        self.trainable = [parameter.requires_grad_(True) for parameter in trainable]
        self.optimizer = torch.optim.AdamW(self.trainable, lr=learning_rate, weight_decay=0.0)
        self.interval = interval
        self.buffer: list[tuple[tuple[int, ...], list[tuple[int, torch.Tensor]]]] = []  # Q: (text, R) per request
        self.text: tuple[int, ...] = ()  # the request being served
        self.mismatches: list[tuple[int, torch.Tensor]] = []  # its R
        self.updates = 0

    def start(self, prompt, prefill):
        if self.text:  # the request served before this one
            self.buffer.append((self.text, self.mismatches))
        self.text, self.mismatches = tuple(prompt), []
        if len(self.buffer) >= self.interval:
            self.update()
        super().start(prompt, prefill)

    def observe(self, step):
        self.text = step.committed
        if len(step.accepted) < step.draft.proposed:  # a draft token was rejected: the target's token replaced it
            row = len(step.accepted)  # rows: 0 after the pending token, i + 1 after draft node i
            self.mismatches.append((len(step.committed) - 1, step.logits[row].float().softmax(-1)))

    def update(self) -> float | None:
        """One distillation step on the buffer, which it empties; the mean loss (None: no mismatch)."""
        served, self.buffer = [(text, rows) for text, rows in self.buffer if rows], []
        if not served:
            return None
        with torch.inference_mode(False), torch.enable_grad():
            losses = []
            for text, mismatches in served:
                positions = torch.tensor([position - 1 for position, _ in mismatches])  # the rows predicting them
                ids = torch.tensor([text[: int(positions.max()) + 1]], device=self.model.device)
                log_q = self.model(input_ids=ids).logits[0, positions].float().log_softmax(-1)
                p = torch.stack([row for _, row in mismatches]).clone().to(log_q.device)
                losses.append(-(p * log_q.masked_fill(log_q.isinf(), 0)).sum(-1))  # over the drafter's support
            loss = torch.cat(losses).mean()
            grads = torch.autograd.grad(loss, self.trainable)
            for parameter, grad in zip(self.trainable, grads):
                parameter.grad = grad
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
        repack(self.model)
        self.updates += 1
        return float(loss)

    def describe(self):
        return f"{self.label}, distilled online (a step every {self.interval} requests)"
