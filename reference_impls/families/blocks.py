"""Building blocks of the trained draft heads (the heads themselves are their families', in `families/`).

`LayerConfig`, `Attention`, `MLP` and `RMSNorm` are a Llama decoder layer's parts, written out here
(not transformers' LlamaDecoderLayer) because EAGLE's layer drops the input norm, EAGLE-3's
attention takes a 2H-wide input and Kangaroo's adapter has no MLP; a `HeadCache` holds a draft
layer's keys and values for autoregressive and tree drafting, a `StepCache` EAGLE-3's training-time
test. `VocabularyHead` is the target's LM head over a draft vocabulary.
"""

from __future__ import annotations

import math

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F


# --------------------------------------------------------------------------------------------
# The pieces of a Llama-style decoder layer, as EAGLE's heads and Kangaroo's adapter use them


@dataclass(frozen=True)
class LayerConfig:
    hidden_size: int
    intermediate_size: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    rms_norm_eps: float
    rope_theta: float
    qkv_bias: bool = False

    @classmethod
    def from_dict(cls, config: dict) -> LayerConfig:
        """The layer's shape from a config.json; KeyError names a missing size, ValueError a size
        or constant no layer can have (a text, a boolean, a nan epsilon, a negative rope base)."""
        heads, hidden = config["num_attention_heads"], config["hidden_size"]
        rope = config.get("rope_parameters") or config.get("rope_scaling") or {}
        theta = config.get("rope_theta") or (rope.get("rope_theta") if isinstance(rope, dict) else None) or 10000.0
        sizes = {"hidden_size": hidden, "intermediate_size": config["intermediate_size"], "num_attention_heads": heads,
                 "num_key_value_heads": config.get("num_key_value_heads") or heads,
                 "head_dim": config.get("head_dim") or (hidden // heads if _size(heads) and _size(hidden) else None)}
        for name, value in sizes.items():
            if not _size(value):
                raise ValueError(f"{name} = {str(value)[:40]} is not a positive whole number")
        eps = config.get("rms_norm_eps", 1e-6)
        for name, value, high in (("rms_norm_eps", eps, 1), ("rope_theta", theta, math.inf)):
            if type(value) not in (int, float) or not (0 < value < high and math.isfinite(value)):
                raise ValueError(f"{name} = {str(value)[:40]} is not a number in (0, {high})")
        return cls(**sizes, rms_norm_eps=eps, rope_theta=float(theta),
                   qkv_bias=bool(config.get("qkv_bias", config.get("attention_bias", False))))

    def to_dict(self) -> dict:
        return {"hidden_size": self.hidden_size, "intermediate_size": self.intermediate_size,
                "num_attention_heads": self.num_attention_heads, "num_key_value_heads": self.num_key_value_heads,
                "head_dim": self.head_dim, "rms_norm_eps": self.rms_norm_eps, "rope_theta": self.rope_theta,
                "qkv_bias": self.qkv_bias, "hidden_act": "silu"}


def _size(value: object) -> bool:
    return type(value) is int and value > 0


class RMSNorm(nn.Module):
    def __init__(self, hidden: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        variance = x.float().pow(2).mean(-1, keepdim=True)
        return self.weight * (x.float() * torch.rsqrt(variance + self.eps)).to(x.dtype)


def rotate(x: torch.Tensor, positions: torch.Tensor, theta: float) -> torch.Tensor:
    """Rotary position embedding (Llama's half-split convention); x [B, heads, T, d], positions [B, T]."""
    half = x.shape[-1] // 2
    inverse = theta ** (-torch.arange(half, device=x.device, dtype=torch.float32) / half)
    angles = positions[:, None, :, None].float() * inverse  # [B, 1, T, half]
    cos, sin = torch.cat([angles.cos()] * 2, -1).to(x.dtype), torch.cat([angles.sin()] * 2, -1).to(x.dtype)
    rotated = torch.cat([-x[..., half:], x[..., :half]], -1)
    return x * cos + rotated * sin


class HeadCache:
    """Keys and values of the draft layer: [B, kv_heads, S, d], appended to as the head drafts."""

    def __init__(self):
        self.keys: torch.Tensor | None = None
        self.values: torch.Tensor | None = None

    def __len__(self) -> int:
        return 0 if self.keys is None else self.keys.shape[-2]

    def append(self, keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.keys is not None:
            keys, values = torch.cat([self.keys, keys], -2), torch.cat([self.values, values], -2)
        self.keys, self.values = keys, values
        return keys, values

    def keep(self, rows: list[int]) -> None:
        """Keep only these cached positions, in this order (a truncation or an accepted tree path)."""
        if self.keys is not None:
            index = torch.tensor(rows, dtype=torch.long, device=self.keys.device)
            self.keys, self.values = self.keys.index_select(-2, index), self.values.index_select(-2, index)


class StepCache:
    """Keys and values of EAGLE-3's training-time test, one [B, kv, T, d] entry per unrolled step.
    Row t of step 0 attends causally to step 0's rows; row t of step k >= 1 also to its own row
    of steps 1..k (its drafted ancestors, and itself). Those extra terms are diagonals, so they are
    row-wise products, as in EAGLE-3's code, not T x T blocks almost entirely masked out. A row's
    later steps need nothing of other rows' later steps, so they may continue only `rows` (step-0
    indices, set after step 0) and compute exactly what they would among all rows."""

    def __init__(self):
        self.keys: list[torch.Tensor] = []
        self.values: list[torch.Tensor] = []
        self.rows: torch.Tensor | None = None

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, groups: int) -> torch.Tensor:
        self.keys.append(k)
        self.values.append(v)
        share = lambda x: x.repeat_interleave(groups, dim=1)  # noqa: E731 - grouped-query heads, as SDPA's enable_gqa
        length, scale = self.keys[0].shape[-2], q.shape[-1] ** -0.5
        every = torch.arange(length, device=q.device)
        causal = (every if self.rows is None else self.rows)[:, None] >= every
        scores = (q @ share(self.keys[0]).transpose(-1, -2) * scale).masked_fill(~causal, float("-inf"))
        own = [(q * share(key)).sum(-1, keepdim=True) * scale for key in self.keys[1:]]
        weights = torch.cat([scores, *own], -1).softmax(-1)
        out = weights[..., :length] @ share(self.values[0])
        for step, value in enumerate(self.values[1:]):
            out = out + weights[..., length + step : length + step + 1] * share(value)
        return out


class Attention(nn.Module):
    def __init__(self, config: LayerConfig, input_width: int):
        super().__init__()
        self.config = config
        q, kv = config.num_attention_heads * config.head_dim, config.num_key_value_heads * config.head_dim
        self.q_proj = nn.Linear(input_width, q, bias=config.qkv_bias)
        self.k_proj = nn.Linear(input_width, kv, bias=config.qkv_bias)
        self.v_proj = nn.Linear(input_width, kv, bias=config.qkv_bias)
        self.o_proj = nn.Linear(q, config.hidden_size, bias=False)

    def forward(self, x, positions, cache: HeadCache | StepCache | None = None, mask: torch.Tensor | None = None):
        """x [B, T, in]. Without `mask` the T new rows attend causally after everything cached;
        `mask` [T, cached + T] (True: visible) gives tree drafts their ancestors only. A
        `StepCache` attends as EAGLE-3's training-time test does (no mask)."""
        c, (batch, length, _) = self.config, x.shape
        q = self.q_proj(x).view(batch, length, c.num_attention_heads, c.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(batch, length, c.num_key_value_heads, c.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(batch, length, c.num_key_value_heads, c.head_dim).transpose(1, 2)
        q, k = rotate(q, positions, c.rope_theta), rotate(k, positions, c.rope_theta)
        if isinstance(cache, StepCache):
            out = cache.attend(q, k, v, c.num_attention_heads // c.num_key_value_heads)
            return self.o_proj(out.transpose(1, 2).reshape(batch, length, -1))
        past = len(cache) if cache is not None else 0
        if cache is not None:
            k, v = cache.append(k, v)
        if mask is None and past:
            mask = torch.ones(length, past + length, dtype=torch.bool, device=x.device).tril(past)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=mask is None and length > 1,
                                             enable_gqa=c.num_key_value_heads != c.num_attention_heads)
        return self.o_proj(out.transpose(1, 2).reshape(batch, length, -1))


class MLP(nn.Module):
    def __init__(self, config: LayerConfig):
        super().__init__()
        self.gate_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.up_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.down_proj = nn.Linear(config.intermediate_size, config.hidden_size, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class VocabularyHead(nn.Module):
    """The target's LM head over the token ids `ids` only; every other token gets -inf
    (probability 0), so a drafter using it never proposes them and its q is exact."""

    def __init__(self, lm_weight: torch.Tensor, ids: torch.Tensor):
        super().__init__()
        self.ids, self.vocab = ids, lm_weight.shape[0]
        self.weight = lm_weight.detach()[ids]  # a copy of the rows: contiguous for the product

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = x.new_full((*x.shape[:-1], self.vocab), -torch.inf)
        out[..., self.ids] = F.linear(x, self.weight)
        return out


def eagle3_layers(num_layers: int) -> tuple[int, int, int]:
    """The target states EAGLE-3 fuses (`kv.forward`'s numbering): the inputs of decoder layers
    2, N//2 and N-3 (EAGLE's code and vLLM's default)."""
    return (2, num_layers // 2, num_layers - 3)
