"""DFlash (Chen, Liang and Liu 2026): a block-diffusion drafter that denoises a whole block in one forward.

A block is the last committed token followed by `block - 1` mask tokens, at the positions they
would take in the text. Every draft layer attends, without a causal mask, over the block's own rows
and over the context, which the drafter never reads as tokens: the target's states at a few layers
from shallow to deep are concatenated, fused by `fc` and normed, and each draft layer projects that
one context feature through its own key and value projections ("KV injection"), cached once per
committed position. The mask rows' final states, through the target's LM head, are the drafts, so
the block costs one drafter forward whatever its size. The drafter keeps no state of its drafts:
after the forward only the context's keys and values stay cached.

Training (`DFlashFamily.fit`) is the paper's: anchors drawn at random in each answer, one block per
anchor (the anchor's real token, then masks), all blocks of a conversation in one forward where a
block sees the context before its anchor and itself; cross-entropy on each mask row against the
target's greedy token at that position, weighted exp(-(k - 1) / gamma) for the k-th draft so the
early tokens, on which acceptance depends most, weigh most.

Where this model's size changes the paper's setup (each said in the module's constants): the draft
layers are the target's own layer type (Llama's, not Qwen3's with q/k norms); they start from the
target's first layers, not from scratch, as a CPU budget of a few hundred steps needs; the LM head
is the target's restricted to the tokens its answers use most (`LOSS_VOCAB`), as for every family
here, because over 15 rows the whole 49k-token head would cost more than the draft layers; and the
target has no spare token for the mask, so its embedding is learned, as PARD's.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from specatlas.impls.engine.drafting import Draft, Drafter, ModelDrafter
from specatlas.impls.engine.errors import CheckpointError
from specatlas.impls.families.base import Family
from specatlas.impls.families.blocks import MLP, Attention, HeadCache, LayerConfig, RMSNorm, VocabularyHead, rotate
from specatlas.impls.registry import METHODS
from specatlas.impls.families.training import (LOSS_VOCAB, acceptance_summary, finish, frequency_ranked, split,
                                               train_loop)

# Its released drafters (z-lab/dflash, e.g. Qwen3-8B-DFlash-b16): blocks of 16 tokens (15 drafts a
# forward) from 5 draft layers, each conditioned on one target layer picked evenly from layer 1 to
# the fourth-last (its code's build_target_layer_ids). Its loss weights the k-th draft of a block by
# exp(-(k - 1) / gamma), gamma = 7 at block 16. (Its definition's numbers, `registry.py`.)
_PAPER = METHODS["chen2026dflash"].paper
DFLASH_BLOCK, DFLASH_LAYERS = _PAPER.block, _PAPER.draft_layers


def conditioning_layers(target_layers: int, draft_layers: int) -> tuple[int, ...]:
    """The target states the drafter reads, in `kv.forward`'s numbering (state h is the output of
    decoder layer h - 1): its code's choice, layers spread evenly from 1 to N - 3, or the middle one
    for a one-layer drafter."""
    if draft_layers == 1:
        picked = [target_layers // 2]
    else:
        span = target_layers - 4
        picked = [int(round(1 + i * span / (draft_layers - 1))) for i in range(draft_layers)]
    return tuple(layer + 1 for layer in picked)


class DFlashLayer(nn.Module):
    """A Llama decoder layer whose attention also reads the injected context (`inject`)."""

    def __init__(self, config: LayerConfig):
        super().__init__()
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.self_attn = Attention(config, config.hidden_size)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.mlp = MLP(config)

    def inject(self, context: torch.Tensor, positions: torch.Tensor, cache: HeadCache) -> None:
        """Append the keys and values of fused context features [1, n, H] at `positions` [1, n]."""
        attn, c = self.self_attn, self.self_attn.config
        shape = (1, context.shape[1], c.num_key_value_heads, c.head_dim)
        keys = rotate(attn.k_proj(context).view(shape).transpose(1, 2), positions, c.rope_theta)
        cache.append(keys, attn.v_proj(context).view(shape).transpose(1, 2))

    def forward(self, hidden, positions, cache: HeadCache, visible: torch.Tensor):
        hidden = hidden + self.self_attn(self.input_layernorm(hidden), positions, cache, visible)
        return hidden + self.mlp(self.post_attention_layernorm(hidden))


class DFlashDraft(nn.Module):
    """What ships: the draft layers, `fc` and its norm fusing the target's conditioning states,
    the final norm, the mask token's embedding and the draft vocabulary (target ids). The token
    embeddings and LM head are the target's."""

    def __init__(self, config: LayerConfig, num_layers: int, conditioning: int, draft_vocab_size: int):
        super().__init__()
        hidden = config.hidden_size
        self.layers = nn.ModuleList(DFlashLayer(config) for _ in range(num_layers))
        self.fc = nn.Linear(conditioning * hidden, hidden, bias=False)
        self.hidden_norm = RMSNorm(hidden, config.rms_norm_eps)
        self.norm = RMSNorm(hidden, config.rms_norm_eps)
        self.mask_embedding = nn.Parameter(torch.zeros(hidden))
        self.register_buffer("draft_vocab", torch.zeros(draft_vocab_size, dtype=torch.long))

    @classmethod
    def starting(cls, target, draft_vocab: torch.Tensor, num_layers: int = DFLASH_LAYERS,
                 layers: tuple[int, ...] | None = None, deep: bool = False) -> DFlashDraft:
        """Training's starting point, reading the target states `layers` (`num_layers` of them
        spread as its code spreads them by default); the mask is the mean token embedding. The
        draft layers are the target's first ones, or with `deep` copies of the target layer that
        reads the deepest conditioning state, with `fc` passing that state alone and `hidden_norm`
        that layer's input norm: the injected keys and values then start as that layer's own."""
        config = LayerConfig.from_dict(target.config.to_dict())
        layers = layers or conditioning_layers(target.config.num_hidden_layers, num_layers)
        module = cls(config, num_layers, len(layers), len(draft_vocab))
        source = [target.model.layers[layers[-1]]] * num_layers if deep else target.model.layers
        for mine, theirs in zip(module.layers, source):
            mine.load_state_dict(theirs.state_dict())
        module.norm.load_state_dict(target.model.norm.state_dict())
        module.draft_vocab.copy_(draft_vocab)
        with torch.no_grad():
            module.mask_embedding.copy_(target.model.embed_tokens.weight.mean(0))
            if deep:
                hidden = config.hidden_size
                module.fc.weight.zero_()
                module.fc.weight[:, -hidden:] = torch.eye(hidden)
                module.hidden_norm.load_state_dict(target.model.layers[layers[-1]].input_layernorm.state_dict())
        return module.to(target.device, target.dtype)

    def fuse(self, states: torch.Tensor) -> torch.Tensor:
        """The target's conditioning states, concatenated [.., n_layers * H], as one context feature [.., H]."""
        return self.hidden_norm(self.fc(states))

    def embed(self, embed_weight: torch.Tensor, ids: torch.Tensor, masked: torch.Tensor) -> torch.Tensor:
        rows = F.embedding(ids, embed_weight)
        return torch.where(masked[..., None], self.mask_embedding.to(rows.dtype), rows)

    def states(self, embeds, positions, caches: list[HeadCache], visible) -> torch.Tensor:
        """The block rows' final normed states; every layer's `caches` entry holds its context's keys and values."""
        hidden = embeds
        for layer, cache in zip(self.layers, caches):
            hidden = layer(hidden, positions, cache, visible)
        return self.norm(hidden)

    def head(self, target) -> VocabularyHead:
        return VocabularyHead(target.lm_head.weight, self.draft_vocab)

    def describe(self) -> str:
        return (f"{len(self.layers)} block-diffusion layers on {self.fc.in_features // self.fc.out_features} fused "
                f"target states, a head over {len(self.draft_vocab):,} tokens")


class DFlashDrafter(Drafter):
    """One DFlash forward drafts a block of `depth` tokens: the pending token and `depth` masks.

    Committed positions' target states come from the prefill and from the rows the target kept at
    each `observe` (the pending token and the accepted drafts), and are injected into every
    layer's cache once. Greedy drafts each mask row's top token; sampling draws each from its own
    row's tempered distribution (`Draft.q`), conditioned on the context only, which speculative
    sampling allows, so verification stays exact."""

    def __init__(self, module: DFlashDraft, target, layers: tuple[int, ...], label: str = "DFlash drafter"):
        self.module, self.hidden_layers, self.label = module, tuple(layers), label
        self.embed_weight, self.lm_head = target.model.embed_tokens.weight, module.head(target)

    def start(self, prompt, prefill):
        self.caches = [HeadCache() for _ in self.module.layers]
        self.fed = 0  # context positions injected
        self.features = self._states(prefill.hidden_states)

    def observe(self, step):
        rows = [0] + [node + 1 for node in step.accepted]
        self.features = torch.cat([self.features, self._states(step.hidden_states, rows)])

    def _states(self, states, rows=slice(None)):
        return torch.cat([states[layer][rows] for layer in self.hidden_layers], -1)

    @torch.no_grad()
    def propose(self, context, depth, sampling, rng):
        device = self.embed_weight.device
        if len(self.features):
            positions = torch.arange(self.fed, self.fed + len(self.features), device=device)[None]
            fused = self.module.fuse(self.features[None].to(self.module.fc.weight.dtype))
            for layer, cache in zip(self.module.layers, self.caches):
                layer.inject(fused, positions, cache)
            self.fed, self.features = self.fed + len(self.features), self.features[:0]
        anchor = len(context) - 1  # the pending token: its target state is not known yet
        ids = torch.tensor([[context[-1]] + [0] * depth], device=device)
        masked = torch.arange(depth + 1, device=device)[None] > 0
        positions = torch.arange(anchor, anchor + depth + 1, device=device)[None]
        visible = torch.ones(depth + 1, self.fed + depth + 1, dtype=torch.bool, device=device)
        states = self.module.states(self.module.embed(self.embed_weight, ids, masked), positions, self.caches, visible)
        for cache in self.caches:
            cache.keep(list(range(self.fed)))  # the block's rows are never context
        logits = self.lm_head(states[0, 1:])
        drawn = [ModelDrafter._children(row, 1, sampling, rng, (anchor + 1 + i, "draft", 0))[0] for i, row in enumerate(logits)]
        return Draft.chain([token for token, _ in drawn], None if sampling.greedy else torch.stack([q for _, q in drawn]))

    def describe(self):
        return self.label


def block_visibility(anchors: torch.Tensor, length: int, block: int) -> torch.Tensor:
    """Training's attention [anchors * block, length + anchors * block]: the rows of the block at
    anchor a see the context positions before a and every row of their own block."""
    count = len(anchors)
    own = torch.arange(count).repeat_interleave(block)
    context = torch.arange(length)[None] < anchors[own][:, None]
    return torch.cat([context, own[:, None] == own[None]], 1)


def block_inputs(tokens: torch.Tensor, anchors: torch.Tensor, block: int):
    """Each anchor's block: (ids [n], masked [n], positions [n]), the anchor's token then masks."""
    offsets = torch.arange(block).repeat(len(anchors))
    positions = anchors.repeat_interleave(block) + offsets
    return torch.where(offsets == 0, tokens[positions.clamp(max=len(tokens) - 1)], 0), offsets > 0, positions


class DFlashFamily(Family):
    """DFlash's drafter, trained on the target's greedy answers with the paper's block loss. Its
    code trains on GPUs for epochs over 800k conversations; here a CPU run of a few hundred steps,
    so the layers start from the target's first ones (the draft rows read token embeddings, as
    those layers do) and learn at 3e-4, PARD's rate here. Block, layers, conditioning states and
    decay are its registry definition's (`method`)."""

    name, default_steps, method = "dflash", 400, "chen2026dflash"
    lr, conversations, deep_start = 3e-4, 2, False
    # Blocks anchored per conversation a step (its code anchors 512 blocks in sequences of up to
    # 3,072 tokens; the answers here are about 300 tokens long).
    anchors = 32
    held_out_conversations = 48
    title, paper, aliases = "DFlash", "chen2026dflash", ("dflash",)

    @property
    def block(self) -> int:
        return METHODS[self.method].paper.block

    @property
    def draft_layers(self) -> int:
        return METHODS[self.method].paper.draft_layers

    @property
    def decay(self) -> float:
        return float(METHODS[self.method].paper.decay)

    @property
    def steps_evaluated(self) -> int:
        return self.block - 1

    def layers(self, model):
        """Its code's rule gives a drafter of n layers n conditioning states; a definition may name another count."""
        count = getattr(METHODS[self.method].paper, "conditioning", self.draft_layers)
        return conditioning_layers(model.config.num_hidden_layers, count)

    def detect(self, weights, config):
        if "mask_embedding" in weights and "fc.weight" in weights and any(k.startswith("layers.") for k in weights):
            return "dflash", weights
        return None

    def build(self, weights, config, target):
        self.check_sizes(config, target, "the DFlash drafter was trained")
        count, layers = config.get("num_hidden_layers"), config.get("target_layer_ids")
        total = target.config.num_hidden_layers
        if not (type(count) is int and 1 <= count <= total):
            raise CheckpointError(f"DFlash num_hidden_layers = {count!r:.40} is not 1..{total}")
        if not (isinstance(layers, list) and layers and all(type(i) is int and 1 <= i <= total for i in layers)):
            raise CheckpointError(f"DFlash target_layer_ids = {layers!r:.60} are not target states 1..{total}")
        module = DFlashDraft(LayerConfig.from_dict(target.config.to_dict()), count, len(layers), config["draft_vocab_size"])
        return module, tuple(layers)

    def config_for(self, head, target):
        return {"specatlas_family": self.name, "hidden_size": target.config.hidden_size,
                "vocab_size": target.config.vocab_size, "num_hidden_layers": len(head.layers),
                "target_layer_ids": list(conditioning_layers(target.config.num_hidden_layers, head.fc.in_features // head.fc.out_features)),
                "draft_vocab_size": len(head.draft_vocab),
                "block_size": self.block}

    def describe(self, config):
        return (f"a DFlash block-diffusion drafter: {config.get('num_hidden_layers')} layers drafting "
                f"{(config.get('block_size') or DFLASH_BLOCK) - 1} tokens a forward from mask tokens, conditioned on "
                f"the target's states {config.get('target_layer_ids')} injected as keys and values into every layer; "
                f"the target's embeddings and LM head (restricted to {config.get('draft_vocab_size')} tokens) are "
                f"shared, not shipped")

    def fit(self, loaded, features, run, output, budget_minutes, command, progress) -> str:
        model = loaded.model
        train_ids, test_ids = split(features, run.seed)
        test_ids = test_ids[: self.held_out_conversations]
        vocab = frequency_ranked(features, train_ids, model.config.vocab_size)[:LOSS_VOCAB].sort().values
        layers = self.layers(model)
        student = DFlashDraft.starting(model, vocab, self.draft_layers, layers, self.deep_start).float().train()
        untrained = self.evaluate(student, model, features, test_ids)
        local = torch.full((model.config.vocab_size,), -100, dtype=torch.long)
        local[student.draft_vocab] = torch.arange(len(student.draft_vocab))
        head = student.head(model).weight.float()
        weights = torch.exp(-torch.arange(self.block - 1) / self.decay)
        optimizer = torch.optim.AdamW(student.parameters(), lr=self.lr, weight_decay=0.0)

        def batches(step, generator):
            out = []
            for i in torch.randperm(len(train_ids), generator=generator)[: self.conversations]:
                c = train_ids[int(i)]
                first, length = features.prompt_lengths[c], len(features.tokens[c])
                anchors = first + torch.randperm(max(0, length - first), generator=generator)[: self.anchors]
                if len(anchors):
                    out.append((c, anchors.sort().values))
            return out

        def loss_fn(batch):
            total, weight = 0.0, 0.0
            for c, anchors in batch:
                states, labels = self._block_states(student, model, features, c, anchors, layers)
                offsets = torch.arange(self.block).repeat(len(anchors))
                labels = torch.where(labels >= 0, local[labels.clamp(min=0)], -100)
                scored = (offsets > 0) & (labels != -100)
                losses = F.cross_entropy(F.linear(states[scored], head), labels[scored], reduction="none")
                w = weights[offsets[scored] - 1]
                total, weight = total + (w * losses).sum(), weight + w.sum()
            return total / max(float(weight), 1e-9)

        state = train_loop(student, optimizer, batches, loss_fn, run, budget_minutes, progress)
        accuracy = self.evaluate(student, model, features, test_ids) | {"untrained": untrained}
        return finish(self, run, student.to(model.dtype), loaded, features, train_ids, test_ids, state, accuracy, output,
                      command, {}, {"trained_on": "on the target's greedy answers, blocks anchored at random answer positions",
                                    "targets": f"each mask row's label is the target's greedy token at its position, "
                                               f"cross-entropy over the {len(vocab):,}-token head weighted "
                                               f"exp(-(k - 1) / {self.decay:g}) for the k-th draft; {self.anchors} "
                                               f"blocks of {self.block} per conversation"})

    def _block_states(self, student, target, features, c, anchors, layers):
        """The final states of every anchor's block [anchors * block, H] in one forward, and each row's
        label: the target's greedy token at its position (-100 past the conversation)."""
        tokens, greedy, length = features.tokens[c], features.greedy[c], len(features.tokens[c])
        context = student.fuse(torch.cat([features.hidden[layer][c] for layer in layers], -1).float()[None])
        ids, masked, positions = block_inputs(tokens, anchors, self.block)
        caches = [HeadCache() for _ in student.layers]
        for layer, cache in zip(student.layers, caches):
            layer.inject(context, torch.arange(length)[None], cache)
        embeds = student.embed(target.model.embed_tokens.weight.detach().float(), ids[None], masked[None])
        states = student.states(embeds, positions[None], caches, block_visibility(anchors, length, self.block))[0]
        labels = torch.where(positions - 1 < length, greedy[(positions - 1).clamp(max=length - 1)], -100)
        return states, labels

    @torch.no_grad()
    def evaluate(self, student: DFlashDraft, target, features, conversations) -> dict:
        """Acceptance of the top-1 block (15 drafts from one forward) anchored at every held-out answer
        position, given the greedy text before it: the k-th draft counts while drafts 1..k match the
        target's greedy tokens (a block running past the answer's end stops there)."""
        layers, head, accepted = self.layers(target), student.head(target), []
        drafts = self.block - 1
        for c in conversations:
            first, length = features.prompt_lengths[c], len(features.tokens[c])
            anchors = torch.arange(first, length)
            for chunk in anchors.split(64):
                states, labels = self._block_states(student, target, features, c, chunk, layers)
                top = head(states.to(head.weight.dtype)).argmax(-1)
                hits = (top == labels).view(len(chunk), self.block)[:, 1:]
                accepted += hits.int().cumprod(1).sum(1).tolist()
        return acceptance_summary(accepted, drafts)



class DFlashCPUFamily(DFlashFamily):
    """The hardware-sized DFlash variant (`chen2026dflash-cpu`), not the paper's drafter: one draft
    layer and blocks of 8, so a block costs a small share of a target step on a CPU, still reading
    the paper drafter's five conditioning states. Its one layer starts as a copy of the target
    layer reading the deepest of them (`DFlashDraft.starting`'s `deep`): with one layer there is
    no stack of the target's first layers to reuse. Its checkpoints are DFlash checkpoints, which
    the `dflash` family loads; only its shipped folder and training differ."""

    name, method, deep_start = "dflash-cpu", "chen2026dflash-cpu", True
    default_steps, anchors = 2400, 64  # 64 blocks of 8: the paper-sized run's rows a step
    title, paper, aliases = "", "chen2026dflash-cpu", ("dflash-cpu",)  # untitled: its checkpoints are DFlash's

    def detect(self, weights, config):
        return None
