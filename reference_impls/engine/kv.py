"""One forward pass over new tokens (chain or tree) and KV-cache rollback.

The cache API moved during transformers 5.x (the `past_key_values` argument became `cache`;
`DynamicCache.crop` now takes a negative count of tokens to drop instead of a target length).
We only rely on `cache.layers[i].keys/values` ([batch, heads, seq, head_dim]), which is stable
across 5.x, and slice those ourselves.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from functools import lru_cache

import torch


class Unsupported(ValueError):
    """What this model cannot run (e.g. a tree draft on sliding-window layers); one line for the user."""


@lru_cache(maxsize=None)
def cache_argument(model_type: type) -> str:
    return "cache" if "cache" in inspect.signature(model_type.forward).parameters else "past_key_values"


def new_cache(model):
    """A cache for `model`. Sliding-window layers (Mistral, Gemma-2/3, Phi-3 configs) normally
    drop rows that fall out of the window as soon as a forward appends new ones; recording the
    past keeps them until `keep_rows` has rolled a verification back."""
    from transformers import DynamicCache

    cache = DynamicCache(config=model.config)
    for layer in cache.layers:
        if getattr(layer, "is_sliding", False):
            layer.activate_past_recording()
    return cache


def cache_length(cache, layer: int = 0) -> int:
    return cache.get_seq_length(layer)


def keep_rows(cache, prefix: int, rows: list[int]) -> None:
    """Keep the first `prefix` cached positions, then only `rows` (offsets after the prefix, in order).

    A rejected chain is a plain truncation (rows == 0..m-1); a tree keeps its accepted path, moved
    down in place over the rejected rows (only the kept rows are copied, never the prefix).
    """
    contiguous = rows == list(range(len(rows)))
    offsets = None if contiguous else torch.tensor(rows)
    for layer in cache.layers:
        if not hasattr(layer, "keys") or layer.keys is None:
            continue
        # A sliding-window layer stores only its latest rows: position `first` is its row 0.
        first = layer.get_seq_length() - layer.keys.shape[-2]
        kept = prefix - first
        if not contiguous:
            index = (offsets + kept).to(layer.keys.device)
            with torch.inference_mode():  # the cache's tensors may be inference tensors, written in place only there
                layer.keys[..., kept : kept + len(rows), :] = layer.keys.index_select(-2, index)
                layer.values[..., kept : kept + len(rows), :] = layer.values.index_select(-2, index)
        layer.keys = layer.keys[..., : kept + len(rows), :]
        layer.values = layer.values[..., : kept + len(rows), :]
        if getattr(layer, "is_sliding", False):
            # Its length is a counter, not the stored rows: set it, then drop what left the window.
            layer.cumulative_length = prefix + len(rows)
            layer.keys = layer.keys[..., -(layer.sliding_window - 1) :, :]
            layer.values = layer.values[..., -(layer.sliding_window - 1) :, :]


def truncate(cache, length: int) -> None:
    keep_rows(cache, length, [])


def copy_rows(cache, start: int, layers) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Copies of the keys and values of positions start.. in `layers` (full-attention layers)."""
    return [(cache.layers[layer].keys[..., start:, :].clone(), cache.layers[layer].values[..., start:, :].clone())
            for layer in layers]


def append_rows(cache, rows: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
    """Append keys and values (`copy_rows`'s) to the first len(rows) layers."""
    for layer, (keys, values) in zip(cache.layers, rows):
        layer.update(keys, values)


def is_chain(parents: list[int]) -> bool:
    return all(parent == i - 1 for i, parent in enumerate(parents))


def depths(parents: list[int]) -> list[int]:
    """Depth of each node, 1 for children of the root (parents[i] == -1); parents[i] < i."""
    out: list[int] = []
    for parent in parents:
        out.append(1 if parent < 0 else out[parent] + 1)
    return out


def tree_mask(parents: list[int], new: int, prefix: int, dtype: torch.dtype, device) -> torch.Tensor:
    """Additive attention mask [1, 1, new, prefix + len(parents)] for the last `new` tree rows.

    Every row sees the whole prefix, its ancestors and itself: one forward scores every branch
    as if it were the only continuation.
    """
    size = len(parents)
    parent = torch.tensor(parents)
    attached, up = (parent >= 0)[:, None], parent.clamp(min=0)
    sees = torch.eye(size, dtype=torch.bool)
    # Each pass adds one more generation of ancestors (a row takes its parent's row): a few
    # whole-tree tensor ops per level instead of a few per node.
    for _ in range(max(depths(parents), default=1) - 1):
        sees = sees | (sees[up] & attached)
    mask = torch.zeros(new, prefix + size, dtype=dtype)
    mask[:, prefix:].masked_fill_(~sees[size - new :], torch.finfo(dtype).min)
    return mask.to(device)[None, None]


@dataclass
class ForwardOutput:
    logits: torch.Tensor  # [new, vocab] (the last row only with `last_only`)
    hidden_states: dict[int, torch.Tensor]  # layer -> [new, hidden], for the layers asked for


def forward(model, cache, input_ids: list[int], tree: list[int] | None = None, hidden_layers=(),
            last_only: bool = False, embed=None) -> ForwardOutput:
    """Run `input_ids` after the cached positions and append them to the cache.

    `tree`: parents of the rows after the fully visible prefix (the last len(input_ids) of them
    are new, earlier ones are already cached), -1 for rows attached to the prefix. None means a
    plain causal chain. Positions follow depth in the tree. `hidden_layers`: indices into
    transformers' `hidden_states`, asked for by index so only those are kept. The one numbering
    of this package: decoder layers count from 0 (`model.model.layers[l]`, layer views, skipped
    layers); hidden-state index h is the state after the first h decoder layers, i.e. the input
    of decoder layer h (0: the embeddings; num_hidden_layers: the final state, normed in
    Llama-family models). `last_only`: logits of the last row only (a prefill's vocabulary
    projection of every prompt token costs as much as the layers). `embed`: ids [1, n] -> the
    input embeddings [1, n, hidden], for rows that are not vocabulary tokens (PaSS's look-ahead
    tokens); None: the model embeds the ids itself.
    """
    device = model.device
    past = cache_length(cache)
    kwargs = {cache_argument(type(model)): cache, "use_cache": True}
    ids = torch.tensor([input_ids], device=device)
    if tree is not None and not (is_chain(tree) and len(tree) == len(input_ids)):
        if any(getattr(layer, "is_sliding", False) for layer in cache.layers):
            raise Unsupported("token-tree drafts need full attention in every layer; this model has sliding-window "
                             "layers (use a method with chain drafts, e.g. prompt lookup)")
        prefix = past + len(input_ids) - len(tree)
        node_depth = depths(tree)[len(tree) - len(input_ids) :]
        kwargs["position_ids"] = torch.tensor([[prefix - 1 + d for d in node_depth]], device=device)
        kwargs["attention_mask"] = tree_mask(tree, len(input_ids), prefix, model.dtype, device)
    if last_only:
        kwargs["logits_to_keep"] = 1
    layers = sorted(set(hidden_layers))
    inputs = {"input_ids": ids} if embed is None else {"inputs_embeds": embed(ids)}
    out = model(**inputs, output_hidden_states=layers or False, **kwargs)
    hidden = {layer: out.hidden_states[layer][0] for layer in layers}
    return ForwardOutput(out.logits[0][-1:] if last_only else out.logits[0], hidden)
