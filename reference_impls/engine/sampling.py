"""Turning logits into the distribution a token is drawn from, and the source of all randomness.

The same `Sampling` is applied to target and drafter logits, which is what makes rejection
sampling lossless for the *tempered, truncated* target distribution. Temperature, top-k and
top-p follow transformers' logits warpers, in the order `generate` applies them.
"""

from __future__ import annotations

import hashlib
import math
import secrets
from dataclasses import dataclass, field

import torch


# Below this temperature logits / T can overflow float32 (|logit| > 3.4e8 at 1e-30; a denormal T
# overflows every logit), and softmax then returns NaNs. Above it, and below ~1e-4, the tempered
# distribution is already a point mass on the argmax at float32's resolution, so greedy decoding
# is exactly what such a temperature asks for.
POINT_MASS_BELOW = 1e-30


@dataclass(frozen=True)
class Sampling:
    temperature: float = 0.0  # 0 means greedy: the distribution is a point mass on the argmax
    top_p: float = 1.0
    top_k: int = 0  # 0: no top-k cut
    # The temperature asked for when it was below POINT_MASS_BELOW and decoding is greedy instead.
    asked: float | None = field(default=None, compare=False, repr=False)

    def __post_init__(self):
        if not (self.temperature >= 0 and math.isfinite(self.temperature)):
            raise ValueError(f"temperature must be a finite number >= 0, got {self.temperature}")
        if 0 < self.temperature < POINT_MASS_BELOW:
            object.__setattr__(self, "asked", self.temperature)
            object.__setattr__(self, "temperature", 0.0)
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top-p must be in (0, 1], got {self.top_p}")
        if self.top_k < 0:
            raise ValueError(f"top-k must be >= 0, got {self.top_k}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    def probs(self, logits: torch.Tensor) -> torch.Tensor:
        """Distribution over the vocabulary for each row of `logits` (last dim), in float32 or better."""
        if logits.dtype != torch.float64:
            logits = logits.float()
        if self.greedy:
            return torch.nn.functional.one_hot(logits.argmax(-1), logits.shape[-1]).to(logits.dtype)
        scores = logits / self.temperature
        if 0 < self.top_k < scores.shape[-1]:
            # Every token tied with the k-th best stays, as in transformers' TopKLogitsWarper.
            kth = scores.topk(self.top_k, dim=-1).values[..., -1:]
            scores = scores.masked_fill(scores < kth, -torch.inf)
        if self.top_p < 1:
            # Drop the least likely tokens while the mass dropped stays <= 1 - top_p (the most likely
            # token always stays): transformers' TopPLogitsWarper, computed the same way.
            ascending, order = scores.sort(dim=-1, descending=False)
            dropped = ascending.softmax(-1).cumsum(-1) <= 1 - self.top_p
            dropped[..., -1] = False
            scores = scores.masked_fill(dropped.scatter(-1, order, dropped), -torch.inf)
        return scores.softmax(-1)

    def notice(self) -> str | None:
        """Why decoding is greedy although a temperature was asked for, or None."""
        if self.asked is None:
            return None
        return (f"temperature {self.asked:g} is below {POINT_MASS_BELOW:g}, where logits / T overflow: "
                "a point mass on the most likely token, decoded greedily")

    def describe(self) -> str:
        if self.greedy:
            return "greedy"
        cuts = (f", top-k {self.top_k}" if self.top_k else "") + (f", top-p {self.top_p:g}" if self.top_p < 1 else "")
        return f"temperature {self.temperature:g}{cuts}"


class Randomness:
    """Every random decision of a decoder goes through here, keyed by what it decides.

    A draw is a pure function of (seed, key), where the key names the absolute position in the
    text and the purpose (e.g. `(57, "token")`: the target's token at position 57). So a decision
    does not depend on how many draws came before it, which is what the timing-dependent draft
    length would otherwise change. Tests subclass it to enumerate every branch exactly.
    """

    def __init__(self, seed: int | None = None):
        self.seed = secrets.randbits(63) if seed is None else seed

    def uniform(self, *key) -> float:
        """A uniform number in [0, 1) determined by (seed, key)."""
        digest = hashlib.blake2b(repr((self.seed, *key)).encode(), digest_size=8).digest()
        return (int.from_bytes(digest, "big") >> 11) / 2.0**53

    def bernoulli(self, p: float, *key) -> bool:
        return p >= 1 or (p > 0 and self.uniform("bernoulli", *key) < p)

    def categorical(self, probs: torch.Tensor, *key) -> int:
        """Inverse-CDF draw: the token whose cumulative-probability interval holds u."""
        cdf = probs.detach().double().cpu().cumsum(-1)
        threshold = self.uniform("categorical", *key) * float(cdf[-1])
        token = int(torch.searchsorted(cdf, torch.tensor([threshold], dtype=cdf.dtype), right=True))
        return min(token, int(probs.nonzero()[-1]))  # rounding at the top end: the last possible token


def without(probs: torch.Tensor, tokens: list[int]) -> torch.Tensor:
    """`probs` conditioned on not drawing any of `tokens` (sampling without replacement)."""
    if not tokens:
        return probs
    probs = probs.clone()
    probs[tokens] = 0
    return probs / probs.sum()
