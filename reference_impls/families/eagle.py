"""EAGLE-1 (Li et al. 2024), also EAGLE-2's and FR-Spec's drafter: a one-layer head extrapolating the target's features.

`EagleHead`'s `state_dict()` is SafeAILab/EAGLE's layout (vLLM's and the speculators library's
renames are read too): `fc(concat(embed(token[t+1]), feature[t]))` through one Llama decoder
layer without input norm predicts feature[t+1]; the target's LM head turns a feature into logits.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from specatlas.impls.engine.drafting import Draft, Drafter, grow_template
from specatlas.impls.engine.errors import CheckpointError
from specatlas.impls.families.base import Family, layer_config
from specatlas.impls.families.blocks import MLP, Attention, HeadCache, LayerConfig, RMSNorm
from specatlas.impls.registry import EAGLE2_TREE
from specatlas.impls.families.training import acceptance_summary, finish, loss_vocabulary, shared_prompt_prefix, split, train_loop


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


def published_renames(weights: dict) -> tuple[str, dict]:
    """EAGLE-1 and EAGLE-3 weights renamed to our (the reference) keys, and the layout's prefix:
    vLLM's `model.` prefix, `draft_id_to_target_id` and `layers.0` for EAGLE-3's midlayer, the
    speculators library's `fusion_fc`."""
    layout, renamed = "", {}
    for key, value in weights.items():
        new = key
        if new.startswith("model."):
            new, layout = new[len("model."):], "vllm-"
        if new.startswith("fusion_fc."):
            new, layout = "fc." + new[len("fusion_fc."):], "speculators-"
        renamed[new] = value
    if "draft_id_to_target_id" in renamed:
        layout = "vllm-"
        renamed["d2t"] = renamed.pop("draft_id_to_target_id")
    if any(key.startswith("layers.0.hidden_norm.") for key in renamed):  # vLLM's name for EAGLE-3's midlayer
        layout = "vllm-"
        renamed = {("midlayer." + key[len("layers.0."):] if key.startswith("layers.0.") else key): value
                   for key, value in renamed.items()}
    return layout, renamed


def llama_config(head, target) -> dict:
    """The config.json of EAGLE's heads: a one-layer Llama's."""
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": 1,
            **head.config.to_dict(), "vocab_size": target.config.vocab_size,
            "max_position_embeddings": getattr(target.config, "max_position_embeddings", 2048)}


class EagleFamily(Family):
    """The EAGLE-1/2 head: at position t it reads (embedding of token t+1, target feature t) and
    regresses feature t+1 (smooth L1) plus 0.1 x cross-entropy of the target's LM head on its
    prediction against the target's greedy token (EAGLE's loss), with U(-0.1, 0.1) noise on the
    input features (EAGLE's data augmentation). Features are the final normed states, which is
    what the target's LM head reads. Random initialisation, as EAGLE's (a copy of the target's
    last layer is no warm start: it was tuned for the residual stream, whose scale is far larger
    than the normed features')."""

    # A step schedule: EAGLE's training script runs 20 epochs of ShareGPT and recommends 20-40
    # (SafeAILab/EAGLE eagle/train/main.py, num_epochs); far past a CPU budget, `--epochs` asks for it.
    name, conversations, lr, default_steps, steps_evaluated = "eagle", 4, 5e-4, 1500, 5
    title, paper, aliases = "EAGLE", "li2024eagle", ("eagle", "eagle-1", "eagle2", "eagle-2", "li2024eagle2")

    def detect(self, weights, config):
        layout, renamed = published_renames(weights)
        # DFlash's drafter has fc and layers too, and a mask embedding no EAGLE head has.
        if "fc.weight" in renamed and any(key.startswith("layers.0.") for key in renamed) and "mask_embedding" not in renamed:
            return layout + "eagle", renamed
        return None

    def build(self, weights, config, target):
        hidden, vocab = target.config.hidden_size, target.config.vocab_size
        layer = layer_config(config, "EAGLE")
        if layer.hidden_size != hidden:
            raise CheckpointError(f"EAGLE head has hidden size {layer.hidden_size}, the target {hidden}")
        if config.get("vocab_size", vocab) != vocab:
            raise CheckpointError(f"EAGLE head was trained for a vocabulary of {config['vocab_size']}, the target has {vocab}")
        return EagleHead(layer, fc_bias=config.get("bias", True)), (target.config.num_hidden_layers,)

    def config_for(self, head, target):
        return llama_config(head, target) | {"bias": head.fc.bias is not None}

    def describe(self, config):
        return ("an EAGLE-1/2 draft head (fc over [embedding, feature] + one decoder layer without input norm; "
                "the target's embeddings and LM head)")

    def fit(self, loaded, features, run, output, budget_minutes, command, progress) -> str:
        model = loaded.model
        final = model.config.num_hidden_layers
        head = EagleHead(LayerConfig.from_dict(model.config.to_dict()))
        embed, lm_weight = model.model.embed_tokens.weight.detach(), model.lm_head.weight.detach()
        train_ids, test_ids = split(features, run.seed)
        start = shared_prompt_prefix(features)
        optimizer = torch.optim.AdamW(head.parameters(), lr=self.lr, weight_decay=0.0, betas=(0.9, 0.95))
        vocabulary = loss_vocabulary(features, train_ids, lm_weight)

        def batches(step, generator):
            picked = [train_ids[i] for i in torch.randperm(len(train_ids), generator=generator)[: self.conversations]]
            width = max(len(features.tokens[c]) for c in picked) - 1
            tokens = torch.zeros(len(picked), width, dtype=torch.long)
            feats = torch.zeros(len(picked), width + 1, embed.shape[1])
            labels = torch.full((len(picked), width), -100, dtype=torch.long)
            for row, c in enumerate(picked):
                length = len(features.tokens[c]) - 1
                tokens[row, :length] = features.tokens[c][1:]
                feats[row, : length + 1] = features.hidden[final][c].float()
                labels[row, start:length] = features.greedy[c][start + 1 :]
            noise = (torch.rand(feats[:, :-1].shape, generator=generator) - 0.5) * 0.2
            return tokens, feats[:, :-1] + noise, feats[:, 1:], labels

        def loss_fn(batch):
            tokens, inputs, wanted, labels = batch
            positions = torch.arange(tokens.shape[1])[None].expand_as(tokens)
            predicted = head(F.embedding(tokens, embed), inputs, positions)
            valid = labels != -100
            regression = F.smooth_l1_loss(predicted[valid], wanted[valid])
            return regression + 0.1 * vocabulary.cross_entropy(predicted[valid], labels[valid])

        state = train_loop(head, optimizer, batches, loss_fn, run, budget_minutes, progress)
        accuracy = self.evaluate(head, features, test_ids, embed, lm_weight, final)
        return finish(self, run, head, loaded, features, train_ids, test_ids, state, accuracy, output, command, {})

    @torch.no_grad()
    def evaluate(self, head, features, conversations, embed, lm_weight, final) -> dict:
        return chain_acceptance(features, conversations, embed, self.steps_evaluated,
                                lambda c: features.hidden[final][c].float(), head,
                                lambda predicted: F.linear(predicted, lm_weight).argmax(-1))


def ttt_mask(rows: int, step: int) -> torch.Tensor:
    """What draft step `step` (0: the rows fed the target's features) sees, as `Attention` takes it:
    row t attends causally to the step-0 rows up to t, then to its own row of each later step
    (its ancestors in a drafted chain, and itself). EAGLE-3's training-time test uses this mask,
    and drafting builds the same one per tree node."""
    return torch.cat([torch.ones(rows, rows, dtype=torch.bool).tril()] + [torch.eye(rows, dtype=torch.bool)] * step, 1)


@torch.no_grad()
def chain_acceptance(features, conversations, embed, depth, target_features, advance, draft) -> dict:
    """Chain drafting simulated at every held-out answer position at once, as the drafter runs:
    step 1 reads the target's features, later steps the head's own predictions and drafted
    tokens (`advance(embeds, features, positions, cache, mask)` -> next features, `draft(features)`
    -> target ids), attending as `ttt_mask` says."""
    accepted = []
    for c in conversations:
        tokens, greedy = features.tokens[c], features.greedy[c]
        rows = len(tokens) - 1
        positions, cache = torch.arange(rows)[None], HeadCache()
        predicted = advance(F.embedding(tokens[1:], embed)[None], target_features(c)[None, :-1], positions, cache, None)
        hits = torch.zeros(rows, depth, dtype=torch.bool)
        valid = torch.zeros(rows, depth, dtype=torch.bool)
        for step in range(depth):
            drafted = draft(predicted[0])  # row t: the draft for token t + step + 2
            ahead = torch.arange(rows) + step + 1
            valid[:, step] = ahead < rows + 1
            hits[:, step] = drafted == greedy[ahead.clamp(max=rows)]
            if step + 1 < depth:
                predicted = advance(F.embedding(drafted, embed)[None], predicted, positions + step + 1, cache,
                                    ttt_mask(rows, step + 1))
        full = (torch.arange(rows) >= features.prompt_lengths[c] - 1) & valid.all(1)
        accepted += hits[full].int().cumprod(1).sum(1).tolist()
    return acceptance_summary(accepted, depth)


# --------------------------------------------------------------------------------------------
# Drafting


# EAGLE-1's static tree (SafeAILab/EAGLE eagle/model/choices.py): 25 nodes, depth 5.
EAGLE_TREE = tuple(map(tuple, [
    [0], [1], [2], [3], [0, 0], [0, 1], [0, 2], [1, 0], [1, 1], [2, 0], [2, 1], [3, 0], [0, 0, 0], [0, 0, 1], [0, 0, 2],
    [0, 1, 0], [0, 1, 1], [0, 2, 0], [0, 2, 1], [1, 0, 0], [0, 0, 0, 0], [0, 0, 0, 1], [0, 0, 0, 2], [0, 0, 0, 0, 0],
    [0, 0, 0, 0, 1]]))
# EAGLE-2's dynamic tree (EaModel defaults in SafeAILab/EAGLE): expand the top_k best nodes per level
# for `depth` levels, then keep the total_token best of all by cumulative draft log-probability.
# (Its definition's numbers, `registry.py`.)
EAGLE2_TOTAL, EAGLE2_DEPTH, EAGLE2_TOP_K = EAGLE2_TREE["total"], EAGLE2_TREE["depth"], EAGLE2_TREE["top_k"]


class EagleDrafter(Drafter):
    """EAGLE (Li et al. 2024): a one-layer head extrapolates the target's features.

    The head's row t reads (embedding of token t+1, feature t) and predicts feature t+1; the
    target's LM head turns a feature into the next token's distribution. Rows for committed
    tokens read the target's own features (prefill, then the verified rows); draft rows read the
    head's predictions, attending to the committed rows and their own ancestors in the tree.
    `tree`: a static template (EAGLE-1), or None for EAGLE-2's dynamic tree. `vocabulary`
    (FR-Spec): the target ids drafts are drawn from; the LM head keeps only their rows, which is
    the point (it dominates a draft step). Verification still scores the whole vocabulary."""

    name = "EAGLE"

    def __init__(self, head, embed_weight, lm_head_weight, final_layer: int, tree=EAGLE_TREE,
                 dynamic: tuple[int, int, int] = (EAGLE2_TOTAL, EAGLE2_DEPTH, EAGLE2_TOP_K), label: str = "",
                 vocabulary: torch.Tensor | None = None):
        self.head, self.embed_weight, self.vocabulary = head, embed_weight, vocabulary
        self.lm_head_weight = lm_head_weight if vocabulary is None or lm_head_weight is None else lm_head_weight[vocabulary]
        self.tree, self.dynamic, self.label = tree, dynamic, label
        self.hidden_layers = (final_layer,)

    def start(self, prompt, prefill):
        self.cache, self.fed = HeadCache(), 0  # rows in the cache: one per committed token but the pending one
        self.features = self._target_features(prefill.hidden_states)  # target features not yet fed, from row `fed`

    def observe(self, step):
        rows = [0] + [node + 1 for node in step.accepted]  # the pending token and the accepted nodes
        self.features = torch.cat([self.features, self._target_features(step.hidden_states, rows)])

    def _target_features(self, states, rows=slice(None)):
        return torch.cat([states[layer][rows] for layer in self.hidden_layers], -1)

    def _rows(self, tokens, features, positions, visible=None):
        embeds = F.embedding(torch.tensor(tokens, device=features.device), self.embed_weight)
        return self._advance(embeds[None], features[None], torch.tensor([positions], device=features.device), visible)[0]

    def _advance(self, embeds, features, positions, visible):
        """The head's predicted next features for these rows (appending them to the head's cache)."""
        return self.head(embeds, features, positions, self.cache, visible)

    def _logits(self, features):
        return F.linear(features, self.lm_head_weight)

    def _top(self, features, k: int):
        """The k best draft tokens after these features: (log-probabilities, target ids)."""
        best = self._logits(features).log_softmax(-1)
        best = best.topk(min(k, best.shape[-1]), dim=-1)
        return best.values, best.indices if self.vocabulary is None else self.vocabulary[best.indices]

    def propose(self, context, depth, sampling, rng):
        # Feed the committed rows the head has not seen: row t = (token t+1, target feature t).
        count = len(self.features)
        if count:
            out = self._rows(context[self.fed + 1 : self.fed + 1 + count], self.features,
                             list(range(self.fed, self.fed + count)))
            self.fed, self.last, self.features = self.fed + count, out[-1], self.features[:0]
        if not self.fed:
            return Draft()
        draft = self._dynamic(depth) if self.tree is None else self._static(depth)
        self.cache.keep(list(range(self.fed)))  # drop the draft rows
        return draft

    def _expand(self, tokens: list[int], features: torch.Tensor, depth_of: int, seen: torch.Tensor):
        """Head rows for draft nodes (token, parent's predicted feature) at position fed + depth - 1,
        each seeing the committed rows, the draft rows `seen` marks (its ancestors': [nodes, draft
        rows so far]) and itself. Returns the rows' predicted features and what each row sees of
        the draft rows, itself included (its children's `seen`)."""
        count, device = len(tokens), features.device
        visible = torch.cat([torch.ones(count, self.fed, dtype=torch.bool, device=device), seen,
                             torch.eye(count, dtype=torch.bool, device=device)], 1)
        out = self._rows(tokens, features, [self.fed + depth_of - 1] * count, visible)
        return out, visible[:, self.fed :]

    def _static(self, depth):
        feature_of, seen_of = {(): self.last}, {}

        def expand(paths, chains, width):
            level = len(paths[0])
            seen = (torch.stack([seen_of[p[:-1]] for p in paths]) if level > 1 else
                    torch.zeros(len(paths), 0, dtype=torch.bool, device=self.last.device))
            out, sees = self._expand([chain[-1] for chain in chains], torch.stack([feature_of[p[:-1]] for p in paths]),
                                     level, seen)
            for i, path in enumerate(paths):
                feature_of[path], seen_of[path] = out[i], sees[i]
            return self._top(out, width)[1].tolist()

        root = self._top(self.last, max(p[-1] for p in self.tree if len(p) == 1) + 1)[1]
        return grow_template(self.tree, depth, root.tolist(), expand)

    def _dynamic(self, depth):
        """EAGLE-2: grow by cumulative confidence (the product of the head's probabilities along
        the path), expanding the top_k best new nodes per level, then rerank every node and keep
        the `total` best (a node's score never exceeds its parent's, so the kept set is a tree).
        Each level is a few tensor ops over all its candidates; scores are float64, sorts stable
        (ties in the order the nodes were made)."""
        total, max_depth, top_k = self.dynamic
        values, ids = self._top(self.last, top_k)
        # The tree's bookkeeping stays on the CPU; only the head's rows live on the model's device.
        tokens, parents, scores = ids.tolist(), [-1] * len(ids), values.cpu().double()
        frontier = torch.arange(len(tokens))  # the nodes the next level expands
        features = self.last.expand(len(tokens), -1)  # the feature each frontier node's head row reads
        seen = torch.zeros(len(tokens), 0, dtype=torch.bool, device=self.last.device)
        for level in range(1, min(depth, max_depth)):
            out, sees = self._expand([tokens[n] for n in frontier.tolist()], features, level, seen)
            values, ids = self._top(out, top_k)
            cumulative = (scores[frontier][:, None] + values.cpu().double()).flatten()
            order = cumulative.sort(descending=True, stable=True).indices
            expanded = order // values.shape[1]  # the frontier slot each new node extends
            first = len(tokens)
            tokens += ids.cpu().flatten()[order].tolist()
            parents += frontier[expanded].tolist()
            scores = torch.cat([scores, cumulative[order]])
            best = expanded[:top_k].to(out.device)
            frontier = torch.arange(first, first + len(best))
            features, seen = out[best], sees[best]
        keep = scores.sort(descending=True, stable=True).indices[:total].sort().values.tolist()
        index: dict[int, int] = {}
        for node in keep:  # ascending: a parent is decided before its children
            if parents[node] < 0 or parents[node] in index:
                index[node] = len(index)
        return Draft([tokens[n] for n in index], [index.get(parents[n], -1) for n in index])

    def describe(self):
        shape = (f"{len(self.tree)}-node static tree" if self.tree is not None else
                 "dynamic tree: top-{2} per level, depth {1}, {0} nodes kept".format(*self.dynamic))
        vocabulary = "" if self.vocabulary is None else f", drafts from {len(self.vocabulary)} frequent tokens"
        return f"{self.name} head ({shape}{vocabulary}; {self.label})"
