"""PEARL (Liu et al. 2025): drafting overlapped with verification, the draft length set by the text.

Speculative decoding alternates: the target waits while the drafter drafts γ tokens, the drafter
waits while the target verifies them. PEARL runs the two at once, every round:

    the target scores [pending] + u, u the drafts of the round before (none: pre-verify mode),
    while the drafter drafts d_1..d_γ after the committed text + u;
    then the chain u + [d_1] is verified by speculative sampling on those rows: u by their own
    rows, d_1 by the row after u's last token, which the target computed without seeing d_1.

    pre-verify (u empty): one target row judges d_1 alone. Rejected: the target's residual token
        is committed and d_2..d_γ are dropped; accepted: d_1 is committed and d_2..d_γ become u.
    post-verify (u non-empty): the target verifies u while the drafter already continues after it.
        All of u + [d_1] accepted: they are committed (d_1 unscored, so no target token follows)
        and d_2..d_γ become the next u; a rejection commits the target's token there, drops the
        rest, and the next round pre-verifies.

So while the drafter is right the draft grows by γ every round and the target never waits for a
whole draft; after a miss only one target row is spent before the next draft is judged. Each
draft token is kept with probability min(1, p/q) and a rejection draws from norm(max(p - q, 0)):
speculative sampling, lossless whatever the split into rounds (a greedy target matches exactly).

The overlap: the drafter runs on a worker thread while the main thread runs the target forward;
both release the GIL inside torch's kernels, so the two forwards overlap when the machine has
cores to spare (on a GPU: the two models on two devices or streams, as the paper's two processes).
`overlap=False` runs them one after the other (the same tokens: every draw is keyed by position).
A round with nothing to draft (the cost-aware policy's plain step) runs the target alone, with no
drafter thread beside it: exactly a step of plain decoding.
What overlaps here: the drafter's forwards with the target's verification forward, inside torch's
kernels; the Python between kernels and the acceptance walk are serialised by the GIL, and on a
2-core CPU both forwards share torch's 2 intra-op threads. How much ran at once is measured, not
assumed: `specatlas run pearl --prompt TEXT --max-new-tokens 32` prints it after the draft and
verify seconds (`overlapped_seconds` in `--json`: their sum less the decoding's wall time, a lower
bound), and every drafting round's drafter is tested to be still drafting when the target's forward begins.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import torch

from specatlas.impls.engine.decoding import Round, SpeculativeDecoder
from specatlas.impls.engine.drafting import Draft


@dataclass
class Pearl(SpeculativeDecoder):
    overlap: bool = True

    def steps(self, session, sampling, limit, stats):
        """The shared step (`SpeculativeDecoder.step`), each drawn by a round of this generation's `Rounds`."""
        rounds = Rounds(self)
        while stats.new_tokens < limit:
            room = limit - stats.new_tokens - len(rounds.unverified.tokens) - 1
            before = len(session.tokens)
            step = self.step(session, sampling, room, stats, rounds.draw)
            rounds.settled(step, len(step.committed) - before)
            yield step

    def _score(self, session, unverified: Draft):
        begin = self.clock()
        return session.score(unverified), self.clock() - begin

    def _draft(self, context, depth, sampling, rng) -> tuple[Draft, float]:
        """(the drafter's chain of `depth` >= 1 tokens after `context`, seconds it took); inference
        mode is per thread, so the worker enters it itself."""
        begin = self.clock()
        with torch.inference_mode():
            draft = self.drafter.propose(context, depth, sampling, rng)
        return draft, self.clock() - begin


class Rounds:
    """One generation's rounds: u (`unverified`: drafted after the committed text, not verified yet,
    post-verify) and the drafts of the round under way."""

    def __init__(self, pearl: Pearl):
        self.pearl, self.unverified, self.drafted = pearl, Draft(), Draft()

    def draw(self, session, depth, sampling) -> Round:
        """The target scores [pending] + u while the drafter drafts `depth` more after u; the step
        verifies the chain u + [d_1]."""
        pearl, unverified = self.pearl, self.unverified
        context = session.tokens + unverified.tokens
        if not depth:  # nothing to draft: the target alone, as plain decoding runs it
            draft, draft_seconds = Draft(), 0.0
            scored, target_seconds = pearl._score(session, unverified)
        elif pearl.overlap:
            # The drafter's thread lives for this round only: kept for the generation, it and the
            # OpenMP team its forwards start would stay beside the target's forwards of later
            # rounds that draft nothing (the cost-aware policy's plain steps).
            with ThreadPoolExecutor(1) as pool:
                drafting = pool.submit(pearl._draft, context, depth, sampling, session.rng)
                scored, target_seconds = pearl._score(session, unverified)
                draft, draft_seconds = drafting.result()
        else:
            draft, draft_seconds = pearl._draft(context, depth, sampling, session.rng)
            scored, target_seconds = pearl._score(session, unverified)
        self.drafted = draft
        # With the overlap, draft and target seconds add up to more than the wall time.
        return Round(joined(unverified, draft, 0, 1), scored, draft_seconds, target_seconds)

    def settled(self, step, committed: int) -> None:
        """No target token: every node of the chain was kept, d_1 unscored, so d_2.. wait for the next round."""
        drafted = self.drafted
        self.unverified = joined(Draft(), drafted, 1, len(drafted.tokens)) if committed == len(step.accepted) else Draft()


def joined(head: Draft, tail: Draft, start: int, stop: int) -> Draft:
    """The chain `head` followed by tail's nodes start..stop-1 (both chains), with their q rows."""
    rows = [q for q in (head.q, None if tail.q is None else tail.q[start:stop]) if q is not None and len(q)]
    return Draft.chain(head.tokens + tail.tokens[start:stop], torch.cat(rows) if rows else None)
