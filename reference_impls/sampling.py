"""Turning logits into the distribution a token is drawn from, and the source of all randomness.

The same `Sampling` is applied to target and drafter logits, which is what makes rejection
sampling lossless for the *tempered, nucleus-truncated* target distribution.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Sampling:
    temperature: float = 0.0  # 0 means greedy: the distribution is a point mass on the argmax
    top_p: float = 1.0

    def __post_init__(self):
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top-p must be in (0, 1], got {self.top_p}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    def probs(self, logits: torch.Tensor) -> torch.Tensor:
        """Distribution over the vocabulary for each row of `logits` (last dim), in float32 or better."""
        if logits.dtype != torch.float64:
            logits = logits.float()
        if self.greedy:
            return torch.nn.functional.one_hot(logits.argmax(-1), logits.shape[-1]).to(logits.dtype)
        probs = torch.softmax(logits / self.temperature, dim=-1)
        if self.top_p < 1:
            sorted_probs, order = probs.sort(dim=-1, descending=True)
            # Keep the smallest head of the sorted list whose mass reaches top_p (always the top token).
            outside = sorted_probs.cumsum(-1) - sorted_probs >= self.top_p
            sorted_probs = sorted_probs.masked_fill(outside, 0)
            probs = torch.zeros_like(probs).scatter(-1, order, sorted_probs)
            probs = probs / probs.sum(-1, keepdim=True)
        return probs


class Randomness:
    """Every random decision of a decoder goes through here, so tests can enumerate them exactly."""

    def __init__(self, seed: int | None = None):
        self.generator = torch.Generator()
        if seed is None:
            self.generator.seed()
        else:
            self.generator.manual_seed(seed)

    def bernoulli(self, p: float) -> bool:
        return p >= 1 or (p > 0 and torch.rand((), generator=self.generator).item() < p)

    def categorical(self, probs: torch.Tensor) -> int:
        return int(torch.multinomial(probs.detach().float().cpu(), 1, generator=self.generator))


def without(probs: torch.Tensor, tokens: list[int]) -> torch.Tensor:
    """`probs` conditioned on not drawing any of `tokens` (sampling without replacement)."""
    if not tokens:
        return probs
    probs = probs.clone()
    probs[tokens] = 0
    return probs / probs.sum()
