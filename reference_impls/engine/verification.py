"""Axis 2 of the taxonomy: which drafted tokens the target keeps.

A verifier walks the draft tree from the root using the target's logits (row 0 after the last
committed token, row 1+i after node i) and returns the accepted path plus one more token from
the target: the bonus token when every tried child was accepted, else the correction.
`position` is the absolute position (in prompt + output) of the token row 0 decides; random
draws are keyed by it, so the same seed gives the same decision at a position however the text
up to it was drafted.

Every rule lives here: the exact ones (greedy matching, speculative sampling and its recursive
tree form, block verification, SpecTr's K-SEQ) and, at the end, the relaxed ones (Medusa's
typical acceptance, blockwise decoding's top-k), which `relaxed = True` marks as not lossless.
"""

from __future__ import annotations

import math

import torch

from specatlas.impls.engine import kv
from specatlas.impls.engine.drafting import Draft
from specatlas.impls.engine.sampling import Randomness, Sampling, without


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

    Also multi-candidate speculative sampling (Yang et al. 2024), whose candidates may be drawn
    independently (with replacement, `Draft.replacement`) or without replacement.

    At each node, with p the target's distribution there, try the children in drawing order:
    accept child x with probability min(1, p(x)/q(x)); on rejection p <- norm(max(p - q, 0)), and,
    for siblings drawn without replacement, q <- q without x (the next one could not be x);
    independent siblings keep q. When every child is rejected (or there is none) the next token is
    drawn from what is left of p, which is the bonus token on a fully accepted path. Lossless for
    any q, including point masses.

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
                # Without replacement, a sibling was drawn from the drafter's row minus earlier siblings.
                q = draft.q[child].to(p) if draft.replacement else without(draft.q[child].to(p), tried)
                if rng.bernoulli(min(1.0, float(p[token] / q[token])), at, "accept", sibling):
                    accepted.append(child)
                    node = child
                    break
                p, _ = residual(p, q)
                tried.append(token)
            else:
                return accepted, rng.categorical(p, at, "token")


def residual(p: torch.Tensor, q: torch.Tensor) -> tuple[torch.Tensor, float]:
    """(norm(max(p - q, 0)), the mass of max(p - q, 0)): what is left of p once a draft from q was
    rejected. `p` may be scaled (block verification's weighted target)."""
    left = (p - q).clamp_min(0)
    mass = float(left.sum())
    # p <= q everywhere only when p == q up to rounding; then a rejection has probability ~0 and p
    # itself is the residual (dividing would give NaN).
    return (left / mass if mass > 0 else p / p.sum()), mass


class BlockVerification(RejectionSampling):
    """Block verification (Sun et al. 2025, Algorithm 2): the drafted chain X_1..X_γ is judged as a
    block, not token by token. With p_i, q_i the target's and the drafter's distributions of X_i:

        weight_0 = 1,  weight_i = min(1, weight_{i-1} · p_i(X_i) / q_i(X_i))
        h_i = mass_i / (mass_i + 1 - weight_i),  mass_i = Σ_x max(weight_i · p_{i+1}(x) - q_{i+1}(x), 0)
        h_γ = weight_γ

    The longest prefix X_1..X_τ with η_τ <= h_τ (η_i uniform, independent) is kept, τ = 0 if none;
    then the bonus token from p_{γ+1} when τ = γ, else the correction from
    norm(max(weight_τ · p_{τ+1} - q_{τ+1}, 0)). Token-wise verification throws away the excess
    p_i(X_i) > q_i(X_i) at each token; the weight carries it along the block, so a later likely
    token can make up for an earlier unlikely one. Lossless, and in expectation it keeps at least as
    many tokens as token-wise speculative sampling (the paper's Theorems 1 and 2).

    Drafts are chains. Deterministic drafts (point masses) gain nothing from it (a point-mass block
    is kept with probability Π p_i(X_i) either way) and take the token-wise rule, which lets the
    seed alone fix the text.
    """

    def verify(self, draft, logits, sampling, rng, position):
        if draft.q is None:
            return super().verify(draft, logits, sampling, rng, position)
        if not kv.is_chain(draft.parents):
            raise ValueError("block verification verifies a chain of drafts")
        p, tokens = sampling.probs(logits), draft.tokens
        q = draft.q.to(p)
        gamma = len(tokens)
        weight = [1.0]
        for i, token in enumerate(tokens):
            weight.append(min(1.0, weight[-1] * float(p[i, token] / q[i, token])))
        # The paper draws every η_i and keeps the largest τ that passes: the same as trying the
        # whole block first and walking back towards the root, stopping at the first pass.
        for tau in range(gamma, 0, -1):
            if tau == gamma:
                keep = weight[gamma]
            else:
                _, mass = residual(weight[tau] * p[tau], q[tau])
                # 0/0 only when weight_τ = 1 and p_{τ+1} = q_{τ+1}: nothing can fail from here on.
                keep = mass / (mass + 1 - weight[tau]) if mass + 1 - weight[tau] > 0 else 1.0
            if rng.bernoulli(keep, position + tau - 1, "block"):
                break
        else:
            tau = 0
        if tau == gamma:
            return list(range(gamma)), rng.categorical(p[gamma], position + gamma, "token")
        correction, _ = residual(weight[tau] * p[tau], q[tau])
        return list(range(tau)), rng.categorical(correction, position + tau, "token")


class KSequential(RejectionSampling):
    """SpecTr's draft selection (Sun et al. 2023): k i.i.d. draft sequences from the drafter, and at
    each position its K-SEQ rule over the next tokens X_1..X_k of the drafts that agree with the
    text kept so far (i.i.d. from q, as each draft continues on its own):

        accept X_i, in order, with probability min(1, p(X_i) / (ρ q(X_i)));
        if none is, draw from norm(p - min(q, p/ρ) · (1 - (1 - β)^k) / β),  β = Σ_x min(q(x), p(x)/ρ)

    with ρ ∈ [1, k] the root of ρβ(ρ) = 1 - (1 - β(ρ))^k, the smallest ρ for which that residual
    is a distribution (found by bisection; a larger ρ stays lossless, it only accepts less). For
    k = 1, ρ = 1: speculative sampling; for k > 1 the rule accepts within (1 - 1/e) of the optimal
    transport plan. Drafts that agree share their rows, so the walk follows the set of agreeing nodes.
    Deterministic drafts take the token-wise rule (see `RejectionSampling`).
    """

    def verify(self, draft, logits, sampling, rng, position):
        if draft.q is None:
            return super().verify(draft, logits, sampling, rng, position)
        target, children, depth = sampling.probs(logits), draft.children(), kv.depths(draft.parents)
        alive = [-1]  # nodes whose path is the text kept so far
        while True:
            at, p = position + (depth[alive[0]] if alive[0] >= 0 else 0), target[alive[0] + 1]
            candidates = [child for node in alive for child in children[node]]
            if not candidates:
                break
            q = draft.q[candidates[0]].to(p)  # every candidate continues the same text
            tokens = [draft.tokens[child] for child in candidates]
            rho = transport_ratio(p, q, len(tokens))
            kept = next((token for i, token in enumerate(tokens)
                         if rng.bernoulli(min(1.0, float(p[token] / (rho * q[token]))), at, "accept", i)), None)
            if kept is None:
                # What the k tries accepted of each token: min(q, p/ρ) · Σ_i (1 - β)^(i-1).
                overlap = torch.minimum(q, p / rho)
                beta = float(overlap.sum())
                p, _ = residual(p, overlap * ((1 - (1 - beta) ** len(tokens)) / beta if beta > 0 else 0.0))
                break
            alive = [child for child, token in zip(candidates, tokens) if token == kept]
        path, node = [], alive[0]
        while node >= 0:
            path.insert(0, node)
            node = draft.parents[node]
        return path, rng.categorical(p, at, "token")


def transport_ratio(p: torch.Tensor, q: torch.Tensor, k: int, steps: int = 50) -> float:
    """SpecTr's ρ for k i.i.d. drafts: the smallest ρ in [1, k] with ρβ(ρ) >= 1 - (1 - β(ρ))^k,
    β(ρ) = Σ min(q, p/ρ). ρβ(ρ) grows and 1 - (1 - β(ρ))^k falls with ρ; the bisection returns its
    upper end, on the lossless side."""
    low, high = 1.0, float(k)
    for _ in range(steps):
        middle = (low + high) / 2
        beta = float(torch.minimum(q, p / middle).sum())
        low, high = (low, middle) if middle * beta >= 1 - (1 - beta) ** k else (middle, high)
    return high


# --------------------------------------------------------------------------------------------
# Relaxed rules: they keep tokens the target finds plausible, so the output is not the target's

# Medusa's typical acceptance defaults (MedusaModel.medusa_generate): epsilon and delta.
POSTERIOR_THRESHOLD, POSTERIOR_ALPHA = 0.09, 0.3


class TypicalAcceptance(Verifier):
    """Medusa's typical acceptance (relaxed: NOT lossless). A drafted token x is kept when the
    target's probability of it exceeds min(epsilon, delta * exp(-H(p))), H the entropy of the
    target's distribution p there; of the tree's paths the longest kept one wins (ties: the most
    likely), and the next token is drawn from p without the tokens under that threshold.
    Greedy decoding keeps exact matching, as in the paper."""

    relaxed = True

    def __init__(self, epsilon: float = POSTERIOR_THRESHOLD, delta: float = POSTERIOR_ALPHA):
        self.epsilon, self.delta = epsilon, delta

    def thresholds(self, p: torch.Tensor) -> torch.Tensor:
        entropy = -(p * torch.log(p + 1e-5)).sum(-1)
        return torch.minimum(torch.full_like(entropy, self.epsilon), self.delta * torch.exp(-entropy))

    def verify(self, draft, logits, sampling, rng, position):
        if sampling.greedy:
            return GreedyMatch().verify(draft, logits, sampling, rng, position)
        p = sampling.probs(logits)
        threshold = self.thresholds(p)
        best, best_key = [], (0, 0.0)
        kept: dict[int, tuple[list[int], float]] = {-1: ([], 0.0)}
        for node, (token, parent) in enumerate(zip(draft.tokens[: draft.proposed], draft.parents)):
            if parent in kept and p[parent + 1, token] > threshold[parent + 1]:
                path, score = kept[parent]
                kept[node] = (path + [node], score + math.log(float(p[parent + 1, token])))
                key = (len(kept[node][0]), kept[node][1])
                if key > best_key:
                    best, best_key = kept[node][0], key
        row = best[-1] + 1 if best else 0
        plausible = p[row] * (p[row] > threshold[row])
        plausible = plausible if plausible.sum() > 0 else p[row]
        return best, rng.categorical(plausible / plausible.sum(), position + len(best), "typical")


class TopKAcceptance(Verifier):
    """Blockwise parallel decoding's approximate acceptance (relaxed: NOT lossless): a drafted
    token is kept while it is among the target's k best there; the next token is the target's
    argmax after the kept prefix. k = 1 is exact greedy matching."""

    relaxed = True

    def __init__(self, k: int):
        self.k = k

    def verify(self, draft, logits, sampling, rng, position):
        best = logits.topk(self.k, dim=-1).indices.tolist()
        children, accepted, node = draft.children(), [], -1
        while True:
            match = next((child for child in children[node] if draft.tokens[child] in best[node + 1]), None)
            if match is None:
                return accepted, best[node + 1][0]
            accepted.append(match)
            node = match
