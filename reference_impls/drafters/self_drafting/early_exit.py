"""Drafting by early exit: the target's first layers, its norm and LM head, on its own cache."""

from __future__ import annotations

import torch

from specatlas.impls.engine.drafting import Draft, Drafter
from specatlas.impls.engine.layer_view import LayerView


class EarlyExit(Drafter):
    """Self-speculative drafting by early exit: the target's first `exit_layer` layers, its norm
    and head draft a chain on the target's own cache (no draft model, no second cache or
    prefill) in a scratch: the draft rows are rolled back before the full model verifies (Draft &
    Verify's discipline, which holds for any subset of layers)."""

    def __init__(self, model, exit_layer: int):
        self.view, self.target = LayerView(model, range(exit_layer)), None

    def start(self, prompt, prefill):
        self.target = prefill.target

    def propose(self, context, depth, sampling, rng):
        token, tokens, q = context[-1], [], []
        with self.target.scratch() as scratch:
            for level in range(depth):
                logits = scratch.forward(self.view, [token], last_only=True).logits[-1]
                if sampling.greedy:
                    token = int(logits.argmax())
                else:
                    q.append(sampling.probs(logits))
                    token = rng.categorical(q[-1], len(context) + level, "draft")
                tokens.append(token)
        return Draft.chain(tokens, q=torch.stack(q) if q else None)

    def describe(self):
        return f"early exit after the target's {self.view.describe()} (shared cache)"
