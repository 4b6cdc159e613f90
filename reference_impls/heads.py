"""Trained draft heads that read the target's hidden states: Medusa (v1 / v2), Hydra, EAGLE-1/2 and EAGLE-3.

Each module's `state_dict()` is the published checkpoint layout as it is (see
reference_impls/CHECKPOINT_FORMATS.md), so saving and loading need no key renames:

- `MedusaHeads`: head k is `x + SiLU(W x + b)` ResBlocks on the target's final (normed) hidden state
  at position t, predicting the token at t + k + 2 (the target's own head predicts t + 1). v1 ends
  each head with its own vocabulary projection (`{k}.{L}.weight`); v2 reuses the target's LM head.
- `EagleHead` (EAGLE-1, also EAGLE-2's drafter): `fc(concat(embed(token[t+1]), feature[t]))`
  through one Llama decoder layer without input norm predicts feature[t+1]; the target's LM head
  turns a feature into logits.
- `Eagle3Head`: the target's low/mid/high-layer states fused by `fc` (3H -> H); the midlayer
  attends over concat(input_layernorm(embedding), hidden_norm(feature)) (2H wide) and its output is
  both the next step's feature and, through its own norm and LM head, logits over a draft
  vocabulary mapped to target ids by `d2t` (target = draft + d2t[draft]).
- `KangarooAdapter`: Kangaroo's adapter on the target's shallow exit (the input of layer l):
  `norm(x + attention(input_layernorm(x)))`, one attention layer and two norms, read by the
  target's LM head. Keys as its released `AdapterModel` (`layers.0.input_layernorm`,
  `layers.0.self_attn.*`, `norm`).

The decoder layer is written out here (not transformers' LlamaDecoderLayer) because EAGLE's layer
drops the input norm and EAGLE-3's attention takes a 2H-wide input; a `HeadCache` holds the
draft layer's keys and values for autoregressive and tree drafting.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F


# --------------------------------------------------------------------------------------------
# Medusa


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


# --------------------------------------------------------------------------------------------
# One Llama-style decoder layer, as EAGLE's heads use it


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
        heads = config["num_attention_heads"]
        rope = config.get("rope_parameters") or config.get("rope_scaling") or {}
        theta = config.get("rope_theta") or rope.get("rope_theta") or 10000.0
        return cls(config["hidden_size"], config["intermediate_size"], heads,
                   config.get("num_key_value_heads") or heads,
                   config.get("head_dim") or config["hidden_size"] // heads,
                   config.get("rms_norm_eps", 1e-6), float(theta),
                   bool(config.get("qkv_bias", config.get("attention_bias", False))))

    def to_dict(self) -> dict:
        return {"hidden_size": self.hidden_size, "intermediate_size": self.intermediate_size,
                "num_attention_heads": self.num_attention_heads, "num_key_value_heads": self.num_key_value_heads,
                "head_dim": self.head_dim, "rms_norm_eps": self.rms_norm_eps, "rope_theta": self.rope_theta,
                "qkv_bias": self.qkv_bias, "hidden_act": "silu"}


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


class EagleLayer(nn.Module):
    """EAGLE-1's decoder layer 0: a Llama layer whose input norm is dropped (fc already mixes the inputs)."""

    def __init__(self, config: LayerConfig):
        super().__init__()
        self.self_attn = Attention(config, config.hidden_size)
        self.mlp = MLP(config)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)

    def forward(self, x, positions, cache=None, mask=None):
        x = x + self.self_attn(x, positions, cache, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class Eagle3MidLayer(nn.Module):
    """EAGLE-3's layer: attention over concat(input_layernorm(embedding), hidden_norm(feature)), residual from the feature."""

    def __init__(self, config: LayerConfig):
        super().__init__()
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.hidden_norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.self_attn = Attention(config, 2 * config.hidden_size)
        self.mlp = MLP(config)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)

    def forward(self, embeds, hidden, positions, cache=None, mask=None):
        both = torch.cat([self.input_layernorm(embeds), self.hidden_norm(hidden)], -1)
        hidden = hidden + self.self_attn(both, positions, cache, mask)
        return hidden + self.mlp(self.post_attention_layernorm(hidden))


# --------------------------------------------------------------------------------------------
# EAGLE heads


class EagleHead(nn.Module):
    """EAGLE-1/2 draft head. `forward(embeds, features, positions)`: embeds[t] is the target's
    embedding of token t+1, features[t] the target's (or the head's own) feature at t; returns
    the predicted features at t+1, which the target's LM head turns into logits."""

    def __init__(self, config: LayerConfig, fc_bias: bool = True):
        super().__init__()
        self.config = config
        self.fc = nn.Linear(2 * config.hidden_size, config.hidden_size, bias=fc_bias)
        self.layers = nn.ModuleList([EagleLayer(config)])

    def forward(self, embeds, features, positions, cache: HeadCache | None = None, mask=None):
        return self.layers[0](self.fc(torch.cat([embeds, features], -1)), positions, cache, mask)


class Eagle3Head(nn.Module):
    """EAGLE-3 draft head. `features` are either the target's fused states [.., 3 * H_target]
    (first step) or the head's own previous outputs [.., H]; `fc` applies only to the former.
    Returns (next features [.., H], draft-vocabulary logits)."""

    def __init__(self, config: LayerConfig, target_hidden: int, vocab_size: int, draft_vocab_size: int):
        super().__init__()
        self.config = config
        self.fc = nn.Linear(3 * target_hidden, config.hidden_size, bias=False)
        self.midlayer = Eagle3MidLayer(config)
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.lm_head = nn.Linear(config.hidden_size, draft_vocab_size, bias=False)
        # Identity maps until trained: draft id i is target id i.
        self.register_buffer("d2t", torch.zeros(draft_vocab_size, dtype=torch.long))
        t2d = torch.zeros(vocab_size, dtype=torch.bool)
        t2d[:draft_vocab_size] = True
        self.register_buffer("t2d", t2d)

    def forward(self, embeds, features, positions, cache: HeadCache | None = None, mask=None):
        hidden = self.hidden(embeds, features, positions, cache, mask)
        return hidden, self.logits(hidden)

    def hidden(self, embeds, features, positions, cache: HeadCache | None = None, mask=None):
        """The next features only (a drafter projects just the rows it ranks)."""
        if features.shape[-1] != self.config.hidden_size:
            features = self.fc(features)
        return self.midlayer(embeds, features, positions, cache, mask)

    def logits(self, hidden):
        return self.lm_head(self.norm(hidden))

    def to_target(self, draft_ids: torch.Tensor) -> torch.Tensor:
        return draft_ids + self.d2t[draft_ids]


# --------------------------------------------------------------------------------------------
# Kangaroo


class KangarooAttentionBlock(nn.Module):
    """The adapter's one "decoder layer": input norm and attention with a residual, no MLP."""

    def __init__(self, config: LayerConfig):
        super().__init__()
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.self_attn = Attention(config, config.hidden_size)

    def forward(self, x, positions, cache=None, mask=None):
        return x + self.self_attn(self.input_layernorm(x), positions, cache, mask)


class KangarooAdapter(nn.Module):
    """Kangaroo's adapter: maps the shallow exit's states [B, T, H] to states the target's LM head
    reads. `final_norm` (the target's) initialises `norm` and the attention output starts at
    zero, so an untrained adapter is exactly the plain early exit (norm + LM head after layer l):
    training starts from that drafter rather than from noise. `draft_vocab` (ours, not in its
    released layout): the target token ids the adapter was trained to rank, which it drafts from
    (trained over the most frequent tokens only, its logits for the others mean nothing)."""

    def __init__(self, config: LayerConfig, final_norm: torch.Tensor | None = None, draft_vocab_size: int = 0):
        super().__init__()
        self.config = config
        self.layers = nn.ModuleList([KangarooAttentionBlock(config)])
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        if draft_vocab_size:
            self.register_buffer("draft_vocab", torch.zeros(draft_vocab_size, dtype=torch.long))
        if final_norm is not None:
            with torch.no_grad():
                self.norm.weight.copy_(final_norm)
                self.layers[0].self_attn.o_proj.weight.zero_()

    def forward(self, x, positions, cache: HeadCache | None = None, mask=None):
        return self.norm(self.layers[0](x, positions, cache, mask))


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
