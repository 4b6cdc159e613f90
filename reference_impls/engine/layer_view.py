"""Self-speculation: running some of the target's own decoder layers on the target's own KV cache.

A `LayerView` is a target forward (`kv.forward`'s signature) that runs only `layers` (indices
of the target's decoder layers, in order), then the target's final norm and LM head: an early
exit when `layers` is a prefix 0..l-1 (LayerSkip, Kangaroo's shallow sub-network), layer skipping
otherwise (Draft & Verify). The view's i-th layer is the target's layer `layers[i]` and keeps its
`layer_idx`, so it reads and writes that layer's slot of the shared cache: no second cache, no
second prefill. Drafters run views inside the session's scratch (`drafting.TargetLayers`), which
truncates the cache to the committed text when it closes (a skipped layer's input differs from
the full model's, so draft rows must not stay). After an early exit at layer l the rows of layers
< l are exactly the full model's: `resume` finishes a forward from layer l, and an early-exit
drafter hands its rows to the verification in the draft (`drafting.ExitStates`,
`forward_from_exit`), so they are computed once.

Supports Llama-family layouts (model.model.embed_tokens / layers / norm / rotary_emb, lm_head)
with full attention in every layer.
"""

from __future__ import annotations

import torch

from specatlas.impls.engine import kv
from specatlas.impls.engine.drafting import ExitStates


def _parts(model):
    inner = getattr(model, "model", None)
    if inner is None or not all(hasattr(inner, name) for name in ("embed_tokens", "layers", "norm", "rotary_emb")):
        raise ValueError(f"{type(model).__name__} is not a Llama-family model (model.model.layers ...): "
                         "it cannot run a subset of its layers")
    if any(kind != "full_attention" for kind in getattr(model.config, "layer_types", None) or ()):
        raise ValueError("layer views need full attention in every layer")
    return inner


def run_layers(model, cache, hidden: torch.Tensor, past: int, layers, tree: list[int] | None = None,
               hidden_layers=(), last_only: bool = False, head: bool = True) -> kv.ForwardOutput:
    """Run `hidden` ([new, hidden], the input of layers[0]) through `layers` of `model` after `past`
    committed positions, then (unless `head` is False: logits None) the final norm and LM head.
    `tree` as in `kv.forward` (None: a chain). `hidden_layers` as in `kv.forward` (h: after the
    first h decoder layers, i.e. after layer h - 1; num_hidden_layers: the normed state); only
    what was computed is returned."""
    inner = _parts(model)
    new = hidden.shape[0]
    tree = tree if tree is not None else list(range(-1, new - 1))
    prefix = past + new - len(tree)
    depth = kv.depths(tree)[len(tree) - new :]
    position_ids = torch.tensor([[prefix - 1 + d for d in depth]], device=hidden.device)
    mask = kv.tree_mask(tree, new, prefix, hidden.dtype, hidden.device)
    x = hidden[None]
    rotary = inner.rotary_emb(x, position_ids=position_ids)
    states = {}
    layers = list(layers)
    if layers and 0 in hidden_layers and layers[0] == 0:
        states[0] = hidden
    for layer in layers:
        x = inner.layers[layer](x, attention_mask=mask, position_ids=position_ids, cache=cache, use_cache=True,
                                position_embeddings=rotary)
        if layer + 1 in hidden_layers and layer + 1 < model.config.num_hidden_layers:
            states[layer + 1] = x[0]
    if not head:
        return kv.ForwardOutput(None, states)
    x = inner.norm(x)
    if model.config.num_hidden_layers in hidden_layers and layers and layers[-1] == model.config.num_hidden_layers - 1:
        states[model.config.num_hidden_layers] = x[0]
    logits = model.lm_head(x[0, -1:] if last_only else x[0])
    return kv.ForwardOutput(logits, states)


class LayerView:
    """A forward of the target through `layers` only, on the shared cache (see the module doc)."""

    def __init__(self, model, layers):
        _parts(model)
        self.model, self.layers = model, list(layers)
        total = model.config.num_hidden_layers
        if not self.layers or any(not 0 <= layer < total for layer in self.layers) or self.layers != sorted(set(self.layers)):
            raise ValueError(f"a layer view needs increasing layer indices in 0..{total - 1}, got {layers}")

    def __call__(self, model, cache, input_ids: list[int], tree=None, hidden_layers=(), last_only=False,
                 head=True) -> kv.ForwardOutput:
        assert model is self.model, "a layer view runs the model it was made from"
        # Positions come from a slot the view writes: a layer it skips may be shorter.
        past = kv.cache_length(cache, self.layers[0])
        embeddings = model.model.embed_tokens(torch.tensor(input_ids, device=model.device))
        return run_layers(model, cache, embeddings, past, self.layers, tree, hidden_layers, last_only, head)

    def describe(self) -> str:
        return f"layers {self.layers[0]}..{self.layers[-1]}" if self.layers == list(range(self.layers[0], self.layers[-1] + 1)) \
            else f"layers {self.layers}"


def resume(model, cache, hidden: torch.Tensor, layer: int, tree=None, hidden_layers=(), last_only=False) -> kv.ForwardOutput:
    """Finish a forward from decoder layer `layer` on: `hidden` is the state entering it (the
    output of an early exit at `layer`, whose rows of layers < `layer` are already cached)."""
    past = kv.cache_length(cache, layer)
    return run_layers(model, cache, hidden, past, range(layer, model.config.num_hidden_layers), tree, hidden_layers, last_only)


def forward_from_exit(model, cache, exit_states: ExitStates, input_ids: list[int], tree=None, hidden_layers=()) -> kv.ForwardOutput:
    """The full forward of `input_ids` (as `kv.forward`) whose first rows an early exit already ran
    through layers < l = exit_states.layer while drafting: their keys and values go back into the
    cache, only the later rows run layers < l now, and every row continues from layer l. Of the
    hidden states, those of layers >= l are returned."""
    layer, hidden = exit_states.layer, exit_states.hidden
    kv.append_rows(cache, exit_states.cached)
    if len(hidden) < len(input_ids):  # rows the early exit did not reach (the last draft token)
        rest = LayerView(model, range(layer))(model, cache, input_ids[len(hidden) :], tree, (layer,), head=False)
        hidden = torch.cat([hidden, rest.hidden_states[layer]])
    out = resume(model, cache, hidden, layer, tree, hidden_layers)
    if layer in hidden_layers:
        out.hidden_states[layer] = hidden
    return out
