"""The one speculative loop every method runs: propose, verify, accept, commit.

The target's cache always holds every committed token but the last ("pending") one, which opens
the next verification forward: [pending, draft nodes...]. With no draft that forward is a plain
decoding step, so the autoregressive baseline is this loop with no drafter.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import torch

from specatlas.impls import kv
from specatlas.impls.drafting import Draft, Drafter, Verified
from specatlas.impls.draft_length import FixedLength
from specatlas.impls.sampling import Randomness, Sampling
from specatlas.impls.verification import GreedyMatch, RejectionSampling, Verifier


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
    wall_seconds: float = 0.0

    @property
    def tokens_per_second(self) -> float:
        return self.new_tokens / self.wall_seconds if self.wall_seconds else 0.0

    @property
    def mean_accepted(self) -> float:
        return sum(self.accepted_lengths) / len(self.accepted_lengths) if self.accepted_lengths else 0.0

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
            "prefill_seconds": round(self.prefill_seconds, 4),
            "draft_seconds": round(self.draft_seconds, 4),
            "verify_seconds": round(self.verify_seconds, 4),
            "wall_seconds": round(self.wall_seconds, 4),
        }

    def record(self, draft: Draft, accepted: list[int]) -> None:
        reached = min(draft.depth, len(accepted) + 1)
        for position in range(reached):
            if position == len(self.drafted_at):
                self.drafted_at.append(0)
                self.accepted_at.append(0)
            self.drafted_at[position] += 1
            self.accepted_at[position] += position < len(accepted)
        self.accepted_lengths.append(len(accepted) + 1)


@dataclass
class Output:
    tokens: list[int]  # new tokens only
    stats: Stats


@dataclass
class SpeculativeDecoder:
    target: torch.nn.Module
    drafter: Drafter | None = None
    greedy_verifier: Verifier = field(default_factory=GreedyMatch)
    sampling_verifier: Verifier = field(default_factory=RejectionSampling)
    draft_length: object = field(default_factory=lambda: FixedLength(0))

    @torch.inference_mode()
    def generate(self, prompt: list[int], max_new_tokens: int, sampling: Sampling = Sampling(),
                 rng: Randomness | None = None, stop: set[int] = frozenset(),
                 on_tokens: Callable[[list[int]], None] | None = None) -> Output:
        rng = rng or Randomness(0)
        verifier = self.greedy_verifier if sampling.greedy else self.sampling_verifier
        want_hidden = bool(self.drafter and self.drafter.needs_hidden_states)
        stats, tokens, started = Stats(), list(prompt), time.perf_counter()
        cache = kv.new_cache(self.target)
        if len(prompt) > 1:
            kv.forward(self.target, cache, prompt[:-1], last_only=True)
            stats.target_forwards += 1
        stats.prefill_seconds = time.perf_counter() - started

        while stats.new_tokens < max_new_tokens:
            begin = time.perf_counter()
            depth = min(self.draft_length.choose(), max_new_tokens - stats.new_tokens - 1) if self.drafter else 0
            draft = self.draft_length.trim(self.drafter.propose(tokens, depth, sampling, rng)) if depth > 0 else Draft()
            drafted = time.perf_counter()

            pending, opened = len(tokens) - 1, tokens[-1]
            tree = [-1] + [parent + 1 for parent in draft.parents]  # row 0 is the pending token
            out = kv.forward(self.target, cache, [opened] + draft.tokens, tree=tree, want_hidden=want_hidden)
            accepted, next_token = verifier.verify(draft, out.logits, sampling, rng)
            kv.keep_rows(cache, pending, [0] + [node + 1 for node in accepted])
            new = [draft.tokens[node] for node in accepted] + [next_token]
            verified = time.perf_counter()

            stats.target_forwards += 1
            stats.draft_seconds += drafted - begin
            stats.verify_seconds += verified - drafted
            stats.record(draft, accepted)
            self.draft_length.record(draft, len(accepted), drafted - begin, verified - drafted, len(tree))
            new = new[: max_new_tokens - stats.new_tokens]
            done = next((i for i, token in enumerate(new) if token in stop), None)
            if done is not None:
                new = new[: done + 1]
            tokens += new
            stats.new_tokens += len(new)
            if self.drafter:
                self.drafter.observe(Verified(draft, out.logits, out.hidden_states, accepted, tokens, opened))
            if on_tokens:
                on_tokens(new)
            if done is not None:
                break
        stats.wall_seconds = time.perf_counter() - started
        return Output(tokens[len(prompt):], stats)
