"""PaSS (Monea et al. 2023): learned look-ahead tokens that make the frozen target draft in its own forward.

k look-ahead tokens [LA]_1..[LA]_k, each a learned input embedding (the only trained parameters,
k x d_emb), are appended after the text: the target's output at [LA]_j guesses the token j + 1
positions after the last real token, whose own row gives the next token as usual. So one
forward both decodes a token exactly and drafts k more. `LookAheadTokens`' state_dict is ours
(`lookahead_embeddings`, [k, hidden]); the target is untouched.

In the engine the look-ahead rows are ids past the vocabulary (`LookAheadTokens.embed` maps them
to their embeddings in the target forward, `kv.forward(embed=...)`) riding along as auxiliary
draft nodes: never accepted, dropped from the cache with the rejected rows.
"""

from __future__ import annotations

import torch
from torch import nn

from specatlas.impls.engine import kv
from specatlas.impls.engine.drafting import Draft, Drafter
from specatlas.impls.engine.errors import CheckpointError
from specatlas.impls.families.base import Family
from specatlas.impls.families.training import acceptance_summary, finish, loss_vocabulary, split, train_loop


class LookAheadTokens(nn.Module):
    def __init__(self, hidden: int, count: int):
        super().__init__()
        self.lookahead_embeddings = nn.Parameter(torch.zeros(count, hidden))

    def __len__(self) -> int:
        return len(self.lookahead_embeddings)

    def embed(self, embed_tokens: nn.Embedding):
        """The target forward's `embed`: ids below the vocabulary are the target's tokens, id
        vocabulary + j is look-ahead token j + 1."""
        vocab = embed_tokens.num_embeddings

        def embed(ids: torch.Tensor) -> torch.Tensor:
            look = ids >= vocab
            rows = embed_tokens(ids.clamp(max=vocab - 1))
            if not look.any():
                return rows
            extra = self.lookahead_embeddings.to(rows)[(ids - vocab).clamp(min=0)]
            return torch.where(look[..., None], extra, rows)

        return embed


class PassFamily(Family):
    """PaSS's look-ahead embeddings, trained with the target frozen. Per step one training
    conversation: the target runs over it once without gradients (its cache), then look-ahead
    blocks [LA]_1..[LA]_k are appended after `positions` random answer positions t in one forward
    over that cache, each block seeing the text up to t and its own earlier look-ahead rows (the
    attention they get when drafting); the loss is the cross-entropy of [LA]_j's output against
    the target's greedy token j + 1 after t (`LOSS_VOCAB`-restricted, as every head's). Only the
    k embeddings get gradients. They start at the mean token embedding (ours: a neutral input).
    AdamW with the shared schedule."""

    # k = 6 look-ahead tokens is this implementation's choice: the paper (arXiv 2311.13581) ablates
    # their number, and no stated default of it is cited here.
    name, count, positions, lr, default_steps = "pass", 6, 48, 1e-2, 600
    held_out_conversations, held_out_stride = 32, 8  # evaluation: every 8th answer position of 32 conversations
    title, paper, aliases = "PaSS", "monea2023pass", ("pass",)

    def epoch(self, features, train_ids):
        """A step draws `positions` answer positions of one conversation (each with a label after it)."""
        return sum(max(0, len(features.tokens[c]) - features.prompt_lengths[c]) for c in train_ids), \
            self.positions, "answer positions"

    def detect(self, weights, config):
        return ("pass", weights) if "lookahead_embeddings" in weights else None

    def build(self, weights, config, target):
        embeddings = weights["lookahead_embeddings"]
        hidden = target.config.hidden_size
        if embeddings.dim() != 2 or embeddings.shape[1] != hidden or not 1 <= len(embeddings) <= 64:
            raise CheckpointError(f"PaSS look-ahead embeddings have shape {tuple(embeddings.shape)}; the target needs "
                                  f"[1..64, {hidden}]")
        return LookAheadTokens(hidden, len(embeddings)), ()

    def config_for(self, head, target):  # our layout: `specatlas_family` says what the module is
        return {"specatlas_family": self.name, "hidden_size": target.config.hidden_size, "lookahead_tokens": len(head)}

    def describe(self, config):
        return f"{config.get('lookahead_tokens')} PaSS look-ahead token embeddings appended to the frozen target's input"

    def fit(self, loaded, features, run, output, budget_minutes, command, progress) -> str:
        model = loaded.model
        lm_weight = model.lm_head.weight.detach()
        train_ids, test_ids = split(features, run.seed)
        tokens = LookAheadTokens(model.config.hidden_size, self.count)
        with torch.no_grad():
            tokens.lookahead_embeddings.copy_(model.get_input_embeddings().weight.mean(0).float())
        vocabulary = loss_vocabulary(features, train_ids, lm_weight)
        optimizer = torch.optim.AdamW(tokens.parameters(), lr=self.lr, weight_decay=0.0)

        def batches(step, generator):
            c = train_ids[int(torch.randint(len(train_ids), (1,), generator=generator))]
            first, last = features.prompt_lengths[c] - 1, len(features.tokens[c]) - 2  # at least one label after t
            picked = torch.randperm(max(0, last - first + 1), generator=generator)[: self.positions] + first
            return c, sorted(picked.tolist())

        def loss_fn(batch):
            c, starts = batch
            if not starts:  # an answer of one token: nothing to draft after it
                return tokens.lookahead_embeddings.sum() * 0
            hidden, labels = self._look_ahead(model, tokens, features, c, starts)
            return vocabulary.cross_entropy(hidden, labels)

        frozen = [parameter.requires_grad for parameter in model.parameters()]
        model.requires_grad_(False)  # the target is frozen: gradients reach the look-ahead embeddings only
        try:
            state = train_loop(tokens, optimizer, batches, loss_fn, run, budget_minutes, progress)
        finally:
            for parameter, flag in zip(model.parameters(), frozen):
                parameter.requires_grad_(flag)
        accuracy = self.evaluate(model, tokens, features, test_ids)
        return finish(self, run, tokens, loaded, features, train_ids, test_ids, state, accuracy, output, command, {},
                      {"targets": f"labels are the target's greedy tokens 2..{self.count + 1} after each position; "
                                  "the target is frozen"})

    def _look_ahead(self, model, tokens: LookAheadTokens, features, c: int, starts: list[int]):
        """[blocks x k, H] final normed states of look-ahead blocks after the positions `starts` of
        conversation c (one forward over the text's cache), and their labels (-100 past the end)."""
        text, greedy, k = features.tokens[c], features.greedy[c], len(tokens)
        with torch.no_grad():
            cache = kv.new_cache(model)
            model(input_ids=text[: starts[-1] + 1][None].to(model.device), **{kv.cache_argument(type(model)): cache},
                  use_cache=True, logits_to_keep=1)
        prefix, rows = starts[-1] + 1, len(starts) * k
        sees = torch.zeros(rows, prefix + rows, dtype=torch.bool)
        for b, t in enumerate(starts):
            sees[b * k : (b + 1) * k, : t + 1] = True
            sees[b * k : (b + 1) * k, prefix + b * k : prefix + (b + 1) * k] = torch.ones(k, k, dtype=torch.bool).tril()
        mask = torch.zeros(rows, prefix + rows, dtype=model.dtype).masked_fill_(~sees, torch.finfo(model.dtype).min)
        offsets = torch.arange(1, k + 1)
        positions = torch.cat([t + offsets for t in starts])
        out = model.model(inputs_embeds=tokens.lookahead_embeddings.to(model.dtype).repeat(len(starts), 1)[None],
                          attention_mask=mask[None, None].to(model.device), position_ids=positions[None].to(model.device),
                          **{kv.cache_argument(type(model.model)): cache}, use_cache=True)
        labels = torch.full((rows,), -100, dtype=torch.long)
        inside = positions < len(greedy)
        labels[inside] = greedy[positions[inside]]
        return out.last_hidden_state[0].float(), labels

    @torch.no_grad()
    def evaluate(self, model, tokens, features, conversations) -> dict:
        """Top-1 chain acceptance on held-out answers: at every `held_out_stride`-th answer position,
        how many look-ahead drafts in a row are the target's greedy tokens (the draft that follows
        the pending row's token)."""
        accepted, k, lm_weight = [], len(tokens), model.lm_head.weight
        for c in conversations[: self.held_out_conversations]:
            first, last = features.prompt_lengths[c] - 1, len(features.tokens[c]) - 1 - k
            starts = list(range(first, last + 1, self.held_out_stride))
            if not starts:
                continue
            hidden, labels = self._look_ahead(model, tokens, features, c, starts)
            hits = (hidden @ lm_weight.T.float()).argmax(-1) == labels
            accepted += hits.view(len(starts), k).int().cumprod(1).sum(1).tolist()
        return acceptance_summary(accepted, k)


# --------------------------------------------------------------------------------------------
# Drafting


class PassDrafter(Drafter):
    """PaSS (Monea et al. 2023), per step:
    1. the verification forward runs [pending, drafts..., [LA]_1..[LA]_k]: the look-ahead rows follow
       the last draft as auxiliary nodes (they are never accepted and leave the cache with the
       rejected rows);
    2. the verifier keeps the drafts it accepts and adds the target's own next token;
    3. when every draft was kept, the look-ahead rows followed exactly the committed text: their
       outputs are the next draft (row j guesses the token j after the new one), drawn from them as
       from any drafter (top-1 when greedy; sampled and recorded in `Draft.q` when sampling, so
       speculative sampling stays exact);
    4. after a rejection they followed rejected text, so the next forward drafts only,
       [new token, [LA]_1..[LA]_k]: the paper's drafting phase, itself a plain decoding step.
    `vocab_size`: the target's embedding rows (look-ahead ids follow them)."""

    def __init__(self, vocab_size: int, count: int, label: str = ""):
        self.ids, self.label = [vocab_size + j for j in range(count)], label
        self.rows, self.after = None, 0

    def start(self, prompt, prefill):
        self.rows, self.after = None, 0

    def propose(self, context, depth, sampling, rng):
        tokens, q = [], []
        if self.rows is not None and self.after == len(context):
            for j, logits in enumerate(self.rows[:depth]):
                if sampling.greedy:
                    tokens.append(int(logits.argmax()))
                else:
                    q.append(sampling.probs(logits))
                    tokens.append(rng.categorical(q[-1], len(context) + j, "draft"))
        self.rows = None
        look = self.ids[: min(depth, len(self.ids))]
        draft = Draft.chain(tokens + look, torch.stack(q) if q else None)
        draft.auxiliary = len(look)
        return draft

    def observe(self, step):
        draft = step.draft
        if draft.auxiliary and len(step.accepted) == draft.proposed:
            self.rows, self.after = step.logits[1 + draft.proposed :], len(step.committed)

    def describe(self):
        return f"PaSS look-ahead tokens ({len(self.ids)}; {self.label})"
