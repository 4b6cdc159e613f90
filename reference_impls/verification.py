"""Axis 2 of the taxonomy: which drafted tokens the target keeps.

A verifier walks the draft tree from the root using the target's logits (row 0 after the last
committed token, row 1+i after node i) and returns the accepted path plus one more token from
the target: the bonus token when every tried child was accepted, else the correction.
"""

from __future__ import annotations

import torch

from specatlas.impls.drafting import Draft
from specatlas.impls.sampling import Randomness, Sampling, without


class Verifier:
    def verify(self, draft: Draft, logits: torch.Tensor, sampling: Sampling, rng: Randomness) -> tuple[list[int], int]:
        raise NotImplementedError


class GreedyMatch(Verifier):
    """Keep a drafted token while it is the target's argmax; the output is greedy decoding's."""

    def verify(self, draft, logits, sampling, rng):
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
    """

    def verify(self, draft, logits, sampling, rng):
        target = sampling.probs(logits)
        children, accepted, node = draft.children(), [], -1
        while True:
            p, tried = target[node + 1], []
            for child in children[node]:
                token = draft.tokens[child]
                # Siblings were drawn without replacement: q is the drafter's row minus earlier siblings.
                if draft.q is None:
                    q = torch.zeros_like(p)
                    q[token] = 1
                else:
                    q = without(draft.q[child].to(p), tried)
                if rng.bernoulli(min(1.0, float(p[token] / q[token]))):
                    accepted.append(child)
                    node = child
                    break
                residual = (p - q).clamp_min(0)
                p = residual / residual.sum()
                tried.append(token)
            else:
                return accepted, rng.categorical(p)
