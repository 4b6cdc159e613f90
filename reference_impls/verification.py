"""Axis 2 of the taxonomy: which drafted tokens the target keeps.

A verifier walks the draft tree from the root using the target's logits (row 0 after the last
committed token, row 1+i after node i) and returns the accepted path plus one more token from
the target: the bonus token when every tried child was accepted, else the correction.
`position` is the absolute position (in prompt + output) of the token row 0 decides; random
draws are keyed by it, so the same seed gives the same decision at a position however the text
up to it was drafted.
"""

from __future__ import annotations

import torch

from specatlas.impls import kv
from specatlas.impls.drafting import Draft
from specatlas.impls.sampling import Randomness, Sampling, without


class Verifier:
    # A relaxed rule keeps drafts the target would not have produced: the output distribution is
    # no longer the target's (not lossless). `specatlas run` says so when one decides.
    relaxed = False

    def verify(self, draft: Draft, logits: torch.Tensor, sampling: Sampling, rng: Randomness,
               position: int) -> tuple[list[int], int]:
        raise NotImplementedError


class GreedyMatch(Verifier):
    """Keep a drafted token while it is the target's argmax; the output is greedy decoding's."""

    def verify(self, draft, logits, sampling, rng, position):
        best = logits.argmax(-1).tolist()
        children, accepted, node = draft.children(), [], -1
        while True:
            wanted = best[node + 1]
            match = next((child for child in children[node] if draft.tokens[child] == wanted), None)
            if match is None:
                return accepted, wanted
            accepted.append(match)
            node = match


class RejectionSampling(Verifier):
    """On a chain: speculative sampling (Leviathan et al. 2023; Chen et al. 2023). On a tree:
    SpecInfer's multi-step speculative sampling (Miao et al. 2024), i.e. recursive rejection.

    At each node, with p the target's distribution there, try the children in drawing order:
    accept child x with probability min(1, p(x)/q(x)); on rejection p <- norm(max(p - q, 0)).
    When every child is rejected (or there is none) the next token is drawn from what is left of p,
    which is the bonus token on a fully accepted path. Lossless for any q, including point masses.

    Deterministic drafts (`q is None`, point masses on distinct siblings) take the rule's
    equivalent form: accepting x with probability p(x), else drawing from p without x (and so on
    down the siblings), is drawing y ~ p and keeping the child equal to y, if any. Drawn that way,
    with the key (position, "token") a plain decoding step uses, the text depends only on the
    seed, never on what or how much was drafted.
    """

    def verify(self, draft, logits, sampling, rng, position):
        target = sampling.probs(logits)
        children, accepted, node = draft.children(), [], -1
        depth = kv.depths(draft.parents)
        while True:
            at, p = position + (depth[node] if node >= 0 else 0), target[node + 1]
            if draft.q is None:
                token = rng.categorical(p, at, "token")
                match = next((child for child in children[node] if draft.tokens[child] == token), None)
                if match is None:
                    return accepted, token
                accepted.append(match)
                node = match
                continue
            tried = []
            for sibling, child in enumerate(children[node]):
                token = draft.tokens[child]
                # Siblings were drawn without replacement: q is the drafter's row minus earlier siblings.
                q = without(draft.q[child].to(p), tried)
                if rng.bernoulli(min(1.0, float(p[token] / q[token])), at, "accept", sibling):
                    accepted.append(child)
                    node = child
                    break
                residual = (p - q).clamp_min(0)
                mass = float(residual.sum())
                # p <= q everywhere only when p == q up to rounding; then a rejection has probability
                # ~0 and p itself is the residual (dividing would give NaN).
                p = residual / mass if mass > 0 else p
                tried.append(token)
            else:
                return accepted, rng.categorical(p, at, "token")
