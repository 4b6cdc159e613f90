"""PARD (An et al. 2025): an autoregressive draft model adapted to draft a whole block in one forward.

After the context the drafter reads K - 1 copies of one mask token: the row of the last real
token predicts the next token, the row of the m-th mask the token m + 1 ahead, each from the
context alone (no draft token is fed back), so a block of K drafts costs one drafter forward
instead of K. The masks' keys and values are dropped after the forward; the next step feeds the
committed tokens as usual.

Adaptation (`ParallelFamily.fit`) fine-tunes an autoregressive drafter, here the distilled drafter
the methods use by default (`methods.core.default_draft_model`), on the target's own answers,
with the paper's COnditional Drop-token (COD) batches: every real token is a row, and the m-th
mask after real token j is a row only if the (m-1)-th one after j is, with probability
max(r^m, r_min) overall; each row sees the real tokens up to its base and the masks before it
on its own branch, at the positions it would have at inference, so training costs O(N) rows
instead of K * N. What ships: the drafter's layers, its draft vocabulary and the mask token's
embedding (the target's vocabulary has no spare token here; a published PARD model reserves one).

PARD-2 (An et al. 2026, https://arxiv.org/abs/2605.08632) keeps this drafter and its COD batches
and changes the objective (`ConfidenceAdaptiveFamily`). The paper states that Confidence-Adaptive
Token (CAT) optimization reweights each token by its part in verification, so that training aims at
the accepted run length rather than per-token accuracy. Its released training code
(https://github.com/AMD-AGI/PARD/blob/4cd44e5afff16e2c3b53b6c1a35ec8755389890c/pard/pard2_train.py:
the collator's `prev_prob`, the loss in `TargetFeatEmbedWarp.forward`) defines the weight: the k-th
draft of a block is weighted by the product of the target's probabilities of the block's k - 1
data tokens before it (1 for the first draft), how likely the verification is to reach it; the
loss is ce x weighted cross-entropy + kd x weighted KL(target || drafter) at a temperature, each
normalised by the sum of the weights (the constants are its configs', in the registry). Its dual
mode: for the target-dependent mode the target's hidden states (4 layers, projected and scaled)
are added to the drafter's input embeddings, dropped for whole sequences at random in training so
that one model serves both modes. Implemented here: the target-independent mode (the drafter reads
no target state at inference; training runs the target over each conversation it draws for its
probabilities).
Not implemented: the target-dependent mode's feature projection and its use at inference. This
implementation's reading where its drafter differs from the code's (a head over part of the
vocabulary): the KL runs over the drafter's vocabulary, the target's distribution renormalised on
it, and rows whose label lies outside it are left out of both terms, as PARD's loss leaves them out.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from torch import nn
from torch.nn import functional as F

from specatlas.impls.engine import kv
from specatlas.impls.engine.drafting import Draft, ModelDrafter
from specatlas.impls.engine.errors import CheckpointError
from specatlas.impls.engine.models import shallow_slice
from specatlas.impls.families.base import Family
from specatlas.impls.families.blocks import VocabularyHead
from specatlas.impls.registry import METHODS
from specatlas.impls.families.training import (LOSS_VOCAB, acceptance_summary, finish, frequency_ranked,
                                               shared_prompt_prefix, split, train_loop)

# Its code's training config (AMD-AGI/PARD, config/train/example_*.yaml): blocks of para_num = 8
# tokens, COD retention down_sample_ration = 0.7 a mask depth, floored at down_sample_ration_min = 0.2.
# (Its definition's numbers, `registry.py`.)
_PAPER = METHODS["an2025pard"].paper
PARD_BLOCK, COD_RETAIN, COD_FLOOR = _PAPER.block, _PAPER.retain, _PAPER.floor
# Its eval configs draft up to draft_k = 12 tokens a forward, past the trained block: the deepest
# block the cost-aware policy may ask for.
PARD_MAX_BLOCK = 12
# PARD-2's (its code's configs): blocks of para_num = 16, COD floor 0.1, the CAT loss's mix.
_PAPER2 = METHODS["an2026pard"].paper


class ParallelDraft(nn.Module):
    """What ships: the drafter's decoder layers (the target's layer class), its draft vocabulary
    (target ids) and the embedding of the mask token, which takes the id just past the vocabulary."""

    def __init__(self, target, num_layers: int, draft_vocab_size: int):
        super().__init__()
        layer = type(target.model.layers[0])
        self.layers = nn.ModuleList(layer(target.config, i) for i in range(num_layers))
        self.register_buffer("draft_vocab", torch.zeros(draft_vocab_size, dtype=torch.long))
        self.mask_embedding = nn.Parameter(torch.zeros(target.config.hidden_size))

    @classmethod
    def adapting(cls, target, drafter) -> ParallelDraft:
        """Training's starting point: the autoregressive `drafter`'s layers and draft vocabulary (a
        shallow slice of `target`: the distilled drafter, or the target's own first layers over its
        whole head), the mask embedding the mean of the target's token embeddings."""
        head = drafter.lm_head
        vocab = head.ids if isinstance(head, VocabularyHead) else torch.arange(target.config.vocab_size)
        module = cls(target, len(drafter.model.layers), len(vocab))
        module.layers.load_state_dict(drafter.model.layers.state_dict())
        module.draft_vocab.copy_(vocab)
        with torch.no_grad():
            module.mask_embedding.copy_(target.model.embed_tokens.weight.mean(0))
        return module.to(target.device, target.dtype)

    def drafter(self, target) -> nn.Module:
        """A causal LM: these layers between the target's embeddings and its norm and restricted head."""
        return shallow_slice(target, len(self.layers), self.layers, VocabularyHead(target.lm_head.weight, self.draft_vocab))

    def mask_id(self, target) -> int:
        return target.config.vocab_size

    def embed(self, target):
        """ids [1, n] -> input embeddings: the target's for vocabulary ids, this mask's for the mask id."""
        table, mask_id = target.model.embed_tokens, self.mask_id(target)

        def embed(ids: torch.Tensor) -> torch.Tensor:
            rows = table(ids.clamp(max=mask_id - 1))
            return torch.where((ids == mask_id)[..., None], self.mask_embedding.to(rows.dtype), rows)

        return embed

    def describe(self) -> str:
        return f"{len(self.layers)} layers adapted to parallel drafting, a head over {len(self.draft_vocab):,} tokens"


class ParallelDrafter(ModelDrafter):
    """A block of `depth` drafts from one forward of `model` over the uncached context and depth - 1
    mask tokens (`mask_id`, embedded by `embed` when it is not a vocabulary token). Greedy drafts
    each row's top token; sampling draws each from its own row's tempered distribution, recorded in
    `Draft.q`: each draft's q is conditioned on the context only, which speculative sampling allows
    (a draft may ignore the drafts before it), so the verification stays exact."""

    def __init__(self, model, mask_id: int, embed=None, label: str = "parallel draft model"):
        super().__init__(model, label=label)
        self.mask_id, self.embed = mask_id, embed

    def propose(self, context, depth, sampling, rng):
        fed = self.uncached(context) + [self.mask_id] * (depth - 1)
        logits = kv.forward(self.model, self.cache, fed, embed=self.embed).logits[-depth:]
        kv.truncate(self.cache, len(context))  # the masks' rows are never context
        drawn = [self._children(row, 1, sampling, rng, (len(context) + i, "draft", 0))[0] for i, row in enumerate(logits)]
        q = None if sampling.greedy else torch.stack([q for _, q in drawn])
        return Draft.chain([token for token, _ in drawn], q)


class ParallelFamily(Family):
    """PARD's adaptation: a draft model fine-tuned with cross-entropy on the data's next tokens
    (the target's own answers here, so its greedy tokens), every row of a COD batch scored.
    The paper's block and COD settings are its code's; the learning rate and schedule are ours:
    its code fine-tunes a 0.5-1B model at 1e-5 for 4 epochs on a GPU, a budget this CPU does not
    have, so the 2-layer drafter adapts at a higher rate (3e-4; 2e-4 over 200 steps left the mask
    rows barely trained) for as many steps as a CPU half-hour allows."""

    name, default_steps, steps_evaluated = "pard", 400, PARD_BLOCK
    block, retain, floor, lr, conversations = PARD_BLOCK, COD_RETAIN, COD_FLOOR, 3e-4, 2
    # Evaluated on the first 48 held-out conversations: a block's rows cost 8x a chain's, and these
    # already hold about 11,000 answer positions.
    held_out_conversations = 48
    title, paper, aliases, uses_draft_model = "PARD", "an2025pard", ("pard",), True

    def layers(self, model):
        return None  # target-independent: it learns the data's own next tokens, no target state

    def detect(self, weights, config):
        if "mask_embedding" in weights and "draft_vocab" in weights and "fc.weight" not in weights:  # fc: DFlash's
            # PARD-2's layout is PARD's: its config names which objective trained it
            trained_by = config.get("specatlas_family", ParallelFamily.name)
            return (self.name, weights) if trained_by == self.name else None
        return None

    def build(self, weights, config, target):
        self.check_sizes(config, target, "the parallel drafter was adapted")
        layers = target.config.num_hidden_layers
        if not 1 <= config.get("num_hidden_layers", 0) < layers:
            raise CheckpointError(f"the drafter needs 1..{layers - 1} layers, its config says {config.get('num_hidden_layers')}")
        return ParallelDraft(target, config["num_hidden_layers"], config["draft_vocab_size"]), ()

    def config_for(self, head, target):
        return {"specatlas_family": self.name, "hidden_size": target.config.hidden_size,
                "vocab_size": target.config.vocab_size, "num_hidden_layers": len(head.layers),
                "draft_vocab_size": len(head.draft_vocab), "mask_token_id": target.config.vocab_size,
                "trained_block": self.block}

    def describe(self, config):
        return (f"a {self.title} parallel drafter: {config.get('num_hidden_layers')} decoder layers adapted from the distilled "
                f"drafter to draft {config.get('trained_block')} tokens a forward from mask tokens (a learned mask "
                f"embedding); the target's embeddings, final norm and LM head (restricted to "
                f"{config.get('draft_vocab_size')} tokens) are shared, not shipped")

    def fit(self, loaded, features, run, output, budget_minutes, command, progress) -> str:
        model = loaded.model
        train_ids, test_ids = split(features, run.seed)
        start = shared_prompt_prefix(features)
        autoregressive, label = run.draft_model
        student = ParallelDraft.adapting(model, autoregressive).train().requires_grad_(True)
        if len(student.draft_vocab) > LOSS_VOCAB * 2:  # a whole-vocabulary head: the most frequent tokens
            student.draft_vocab = frequency_ranked(features, train_ids, model.config.vocab_size)[:LOSS_VOCAB].clone()
        drafter, embed = student.drafter(model), student.embed(model)
        test_ids = test_ids[: self.held_out_conversations]
        untrained = self.evaluate(student, model, features, test_ids)
        optimizer = torch.optim.AdamW([p for p in student.parameters() if p.requires_grad], lr=self.lr, weight_decay=0.0)
        local = torch.full((model.config.vocab_size,), -100, dtype=torch.long)
        local[student.draft_vocab] = torch.arange(len(student.draft_vocab))

        def batches(step, generator):
            picked = torch.randperm(len(train_ids), generator=generator)[: self.conversations]
            return [(cod_rows(features.tokens[train_ids[i]], self.block, self.retain, self.floor, generator),
                     self.teacher(model, features, train_ids[i], student.draft_vocab)) for i in picked]

        def loss_fn(batch):
            total, weight = 0.0, 0.0
            for rows, teacher in batch:
                # Labels in the draft vocabulary, after the shared system prompt (`local`: -100 outside it).
                inside = (rows.labels >= 0) & (rows.positions + 1 >= start)
                labels = torch.where(inside, local[rows.labels.clamp(min=0)], -100)
                hidden = block_states(drafter, embed, rows, student.mask_id(model))
                scored = labels != -100
                logits = F.linear(hidden[scored], drafter.lm_head.weight)
                losses, weights = self.row_losses(logits, labels[scored], rows.positions[scored], rows.depth[scored],
                                                  teacher)
                total, weight = total + (losses * weights).sum(), weight + weights.sum()
            return total / max(float(weight), 1e-6)

        state = train_loop(student, optimizer, batches, loss_fn, run, budget_minutes, progress)
        accuracy = self.evaluate(student, model, features, test_ids) | {"untrained": untrained}
        return finish(self, run, student, loaded, features, train_ids, test_ids, state, accuracy, output, command, {},
                      {"trained_on": f"by {self.title}'s adaptation of {label}: on the target's greedy answers, COD batches",
                       "targets": f"{self.objective(len(student.draft_vocab))}; COD retention "
                                  f"{self.retain} a mask depth, floor {self.floor}, blocks of {self.block}"})

    def teacher(self, model, features, conversation: int, draft_vocab: torch.Tensor):
        """What the loss reads from the target for one conversation: nothing, PARD learns the data's tokens."""
        return None

    def row_losses(self, logits, labels, positions, depth, teacher) -> tuple[torch.Tensor, torch.Tensor]:
        """Each scored row's loss and its weight in the batch's mean: cross-entropy, every row alike."""
        return F.cross_entropy(logits, labels, reduction="none"), torch.ones(len(labels))

    def objective(self, vocab: int) -> str:
        return f"labels are the next tokens of the target's answers, cross-entropy over the drafter's {vocab:,}-token head"

    @torch.no_grad()
    def evaluate(self, student: ParallelDraft, target, features, conversations) -> dict:
        """Acceptance of the top-1 block (K drafts from one forward) at every held-out answer position,
        given the greedy text before it: draft m after position t is right when the row of the m-th
        mask after t predicts the target's greedy token there."""
        drafter, embed, accepted = student.drafter(target), student.embed(target), []
        for c in conversations:
            tokens, greedy, first = features.tokens[c], features.greedy[c], features.prompt_lengths[c] - 1
            rows = rows_for(tokens, block_rows(len(tokens), self.block, first_base=first))
            states = block_states(drafter, embed, rows, student.mask_id(target))
            base = rows.positions - rows.depth
            drafting = base >= first  # rows of a block drafted in the answer
            top = student.draft_vocab[F.linear(states[drafting], drafter.lm_head.weight).argmax(-1)]
            hits = torch.zeros(len(tokens), self.block, dtype=torch.bool)
            hits[base[drafting], rows.depth[drafting]] = top == greedy[rows.positions[drafting]]
            complete = torch.arange(len(tokens)) + self.block <= len(tokens)
            runs = hits[first:][complete[first:]].int().cumprod(1).sum(1)
            accepted += runs.tolist()
        return acceptance_summary(accepted, self.block)


@dataclass
class Teacher:
    """The target over one conversation: `confidence[t]`, its probability of the data's token after
    position t (1 after the last), and `log_probs[t]`, its tempered distribution there renormalised
    on the drafter's vocabulary."""

    confidence: torch.Tensor
    log_probs: torch.Tensor


class ConfidenceAdaptiveFamily(ParallelFamily):
    """PARD-2's objective on PARD's drafter and COD batches (module doc): every row weighted by the
    target's probability of reaching it (`cat_weights`), ce x cross-entropy + kd x KL(target ||
    drafter) at `temperature`. Its block, COD floor and loss mix are its code's (`an2026pard`); the
    learning rate, batches and steps PARD's here, so the two differ in their objective and block."""

    name, steps_evaluated = "pard2", _PAPER2.block
    block, retain, floor = _PAPER2.block, _PAPER2.retain, _PAPER2.floor
    ce, kd, temperature = float(_PAPER2.ce), float(_PAPER2.kd), float(_PAPER2.temperature)
    title, paper, aliases = "PARD-2", "an2026pard", ("pard-2", "pard2")

    def layers(self, model):
        # No cached states: the target's probabilities come from a forward over each conversation a
        # step draws (`teacher`), a few hundred conversations, not a pass over the whole data.
        return None

    @torch.no_grad()
    def teacher(self, model, features, conversation, draft_vocab) -> Teacher:
        tokens = features.tokens[conversation]
        logits = model(input_ids=tokens[None].to(model.device)).logits[0].float().cpu()
        confidence = torch.ones(len(tokens))
        confidence[:-1] = logits[:-1].log_softmax(-1).gather(1, tokens[1:, None])[:, 0].exp()
        return Teacher(confidence, (logits[:, draft_vocab] / self.temperature).log_softmax(-1))

    def row_losses(self, logits, labels, positions, depth, teacher):
        cross_entropy = F.cross_entropy(logits, labels, reduction="none")
        drafted = (logits / self.temperature).log_softmax(-1)
        target = teacher.log_probs[positions]
        kl = (target.exp() * (target - drafted)).sum(-1) * self.temperature ** 2
        return self.ce * cross_entropy + self.kd * kl, cat_weights(teacher.confidence, positions, depth)

    def objective(self, vocab: int) -> str:
        return (f"PARD-2's Confidence-Adaptive Token loss over the drafter's {vocab:,}-token head: "
                f"{self.ce:g} x cross-entropy to the answers' next tokens + {self.kd:g} x KL from the target's "
                f"distribution (temperature {self.temperature:g}), each row weighted by the target's probability "
                f"of the tokens before it in its block")


def cat_weights(confidence: torch.Tensor, positions: torch.Tensor, depth: torch.Tensor) -> torch.Tensor:
    """PARD-2's row weights: the row at `positions` of mask depth m drafts the token after it from
    the real tokens up to its base, positions - m; the m data tokens between are the block's earlier
    drafts, and the verification reaches this one with the target's probability of them all,
    prod_{k=1..m} confidence[positions - k]."""
    weights = torch.ones(len(positions))
    for k in range(1, int(depth.max()) + 1 if len(depth) else 1):
        weights = weights * torch.where(depth >= k, confidence[(positions - k).clamp(min=0)], 1.0)
    return weights


@dataclass
class BlockRows:
    """Rows of a parallel-drafting forward over one sequence: real tokens 0..L-1 (depth 0), then
    masks by depth; a mask row of depth m at position j sees the real tokens up to j - m and the
    masks of depths 1..m on its own branch (the same base j - m). `rows_for` adds each row's input
    id (-1 for a mask) and label (the next token, -100 past the end)."""

    positions: torch.Tensor
    depth: torch.Tensor
    inputs: torch.Tensor | None = None
    labels: torch.Tensor | None = None

    def visible(self) -> torch.Tensor:
        """[rows, rows] True where a row sees a row."""
        base = self.positions - self.depth
        real = self.depth == 0
        sees_real = real[None, :] & (self.positions[None, :] <= base[:, None])
        sees_branch = ~real[None, :] & (base[None, :] == base[:, None]) & (self.depth[None, :] <= self.depth[:, None])
        return sees_real | sees_branch


def block_rows(length: int, block: int, kept: list[torch.Tensor] | None = None, first_base: int = 0) -> BlockRows:
    """Every real position, then at each mask depth m < `block` the positions `kept[m - 1]` (every
    one, when `kept` is None; none past the depths it holds) whose base, the real token m before
    them, is at or after `first_base`."""
    positions, depth = [torch.arange(length)], [torch.zeros(length, dtype=torch.long)]
    for m in range(1, block if kept is None else len(kept) + 1):
        chosen = torch.arange(length) if kept is None else kept[m - 1]
        chosen = chosen[chosen - m >= first_base]
        positions.append(chosen)
        depth.append(torch.full_like(chosen, m))
    return BlockRows(torch.cat(positions), torch.cat(depth))


def cod_rows(tokens: torch.Tensor, block: int, retain: float, floor: float, generator) -> BlockRows:
    """A COD batch of one sequence (its code's collator): at mask depth m, max(retain^m, floor) of
    the positions, drawn among those whose depth m - 1 mask (or real token, for m = 1) before them
    was kept, so every kept row's branch is whole; with its labels, the next token of each row."""
    length, kept, previous = len(tokens), [], torch.arange(len(tokens))
    for m in range(1, block):
        count = int(length * max(retain ** m, floor))
        if count == 0:
            break
        chosen = previous[torch.randperm(len(previous), generator=generator)[:count]]
        kept.append(chosen.sort().values)
        previous = chosen + 1
        previous = previous[previous < length]
    return rows_for(tokens, block_rows(length, block, kept))


def rows_for(tokens: torch.Tensor, rows: BlockRows) -> BlockRows:
    """`rows` over `tokens`, with their input ids and labels."""
    length, following = len(tokens), rows.positions + 1
    return replace(rows, inputs=torch.where(rows.depth == 0, tokens[rows.positions], -1),
                   labels=torch.where(following < length, tokens[following.clamp(max=length - 1)], -100))


def block_states(drafter, embed, rows: BlockRows, mask_id: int) -> torch.Tensor:
    """The drafter's final normed states [rows, hidden] over `rows` in one forward."""
    ids = torch.where(rows.inputs < 0, mask_id, rows.inputs)[None]
    visible = rows.visible()
    mask = torch.zeros(visible.shape, dtype=drafter.dtype).masked_fill_(~visible, torch.finfo(drafter.dtype).min)
    out = drafter.model(inputs_embeds=embed(ids), attention_mask=mask[None, None], position_ids=rows.positions[None],
                        use_cache=False)
    return out.last_hidden_state[0]
