"""ReDrafter (Cheng, Zhang et al. 2024): one recurrent draft head, searched by beam search.

`RecurrentDrafter`'s `state_dict()` is apple/ml-recurrent-drafter's `Drafter` layout (written by
`save_pretrained`: config.json with `model_type: recurrent_drafting_drafter`, model.safetensors):
a one-layer RNN over the embeddings of the drafted tokens, s_k = SiLU(U s_{k-1} + W e_k + b)
from s_0 = 0 (`rnn_u` holds U and b, `rnn_w` W; without `rnn` the state is the running sum of
the embeddings), then `lm_head`: residual blocks x + SiLU(A x + c) over [h, s_k] and the head's
own vocabulary projection, h being the target's final state. An optional `input_proj` maps
[h, s] to `exit_dim` when that is not 2H.

The paper's drafter and its code project over the whole vocabulary with weights of their own (not
tied to the LLM's head; its train.py sets exit_dim = 2H). Ours, to ship: that projection covers a
draft vocabulary, the target tokens its answers use most, mapped to target ids by `d2t` as in
EAGLE-3 (target id = draft id + d2t[draft id]), and exit_dim = H through the code's own
`input_proj`. A checkpoint without `d2t` is the published full-vocabulary layout and loads as one.
"""

from __future__ import annotations

import re

import torch
from torch import nn
from torch.nn import functional as F

from specatlas.impls.drafters.model_free.retrieval import trie_draft
from specatlas.impls.engine.drafting import Draft
from specatlas.impls.engine.errors import CheckpointError
from specatlas.impls.families.base import Family, draft_vocabulary, positions_epoch
from specatlas.impls.families.medusa import MedusaDrafter, ResBlock
from specatlas.impls.registry import METHODS
from specatlas.impls.families.training import (acceptance_summary, coverage, draft_tokens, finish, shared_prompt_prefix, split,
                                                teacher_forced, train_loop)

MODEL_TYPE = "recurrent_drafting_drafter"  # its DrafterConfig's


class RecurrentDrafter(nn.Module):
    """`draft_vocab_size`: the projection ranks that many draft tokens, `to_target` maps them to
    target ids through `d2t`; None: the whole vocabulary, the published layout (no `d2t`)."""

    def __init__(self, hidden: int, vocab_size: int, num_layers: int = 2, exit_dim: int | None = None, rnn: bool = True,
                 draft_vocab_size: int | None = None):
        super().__init__()
        exit_dim = exit_dim or 2 * hidden
        if exit_dim != 2 * hidden:
            self.input_proj = nn.Linear(2 * hidden, exit_dim)
        self.lm_head = nn.Sequential(*(ResBlock(exit_dim) for _ in range(num_layers)),
                                     nn.Linear(exit_dim, draft_vocab_size or vocab_size, bias=False))
        if rnn:
            self.rnn_u = nn.Linear(hidden, hidden)
            self.rnn_w = nn.Linear(hidden, hidden, bias=False)
        if draft_vocab_size is not None:  # identity until set: draft id i is target id i
            self.register_buffer("d2t", torch.zeros(draft_vocab_size, dtype=torch.long))
        self.hidden, self.num_layers, self.exit_dim, self.rnn = hidden, num_layers, exit_dim, rnn

    def step(self, state: torch.Tensor, embeds: torch.Tensor) -> torch.Tensor:
        """The state after one more drafted token (its embedding `embeds`)."""
        return F.silu(self.rnn_u(state) + self.rnn_w(embeds)) if self.rnn else state + embeds

    def features(self, hidden: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        """The residual blocks' output over [h, s], before the vocabulary projection."""
        x = torch.cat([hidden, state], -1)
        return self.lm_head[:-1](self.input_proj(x) if hasattr(self, "input_proj") else x)

    def logits(self, hidden: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        """Logits over the draft vocabulary (the whole vocabulary without `d2t`)."""
        return self.lm_head[-1](self.features(hidden, state))

    def to_target(self, draft_ids: torch.Tensor) -> torch.Tensor:
        return draft_ids + self.d2t[draft_ids] if hasattr(self, "d2t") else draft_ids


REDRAFTER_KEY = re.compile(r"^(?:rnn_[uw]|lm_head\.\d+|input_proj)\.")


# Ours, to ship the head: the paper's projection over SmolLM2's 49,152 tokens at exit_dim = 2H is 57M
# weights, 115 MB in float16. A draft vocabulary of the 4,096 target tokens its training answers use
# most covers 87.9% of the held-out answer tokens (8,192: 93.2%; counted on answer shards 1-16, shard
# 0 held out), and exit_dim = H halves the projection and the blocks: ~4.4M weights, ~9 MB.
DRAFT_VOCAB, EXIT_WIDTH = 4096, 1  # exit_dim = EXIT_WIDTH x H (the paper's code: 2)


class ReDrafterFamily(Family):
    """ReDrafter's head as its train.sh trains it (2 residual blocks, the RNN on), learning from
    the target's own answers: the paper distils the LLM into the drafter by training on the LLM's
    outputs, here its greedy ones. At position t, draft k reads (final state t, RNN state after
    tokens t+1 .. t+k+1, teacher-forced) and is scored by cross-entropy against the target's greedy
    token at t+k+2, `predict` = 5 drafts (drafter_predict_n_tokens) weighted equally (its
    drafter_loss), on the positions whose label is in the draft vocabulary (EAGLE-3 masks the rest).
    Ours: the draft vocabulary and exit width above; AdamW at 1e-3 (its lr), cosine schedule, 256
    positions a step; `input_proj` starts by passing h through, the residual blocks as the identity
    and the projection as the target's LM head rows of the draft tokens, as Medusa's own-vocabulary
    heads start from the target's head, so a short CPU schedule need not learn the token vectors
    from scratch."""

    name, predict, num_layers, batch, lr, default_steps = "redrafter", 5, 2, 256, 1e-3, 1500
    draft_vocab, exit_width = DRAFT_VOCAB, EXIT_WIDTH
    title, paper, aliases = "ReDrafter", "zhang2024recurrent", ("redrafter",)
    epoch = positions_epoch

    def detect(self, weights, config):
        if config.get("model_type") == MODEL_TYPE or any(map(REDRAFTER_KEY.match, weights)):
            return "redrafter", weights
        return None

    def build(self, weights, config, target):
        hidden, vocab, layers = target.config.hidden_size, target.config.vocab_size, target.config.num_hidden_layers
        self.check_sizes(config, target, "the ReDrafter head was trained")
        num_layers = config.get("num_draft_layers", sum(bool(re.match(r"lm_head\.\d+\.linear\.weight$", k)) for k in weights))
        draft = config.get("draft_vocab_size")
        if draft is not None and "d2t" not in weights:
            raise CheckpointError(f"config.json names a draft vocabulary of {draft!r:.20} tokens but the weights have "
                                  "no d2t (draft id -> target id offsets)")
        if "d2t" in weights:
            draft = draft or len(weights["d2t"])
            if type(draft) is not int or not 0 < draft <= vocab:
                raise CheckpointError(f"the ReDrafter draft_vocab_size {draft!r:.20} is not a size up to {vocab}")
            draft_vocabulary(weights["d2t"], None, draft, vocab, "the ReDrafter head's")
        projection, rows = weights.get(f"lm_head.{num_layers}.weight"), draft or vocab
        if projection is not None and projection.shape[0] != rows:
            wanted = f"its draft vocabulary of {draft} (d2t)" if draft else f"the target's vocabulary of {vocab} (no d2t)"
            raise CheckpointError(f"the ReDrafter head projects to {projection.shape[0]} tokens, not {wanted}")
        return RecurrentDrafter(hidden, vocab, num_layers, config.get("exit_dim"),
                                bool(config.get("rnn", "rnn_u.weight" in weights)), draft), (layers,)

    def config_for(self, head, target):  # its DrafterConfig, plus our draft vocabulary's size
        draft = {"draft_vocab_size": len(head.d2t)} if hasattr(head, "d2t") else {}
        return {"model_type": MODEL_TYPE, "vocab_size": target.config.vocab_size, "hidden_size": head.hidden,
                "exit_dim": head.exit_dim, "num_draft_layers": head.num_layers, "rnn": head.rnn} | draft

    def describe(self, config):
        hidden, draft = config.get("hidden_size"), config.get("draft_vocab_size")
        ours = [f"a draft vocabulary of the {draft} target tokens the training answers use most (d2t), not "
                f"the whole {config.get('vocab_size')}"] if draft else []
        if config.get("exit_dim") != 2 * (hidden or 0):
            ours.append(f"exit_dim {config.get('exit_dim')} through input_proj, not 2 x {hidden}")
        labelled = f"; ours, not the paper's, to ship small: {' and '.join(ours)}" if ours else ""
        return (f"A ReDrafter head (a one-layer RNN over the drafted tokens' embeddings beside the target's final "
                f"state, {config.get('num_draft_layers')} residual blocks and its own vocabulary projection{labelled})")

    def head(self, hidden: int, vocab: int, used: torch.Tensor) -> RecurrentDrafter:
        """A head of this family's settings whose draft vocabulary is the target ids `used` (increasing)."""
        head = RecurrentDrafter(hidden, vocab, self.num_layers, self.exit_width * hidden, draft_vocab_size=len(used))
        head.d2t.copy_(used - torch.arange(len(used)))
        return head

    def fit(self, loaded, features, run, output, budget_minutes, command, progress) -> str:
        model = loaded.model
        final, hidden, vocab = model.config.num_hidden_layers, model.config.hidden_size, model.config.vocab_size
        embed, lm_weight = model.model.embed_tokens.weight.detach(), model.lm_head.weight.detach()
        train_ids, test_ids = split(features, run.seed)
        used, draft_id = draft_tokens(features, train_ids, vocab, self.draft_vocab)
        head = self.head(hidden, vocab, used)
        width = min(hidden, head.exit_dim)  # the part of exit_dim that starts as h
        with torch.no_grad():  # start as the target's head on h: blocks the identity (Medusa's ResBlock)
            head.lm_head[-1].weight.zero_()
            head.lm_head[-1].weight[:, :width] = lm_weight[used, :width]
            if hasattr(head, "input_proj"):  # [h, s] -> h; s is read once learnt
                head.input_proj.weight.zero_()
                head.input_proj.bias.zero_()
                head.input_proj.weight[:width, :width] = torch.eye(width)
        rows, inputs, labels = teacher_forced(features, train_ids, shared_prompt_prefix(features), final, self.predict)
        labels = torch.where(labels == -100, -100, draft_id[labels.clamp(min=0)])
        optimizer = torch.optim.AdamW(head.parameters(), lr=self.lr, weight_decay=0.0)

        def batches(step, generator):
            pick = torch.randint(len(rows), (self.batch,), generator=generator)
            return rows[pick].float(), F.embedding(inputs[pick], embed), labels[pick]

        def loss_fn(batch):
            h, embeds, y = batch
            state, loss = torch.zeros_like(h), head.lm_head[-1].weight.sum() * 0  # a graph even if no label is draftable
            for k in range(self.predict):
                state = head.step(state, embeds[:, k])
                scored = y[:, k] != -100
                if scored.any():
                    loss = loss + F.cross_entropy(head.logits(h[scored], state[scored]), y[scored, k])
            return loss

        state = train_loop(head, optimizer, batches, loss_fn, run, budget_minutes, progress)
        accuracy = self.evaluate(head, features, test_ids, embed, final)
        covered = coverage(features, test_ids, used)
        return finish(self, run, head, loaded, features, train_ids, test_ids, state, accuracy, output, command, {},
                      {"targets": f"labels are the target's greedy tokens, scored where they are draft tokens "
                                  f"({covered:.1%} of the held-out answer tokens are)"})

    @torch.no_grad()
    def evaluate(self, head, features, conversations, embed, final) -> dict:
        """Top-1 chain acceptance on held-out answers (teacher-forced inputs give a chain's count
        exactly: they differ from the drafted ones only after a miss, where the count has stopped)."""
        accepted = []
        for c in conversations:
            rows, inputs, labels = teacher_forced(features, [c], features.prompt_lengths[c] - 1, final, self.predict)
            h, embeds = rows.float(), F.embedding(inputs, embed)
            state, hits = torch.zeros_like(h), []
            for k in range(self.predict):
                state = head.step(state, embeds[:, k])
                hits.append(head.to_target(head.logits(h, state).argmax(-1)) == labels[:, k])
            full = (labels != -100).all(1)
            accepted += torch.stack(hits, 1)[full].int().cumprod(1).sum(1).tolist()
        return acceptance_summary(accepted, self.predict)


# --------------------------------------------------------------------------------------------
# Drafting


# Its README's MT-Bench command (cmd/generate.py): beam width 45, beam length 5, a beam being the
# target's own token and 4 drafts; `warp_logits` keeps each beam's 50 likeliest next tokens.
# (Its definition's numbers, `registry.py`.)
_PAPER = METHODS["zhang2024recurrent"].paper
BEAM_WIDTH, BEAM_LENGTH, BEAM_TOP_K = _PAPER.width, _PAPER.length, _PAPER.top_k


class ReDrafterDrafter(MedusaDrafter):
    """ReDrafter (Cheng, Zhang et al. 2024), per step (h and its updates as Medusa's):
    1. h = the target's last kept final state, x = the pending token its logits chose;
    2. beam search over the RNN from s_0 = 0 and x: each beam's state takes its last token, each
       beam is extended by its 50 likeliest tokens (renormalised among them), scored by
       log P(beam) + log P(token | h, s), and the best `width` extensions are kept, `length` - 1 times;
    3. dynamic tree attention: the beams are merged into a prefix tree, so a prefix shared by
       several beams is one node, verified once;
    4. the target verifies the tree in one forward; its kept rows give the next h."""

    def __init__(self, head, embed_weight, final_layer: int, width: int = BEAM_WIDTH, length: int = BEAM_LENGTH,
                 label: str = ""):
        super().__init__(head, None, final_layer, tree=None, label=label)
        self.embed_weight, self.width, self.length = embed_weight, width, length

    def propose(self, context, depth, sampling, rng):
        if self.state is None:
            return Draft()
        beams = self.beam_search(context[-1], min(depth, self.length - 1))
        return trie_draft(beams.cpu().numpy(), beams.numel())

    def beam_search(self, token: int, steps: int) -> torch.Tensor:
        """[beams, steps] drafted tokens after `token`, the best-scoring beam first."""
        device = self.state.device
        beams, score = torch.empty(1, 0, dtype=torch.long, device=device), torch.zeros(1, dtype=self.state.dtype, device=device)
        last, state = torch.tensor([token], device=device), torch.zeros_like(self.state)[None]
        for _ in range(steps):
            state = self.heads.step(state, F.embedding(last, self.embed_weight))
            logits = self.heads.logits(self.state.expand(len(state), -1), state)  # over the draft vocabulary
            top, tokens = logits.topk(min(BEAM_TOP_K, logits.shape[-1]), -1)
            scores = (score[:, None] + top.log_softmax(-1)).flatten()
            score, index = scores.topk(min(self.width, len(scores)))
            parent, last = index // top.shape[1], self.heads.to_target(tokens.flatten()[index])
            beams, state = torch.cat([beams[parent], last[:, None]], 1), state[parent]
        return beams

    def describe(self):
        return f"ReDrafter head (beam width {self.width}, length {self.length}; {self.label})"
