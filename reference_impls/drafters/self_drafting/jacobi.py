"""Drafting by parallel fixed-point iteration: Jacobi decoding and Lookahead decoding.

Both guess future tokens from nothing but the target's own outputs on earlier guesses, which the
drafter reads back through `observe` (the target logits of every row of the verification forward).
"""

from __future__ import annotations

from collections import defaultdict

from specatlas.impls.engine.drafting import Draft, Drafter


class Jacobi(Drafter):
    """Jacobi decoding (Santilli et al. 2023), over a window that slides with the committed text.

    Greedy decoding is the fixed point y_i = argmax p(. | y_<i) of a system of equations over a
    window of future positions; Jacobi iteration solves all of them at once: each step feeds the
    current guesses y^k_1..y^k_W after the pending token, and the target's argmax at every position
    is the next iterate y^{k+1}. Verification keeps the longest prefix of guesses that already equal
    the target's argmax (which is exactly the fixed-point convergence test), plus the target's own
    next token, so at least one token is committed per step and the output is greedy decoding's.
    The outputs after the accepted prefix become the next guesses (read back in `observe`).

    The paper iterates over blocks of future positions whose guesses start as padding tokens. Here
    the window is `window` tokens (the cost-aware policy drafts the first `depth` of them) and the
    guesses start as the last prompt tokens: as good as padding, and no special token is needed.
    Left out: the paper's Gauss-Seidel hybrid (GS-Jacobi) and its dependency visualiser.
    """

    def __init__(self, window: int = 8):
        self.window = window
        self.guesses: list[int] = []

    def start(self, prompt, prefill):
        self.guesses = (list(prompt) * self.window)[-self.window :]

    def propose(self, context, depth, sampling, rng):
        return Draft.chain(self.guesses[:depth])

    def observe(self, step):
        # Row r predicts the position after row r, so the rows after the accepted ones are the next
        # iterate for the positions after the new pending token; guesses beyond the draft are kept.
        drafted, accepted = len(step.draft.tokens), len(step.accepted)
        guesses = step.logits[accepted + 1 : drafted + 1].argmax(-1).tolist() + self.guesses[drafted + 1 :]
        self.guesses = pad(guesses or list(step.committed[-1:]), self.window)

    def describe(self):
        return f"Jacobi iteration over a window of {self.window} guesses"


class Lookahead(Drafter):
    """Lookahead decoding (Fu et al. 2024): one forward runs two branches.

    Lookahead branch: a 2D window of `window` (W) columns by N-1 levels keeps the last N-1 Jacobi
    iterates. Level 0 is a chain of guesses for positions 1..W after the pending token; the token at
    level l of column j sits at position j+1+l and sees level 0 up to column j, then its own column's
    earlier levels. That attention pattern is a tree (level 0 a chain, each deeper token the child
    of the token above it), so the branch rides along as `auxiliary` draft nodes under the ordinary
    tree mask. The target's argmax at the last level is the next level; each column then reads as
    an N-gram (level 0 .. level N-2, new token) that goes into the pool, keyed by its first token,
    and the oldest level is dropped. Verification branch: up to G pool n-grams that start with the
    last committed token, merged into a trie (shared prefixes verified once) and checked in the
    same forward; greedy matching (or the engine's rejection sampling) keeps the longest valid one.

    Paper defaults: W=15, N=5, G=W for 7B models on an A100 (W=7, N=5, G=7 in the reference code's
    README); the pool is per generation, with at most G n-grams per key (least recently seen out);
    level 0 starts as tokens copied from the prompt. This CPU affords far less verification width,
    so the compositions pick smaller W, N, G (see methods/parallel.py). Sampling verifies the n-grams
    with the engine's recursive rejection sampling, lossless like the paper's own scheme. Left out:
    lookahead parallelism across several GPUs.
    """

    def __init__(self, window: int = 15, ngram: int = 5, guess_set: int = 15):
        assert ngram >= 2, "an n-gram needs a key and at least one continuation"
        self.window, self.ngram, self.guess_set = window, ngram, guess_set
        self.levels: list[list[int]] = []  # the 2D window, oldest level first
        self.pool: dict[int, list[tuple[int, ...]]] = defaultdict(list)  # key -> n-gram tails, oldest first

    def start(self, prompt, prefill):
        self.levels, self.pool = [pad(list(prompt[-self.window :]), self.window)], defaultdict(list)

    def propose(self, context, depth, sampling, rng):
        draft, trie = Draft(), {}
        for tail in reversed(self.pool.get(context[-1], [])):  # most recent first
            parent = -1
            for token in tail[:depth]:
                if (parent, token) not in trie:
                    trie[parent, token] = len(draft.tokens)
                    draft.tokens.append(token)
                    draft.parents.append(parent)
                parent = trie[parent, token]
        first = len(draft.tokens)
        for level, row in enumerate(self.levels):
            for column, token in enumerate(row):
                above = first + (level - 1) * self.window + column
                draft.parents.append(above if level else first + column - 1 if column else -1)
                draft.tokens.append(token)
        draft.auxiliary = len(draft.tokens) - first
        return draft

    def observe(self, step):
        if not step.draft.auxiliary:  # a plain decoding step: the window did not run
            return
        last_level = len(step.draft.tokens) - self.window  # node index of the last level's column 0
        new = step.logits[1 + last_level :].argmax(-1).tolist()
        if len(self.levels) == self.ngram - 1:
            for column, key in enumerate(self.levels[0]):
                self._remember(key, tuple(row[column] for row in self.levels[1:]) + (new[column],))
            self.levels.pop(0)
        self.levels.append(new)

    def _remember(self, key: int, tail: tuple[int, ...]) -> None:
        tails = self.pool[key]
        if tail in tails:
            tails.remove(tail)
        tails.append(tail)
        if len(tails) > self.guess_set:
            tails.pop(0)

    def describe(self):
        return f"lookahead (W={self.window}, N={self.ngram}, G={self.guess_set})"

def pad(tokens: list[int], size: int) -> list[int]:
    """`tokens` cut or padded to `size` by repeating the last one (a guess as good as any)."""
    return (tokens + tokens[-1:] * size)[:size]
