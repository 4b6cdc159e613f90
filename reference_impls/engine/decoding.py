"""The one speculative loop every method runs: propose, verify, accept, commit.

A `Session` is one generation's target state: its KV cache always holds every committed token
but the last ("pending") one, which opens the next verification forward: [pending, draft
nodes...]. `Session.step(draft)` runs that forward, the verifier, the KV rollback and the commit.
With no draft the forward is a plain decoding step, so the autoregressive baseline is the loop
with no drafter. The target forward is pluggable (`kv.forward`'s signature), so a layer view of
the target or an inner session can take its place. Self-speculative drafters reach the target's
layers only through `Prefill.target` (a scratch of the cache, see `drafting.TargetLayers`), and
a draft that carries an early exit's states (`Draft.exit_states`) is verified from its exit layer.
`SpeculativeDecoder.step` (draft, verify, accept, record) is the one step every loop runs: the
decoder's own, an inner decoder's (staged speculation) and PEARL's overlapped rounds.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import torch

from specatlas.impls.engine import kv
from specatlas.impls.engine.drafting import Draft, Drafter, Prefill, TargetLayers, Verified
from specatlas.impls.engine.draft_length import FixedLength
from specatlas.impls.engine.layer_view import forward_from_exit
from specatlas.impls.engine.sampling import Randomness, Sampling
from specatlas.impls.engine.verification import GreedyMatch, RejectionSampling, Verifier


@dataclass
class Stats:
    new_tokens: int = 0
    target_forwards: int = 0  # the prefill included
    accepted_lengths: list[int] = field(default_factory=list)  # per step: accepted drafts + 1 (Spec-Bench)
    drafted_at: list[int] = field(default_factory=list)  # per draft position: steps that reached it
    accepted_at: list[int] = field(default_factory=list)
    prefill_seconds: float = 0.0
    draft_seconds: float = 0.0
    verify_seconds: float = 0.0
    forward_seconds: float = 0.0  # of verify_seconds, the target's verification forwards (`Session.score`)
    wall_seconds: float = 0.0

    @property
    def tokens_per_second(self) -> float:
        return self.new_tokens / self.wall_seconds if self.wall_seconds else 0.0

    @property
    def mean_accepted(self) -> float:
        return sum(self.accepted_lengths) / len(self.accepted_lengths) if self.accepted_lengths else 0.0

    @property
    def overlapped_seconds(self) -> float:
        """Seconds of drafting and verification that ran at once (PEARL's drafter on its thread), at
        least: their sum less the decoding's wall time, which also holds the acceptance and the
        bookkeeping. 0 for a loop that drafts, then verifies."""
        return max(0.0, self.draft_seconds + self.verify_seconds - (self.wall_seconds - self.prefill_seconds))

    @property
    def acceptance_by_position(self) -> list[float]:
        return [a / d if d else 0.0 for a, d in zip(self.accepted_at, self.drafted_at)]

    def as_dict(self) -> dict:
        return {
            "new_tokens": self.new_tokens,
            "target_forwards": self.target_forwards,
            "tokens_per_second": round(self.tokens_per_second, 2),
            "mean_accepted_tokens": round(self.mean_accepted, 3),
            "accepted_lengths": self.accepted_lengths,
            "acceptance_by_position": [round(x, 3) for x in self.acceptance_by_position],
            "drafted_at": self.drafted_at,
            "prefill_seconds": round(self.prefill_seconds, 4),
            "draft_seconds": round(self.draft_seconds, 4),
            "verify_seconds": round(self.verify_seconds, 4),
            "forward_seconds": round(self.forward_seconds, 4),
            "overlapped_seconds": round(self.overlapped_seconds, 4),
            "wall_seconds": round(self.wall_seconds, 4),
        }

    def record(self, draft: Draft, accepted: list[int], committed: int) -> None:
        """One verification of `draft` that committed `committed` tokens: the accepted drafts and
        the target's token, or the drafts alone (PEARL's post-verify)."""
        reached = min(draft.depth, len(accepted) + 1)
        for position in range(reached):
            if position == len(self.drafted_at):
                self.drafted_at.append(0)
                self.accepted_at.append(0)
            self.drafted_at[position] += 1
            self.accepted_at[position] += position < len(accepted)
        self.accepted_lengths.append(committed)


@dataclass
class Round:
    """What a step verifies: its `draft` and the target's verification forward over it (`Session.score`:
    [pending] + its nodes, the last one unscored in PEARL's post-verify), with the seconds each took
    (drafting, then verifying; or at once, PEARL's overlap)."""
    draft: Draft
    scored: kv.ForwardOutput
    draft_seconds: float
    verify_seconds: float


@dataclass
class Output:
    tokens: list[int]  # new tokens only
    stats: Stats


class ContextError(kv.Unsupported):
    """The prompt does not fit the model's context; the message is one line for the user."""


def room_after(model, prompt: list[int], max_new_tokens: int = 1) -> int | None:
    """How many tokens fit after `prompt` in the model's context (None: its config sets no limit);
    a `ContextError` when the prompt and `max_new_tokens` new tokens do not fit."""
    limit = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    if not prompt:
        raise ContextError("the prompt is empty")
    if limit is not None and len(prompt) >= limit:
        raise ContextError(f"the prompt has {len(prompt)} tokens; the model's context holds {limit} "
                           "(prompt and output together)")
    if limit is not None and len(prompt) + max_new_tokens > limit:
        raise ContextError(f"the prompt is {len(prompt)} tokens and {max_new_tokens} new tokens are asked for: "
                           f"together more than the model's {limit}-token context; shorten the prompt or ask "
                           "for fewer tokens")
    return None if limit is None else limit - len(prompt)


def finished(tensor: torch.Tensor) -> None:
    """Wait for the kernels queued before `tensor` is ready: CUDA and MPS run them asynchronously, so a
    timer read without this would count their launch, and the first read of the result (acceptance)
    would pay for them instead. On a CPU the forward has already run."""
    if tensor.device.type == "cuda":
        torch.cuda.synchronize(tensor.device)
    elif tensor.device.type == "mps":
        torch.mps.synchronize()


class Session:
    """One generation on the target: its KV cache and the committed tokens.

    Built on a prompt, it prefills the target (every prompt token but the last, with the hidden
    states in `hidden_layers`: `self.prefill`); then each `step(draft)` verifies a draft and
    commits what the target keeps. `forward` has `kv.forward`'s signature.
    """

    def __init__(self, target, prompt: list[int], sampling: Sampling = Sampling(), rng: Randomness | None = None,
                 verifier: Verifier | None = None, hidden_layers=(), forward: Callable = kv.forward):
        self.room = room_after(target, prompt)  # tokens that still fit after the prompt
        self.target, self.forward, self.sampling = target, forward, sampling
        self.rng = rng or Randomness(0)
        self.verifier = verifier or (GreedyMatch() if sampling.greedy else RejectionSampling())
        self.hidden_layers = tuple(sorted(set(hidden_layers)))
        self.tokens = list(prompt)
        self.cache = kv.new_cache(target)
        self.forwards = 0
        self.forward_seconds = 0.0  # in `score`'s forwards: a step's verification less acceptance and bookkeeping
        hidden = {}
        if len(prompt) > 1:
            out = forward(target, self.cache, self.tokens[:-1], hidden_layers=self.hidden_layers, last_only=True)
            hidden, self.forwards = out.hidden_states, 1
        elif self.hidden_layers:  # nothing before the pending token: zero rows
            size = getattr(getattr(target, "config", None), "hidden_size", 0)
            hidden = {layer: torch.zeros(0, size, dtype=target.dtype, device=target.device) for layer in self.hidden_layers}
        self.prefill = Prefill(tuple(prompt), hidden, TargetLayers(target, self.cache))

    def step(self, draft: Draft) -> Verified:
        """One verification forward over [pending] + draft, acceptance, KV rollback, commit."""
        return self.settle(draft, self.score(draft))

    def score(self, draft: Draft) -> kv.ForwardOutput:
        """The verification forward over [pending] + draft (row 0: the pending token)."""
        rows, tree = [self.tokens[-1]] + draft.tokens, [-1] + [parent + 1 for parent in draft.parents]
        self.forwards += 1
        begin = time.perf_counter()
        if draft.exit_states is None:
            out = self.forward(self.target, self.cache, rows, tree=tree, hidden_layers=self.hidden_layers)
        else:  # an early exit already ran the first rows through the shallow layers
            out = forward_from_exit(self.target, self.cache, draft.exit_states, rows, tree, self.hidden_layers)
        finished(out.logits)
        self.forward_seconds += time.perf_counter() - begin
        return out

    def settle(self, draft: Draft, out: kv.ForwardOutput) -> Verified:
        """Acceptance, KV rollback and commit of `draft` on `score`'s forward. That forward may have
        scored all of `draft` but its last node (PEARL): accepted, that node is committed unscored,
        as the next pending token, and no target token follows it."""
        pending, opened = len(self.tokens) - 1, self.tokens[-1]
        scored = len(out.logits) - 1
        accepted, next_token = self.verifier.verify(draft, out.logits, self.sampling, self.rng, len(self.tokens))
        kv.keep_rows(self.cache, pending, [0] + [node + 1 for node in accepted if node < scored])
        self.tokens += [draft.tokens[node] for node in accepted] + ([] if next_token is None else [next_token])
        return Verified(draft, out.logits, out.hidden_states, accepted, tuple(self.tokens), opened)

    def rewind(self, length: int) -> None:
        """Forget the committed tokens past `length` (an outer verifier rejected them)."""
        del self.tokens[max(length, 1) :]
        kv.truncate(self.cache, len(self.tokens) - 1)

    def commit(self, tokens: list[int]) -> None:
        """Commit `tokens` decided elsewhere (e.g. by an outer target), without verifying them."""
        if tokens:
            self.forward(self.target, self.cache, self.tokens[-1:] + tokens[:-1])
            self.forwards += 1
            self.tokens += tokens


@dataclass
class SpeculativeDecoder:
    target: torch.nn.Module
    drafter: Drafter | None = None
    greedy_verifier: Verifier = field(default_factory=GreedyMatch)
    sampling_verifier: Verifier = field(default_factory=RejectionSampling)
    draft_length: object = field(default_factory=lambda: FixedLength(0))
    forward: Callable = kv.forward  # the target forward (kv.forward's signature)
    clock: Callable[[], float] = time.perf_counter  # what the stats and the draft-length policy time with
    # The trained files its build loaded (heads, drafters, rankings, datastores), by the name a result
    # row gives each: a method's provenance, returned with it by its builder.
    weights: dict[str, Path] = field(default_factory=dict)

    def verifier(self, sampling: Sampling) -> Verifier:
        """The verifier that decides under `sampling`."""
        return self.greedy_verifier if sampling.greedy else self.sampling_verifier

    @torch.inference_mode()
    def generate(self, prompt: list[int], max_new_tokens: int, sampling: Sampling = Sampling(),
                 rng: Randomness | None = None, stop: set[int] = frozenset(),
                 on_tokens: Callable[[list[int]], None] | None = None) -> Output:
        clock = self.clock
        stats, started = Stats(), clock()
        verifier = self.verifier(sampling)
        layers = self.drafter.hidden_layers if self.drafter else ()
        session = Session(self.target, prompt, sampling, rng, verifier, layers, self.forward)
        if self.drafter:
            self.drafter.start(list(prompt), session.prefill)
        stats.prefill_seconds = clock() - started
        limit = max_new_tokens if session.room is None else min(max_new_tokens, session.room)

        for step in self.steps(session, sampling, limit, stats):
            new = list(step.committed[len(prompt) + stats.new_tokens :])[: limit - stats.new_tokens]
            done = next((i for i, token in enumerate(new) if token in stop), None)
            if done is not None:
                new = new[: done + 1]
            stats.new_tokens += len(new)
            if on_tokens:
                on_tokens(new)
            if done is not None:
                break
        stats.target_forwards = session.forwards
        stats.forward_seconds = session.forward_seconds
        stats.wall_seconds = clock() - started
        return Output(list(session.tokens[len(prompt) :][: stats.new_tokens]), stats)

    def steps(self, session: Session, sampling: Sampling, limit: int, stats: Stats) -> Iterator[Verified]:
        """Steps until `limit` new tokens (`stats.new_tokens`, counted by the caller)."""
        while stats.new_tokens < limit:
            yield self.step(session, sampling, limit - stats.new_tokens - 1, stats)

    def step(self, session: Session, sampling: Sampling, room: int, stats: Stats | None = None,
             draw: Callable[[Session, int, Sampling], Round] | None = None) -> Verified:
        """The step every loop runs: a draft of at most `room` tokens, its verification, acceptance
        and commit, recorded in `stats`, the draft-length policy and the drafter. `draw(session,
        depth, sampling)` makes the draft and its verification forward: `draft_then_score` unless
        a loop overlaps the two (PEARL)."""
        self.draft_length.at(len(session.tokens))  # attention's cost grows with the context
        depth = max(0, min(self.draft_length.choose(), room)) if self.drafter else 0
        drawn = (draw or self.draft_then_score)(session, depth, sampling)
        before, begin = len(session.tokens), self.clock()
        step = session.settle(drawn.draft, drawn.scored)
        verify_seconds = drawn.verify_seconds + self.clock() - begin  # acceptance and commit included
        if stats is not None:
            stats.draft_seconds += drawn.draft_seconds
            stats.verify_seconds += verify_seconds
            stats.record(drawn.draft, step.accepted, len(step.committed) - before)
        self.draft_length.record(drawn.draft, len(step.accepted), drawn.draft_seconds, verify_seconds,
                                 len(drawn.scored.logits))
        if self.drafter:
            self.drafter.observe(step)
        return step

    def draft_then_score(self, session: Session, depth: int, sampling: Sampling) -> Round:
        """The drafter's draft of `depth` tokens (none at 0), then the target's forward over it."""
        begin = self.clock()
        draft = self.draft_length.trim(self.drafter.propose(session.tokens, depth, sampling, session.rng)) if depth else Draft()
        drafted = self.clock()
        scored = session.score(draft)
        return Round(draft, scored, drafted - begin, self.clock() - drafted)


class InnerDecoder(Drafter):
    """A speculative decoder on a smaller model as the drafter of an outer one (staged / cascade
    speculation): it drafts `depth` tokens by greedy speculative decoding on its own model, its
    own drafter included. Its session keeps that model's cache for the whole generation: each
    call rewinds what the outer target rejected and commits what it decided instead, so nothing
    is prefilled twice. Its drafts are greedy (point masses): lossless under any outer verifier.

    `tree_nodes` > 0 (staged speculation's tree-structured batch): the draft is the `tree_nodes`
    most probable nodes, by the draft model's cumulative probability, of its greedy chain and the
    alternatives to each chain token (read from the inner verifications' logits: no extra forward)."""

    def __init__(self, decoder: SpeculativeDecoder, tree_nodes: int = 0, label: str = "a draft model"):
        self.decoder, self.tree_nodes, self.label, self.session, self.agreed = decoder, tree_nodes, label, None, 0

    def start(self, prompt, prefill):
        inner = self.decoder
        layers = inner.drafter.hidden_layers if inner.drafter else ()
        self.session = Session(inner.target, list(prompt), hidden_layers=layers, forward=inner.forward)
        self.agreed = len(prompt)
        if inner.drafter:
            inner.drafter.start(list(prompt), self.session.prefill)

    def propose(self, context, depth, sampling, rng):
        inner, session = self.decoder, self.session
        common = self.agreed
        while common < min(len(session.tokens), len(context)) and session.tokens[common] == context[common]:
            common += 1
        session.rewind(common)
        session.commit(list(context[common:]))
        self.agreed = start = len(context)
        rows = []  # the draft model's logits that chose each token drafted now
        while len(session.tokens) - start < depth:
            step = inner.step(session, session.sampling, depth - (len(session.tokens) - start) - 1)
            rows += [step.logits[row] for row in [0] + [node + 1 for node in step.accepted]]
        chain = session.tokens[start : start + depth]
        return self._tree(chain, torch.stack(rows).softmax(-1)) if self.tree_nodes and chain else Draft.chain(chain)

    def _tree(self, chain: list[int], probs: torch.Tensor) -> Draft:
        """The `tree_nodes` best of: the chain's tokens and the alternatives to each (parent: the
        chain token before), scored by cumulative draft probability; a parent never scores below
        its child, so the best nodes form a tree."""
        prefix, nodes = 1.0, []  # (score, depth, is an alternative, token)
        for depth, (token, p) in enumerate(zip(chain, probs)):
            top = p.topk(min(self.tree_nodes + 1, p.numel()))
            nodes += [(prefix * float(q), depth, 1, int(t)) for q, t in zip(top.values, top.indices) if int(t) != token]
            prefix *= float(p[token])
            nodes.append((prefix, depth, 0, token))
        best = sorted(sorted(nodes, key=lambda n: (-n[0], n[1], n[2]))[: self.tree_nodes], key=lambda n: (n[1], n[2], -n[0]))
        draft, chain_node = Draft(), {}
        for _, depth, alternative, token in best:
            draft.tokens.append(token)
            draft.parents.append(chain_node.get(depth - 1, -1))
            if not alternative:
                chain_node[depth] = len(draft.tokens) - 1
        return draft

    def describe(self):
        inner = self.decoder
        tree = f", a {self.tree_nodes}-node tree" if self.tree_nodes else ""
        return f"inner speculative decoder ({inner.drafter.describe() if inner.drafter else 'plain decoding'} on {self.label}{tree})"
