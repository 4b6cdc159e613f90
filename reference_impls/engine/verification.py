"""Axis 2 of the taxonomy: which drafted tokens the target keeps.

A verifier walks the draft tree (from the root; traversal verification from the leaves) using
the target's logits (row 0 after the last committed token, row 1+i after node i) and returns the
accepted path plus one more token from the target: the bonus token when every tried child was
accepted, else the correction. `position` is the absolute position (in prompt + output) of the
token row 0 decides; random draws are keyed by it, so the same seed gives the same decision at a
position however the text up to it was drafted.

Every rule lives here: the exact ones (greedy matching, speculative sampling and its recursive
tree form, block and traversal verification, SpecTr's K-SEQ, SpecHub) and, at the end, the
relaxed ones (Medusa's typical acceptance, blockwise decoding's top-k), which `relaxed = True`
marks as not lossless.
"""

from __future__ import annotations

import math

import torch

from specatlas.impls.engine import kv
from specatlas.impls.engine.drafting import Draft
from specatlas.impls.engine.sampling import Randomness, Sampling, without


class Verifier:
    """`verify` returns (accepted nodes, next token). The exact chain rules (greedy matching and
    speculative sampling) also take a forward that scored every node but the last (PEARL's
    post-verify: its last draft token is judged by the row before it, drafted while the target ran):
    when that last node is accepted there is no row to draw from, and the next token is None."""

    # A relaxed rule keeps drafts the target would not have produced: the output distribution is
    # no longer the target's (not lossless). `specatlas run` says so when one decides.
    relaxed = False

    def verify(self, draft: Draft, logits: torch.Tensor, sampling: Sampling, rng: Randomness,
               position: int) -> tuple[list[int], int | None]:
        raise NotImplementedError


class GreedyMatch(Verifier):
    """Keep a drafted token while it is the target's argmax; the output is greedy decoding's."""

    def verify(self, draft, logits, sampling, rng, position):
        best = logits.argmax(-1).tolist()
        children, accepted, node = draft.children(), [], -1
        while True:
            if node + 1 == len(best):  # an accepted node the forward did not score
                return accepted, None
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
        if draft.hub and draft.q is not None:
            raise ValueError("hub pairs are not siblings drawn with or without replacement: SpecHub verifies them")
        target = sampling.probs(logits)
        children, accepted, node = draft.children(), [], -1
        depth = kv.depths(draft.parents)
        while True:
            if node + 1 == len(target):  # an accepted node the forward did not score
                return accepted, None
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
            keep = weight[gamma] if tau == gamma else rejected(weight[tau], p[tau], q[tau])[0]
            if rng.bernoulli(keep, position + tau - 1, "block"):
                break
        else:
            tau = 0
        if tau == gamma:
            return list(range(gamma)), rng.categorical(p[gamma], position + gamma, "token")
        _, correction = rejected(weight[tau], p[tau], q[tau])
        return list(range(tau)), rng.categorical(correction, position + tau, "token")


def rejected(weight: float, p: torch.Tensor, q: torch.Tensor) -> tuple[float, torch.Tensor]:
    """What is left at a node once its child, drawn from q, was rejected: (h, norm(max(w·p - q, 0))).

    w is the node's weight (block verification's weight_i, traversal verification's p_α): the
    chance its path was accepted so far, relative to the drafter's. Read as a distribution over
    the next token plus a "reject this node too" outcome, the node holds (w·p, 1 - w) against the
    drafter's (q, 0); rejecting the child leaves norm(max(w·p - q, 0), 1 - w), so the node itself
    is now kept with probability h = m / (m + 1 - w), m the mass of max(w·p - q, 0), and then the
    next token is drawn from norm(max(w·p - q, 0)). For w = 1 (the committed text) h = 1: the
    correction of speculative sampling. For w = 0 (a token the target rules out) h = 0: the node is
    never kept and its row, 0/0, is never drawn from; its own row stands in."""
    if weight <= 0:
        return 0.0, p
    left, mass = residual(weight * p, q)
    # 0/0 only when w = 1 and p = q: the child could not have been rejected, nothing is lost.
    return (mass / (mass + 1 - weight) if mass + 1 - weight > 0 else 1.0), left


class TraversalVerification(RejectionSampling):
    """Traversal verification (Weng et al. 2025, Algorithm 3): a token tree drawn from the drafter
    is judged leaf to root, each node by the sequence that ends there, not token by token.

    Every node holds a weight p_α, its target row p (the target's distribution after it) and the
    rows its children were drawn from. The root (the committed text) has p_α = 1; a child x of a
    node u gets, when the traversal first reaches it,

        p_α(x) = min(1, p_α(u) · p_u(x) / q_u(x))

    (q_u less u's earlier children for siblings drawn without replacement). The traversal starts at
    the first leaf in post-order (the deepest, leftmost) and repeats:

        accept the visited node Y with probability p_α(Y): keep the path root..Y, draw the next
            token from p_Y, stop;
        else delete Y, and at its parent u: (p_α(u), p_u) <- (h, norm(max(p_α(u)·p_u - q_u, 0)))
            with h = m / (m + 1 - p_α(u)), m the mass of max(p_α(u)·p_u - q_u, 0) (`rejected`);
            visit the next node in post-order: the first leaf under u's next child, else u itself.

    The root is accepted when reached (its p_α stays 1), drawing from what is left of its row: a
    tree whose every path failed ends as speculative sampling does. A rejected parent's children
    were judged before it, so a likely continuation can carry an unlikely token, and on a chain the
    rule is block verification (Sun et al. 2025). Lossless (the paper's Theorem), checked by
    enumeration in the tests. Siblings may be drawn without replacement or independently.
    Deterministic drafts take the token-wise rule (see `RejectionSampling`).
    """

    def verify(self, draft, logits, sampling, rng, position):
        if draft.q is None:
            return super().verify(draft, logits, sampling, rng, position)
        target, depth = sampling.probs(logits), kv.depths(draft.parents)
        left = draft.children()  # children not yet deleted, in drawing order
        weight, row = {-1: 1.0}, {node: target[node + 1] for node in left}
        tried: dict[int, list[int]] = {node: [] for node in left}  # tokens of deleted children

        def drawn_from(child: int) -> torch.Tensor:
            q = draft.q[child].to(target)
            return q if draft.replacement else without(q, tried[draft.parents[child]])

        def first_leaf(node: int) -> int:
            while left[node]:
                child = left[node][0]
                token = draft.tokens[child]
                weight[child] = min(1.0, weight[node] * float(row[node][token] / drawn_from(child)[token]))
                node = child
            return node

        visited = first_leaf(-1)
        while visited >= 0 and not rng.bernoulli(weight[visited], position + depth[visited] - 1, "traverse", visited):
            parent = draft.parents[visited]
            weight[parent], row[parent] = rejected(weight[parent], row[parent], drawn_from(visited))
            tried[parent].append(draft.tokens[visited])
            left[parent].pop(0)
            visited = first_leaf(parent)
        path, node = [], visited
        while node >= 0:
            path.insert(0, node)
            node = draft.parents[node]
        return path, rng.categorical(row[visited], position + len(path), "token")


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


class SpecHub(RejectionSampling):
    """SpecHub's verification of two drafts (Sun et al. 2024). The drafts are a hub pair
    (`drafting.hub_pair`): every pair holds the hub a = argmax q, so the optimal-transport
    problem between the draft pairs and the target's token shrinks to a few transfers, solved in
    closed form. With Q(i, a) = q(i) and Q(a, i) = q(a) q(i) / (1 - q(a)) (i != a), at a node
    with target row p:

        1. pair (i, a): accept i with probability min(1, p(i) / Q(i, a));
           for every i != a: p'(i) = max(p(i) - Q(i, a), 0), R(i, a) = max(Q(i, a) - p(i), 0)
        2. pair (a, i): accept i with probability min(1, p'(i) / Q(a, i));
           p''(i) = max(p'(i) - Q(a, i), 0), R(a, i) = max(Q(a, i) - p'(i), 0)
        3. pair (a, i), i rejected: accept a with probability min(1, p(a) / Σ_i R(a, i));
           p'(a) = max(p(a) - Σ_i R(a, i), 0)
        4. pair (i, a), i rejected: accept a with probability min(1, p'(a) / Σ_i R(i, a));
           p''(a) = max(p'(a) - Σ_i R(i, a), 0)
        5. nothing accepted: the next token from norm(p'').

    Each token's acceptances add up to min(p, what the pairs offer it), and what is left is p'', so
    the rule is lossless (checked by enumeration in the tests). A node with one child is judged by
    speculative sampling; the walk continues from the accepted child, as in SpecInfer's trees.
    Deterministic drafts take the token-wise rule (see `RejectionSampling`).
    """

    def verify(self, draft, logits, sampling, rng, position):
        if draft.q is None:
            return super().verify(draft, logits, sampling, rng, position)
        if not draft.hub:
            raise ValueError("SpecHub verifies hub pairs (a ModelDrafter with hub=True)")
        target, children, depth = sampling.probs(logits), draft.children(), kv.depths(draft.parents)
        accepted, node = [], -1
        while True:
            at, p = position + (depth[node] if node >= 0 else 0), target[node + 1]
            pair = children[node]
            if not pair:
                return accepted, rng.categorical(p, at, "token")
            q = draft.q[pair[0]].to(p)
            tokens = [draft.tokens[child] for child in pair]
            if len(pair) == 1:
                kept = rng.bernoulli(min(1.0, float(p[tokens[0]] / q[tokens[0]])), at, "accept", 0)
                p = p if kept else residual(p, q)[0]
                kept = 0 if kept else None
            else:
                kept, p = self.hub_step(p, q, tokens, rng, at)
            if kept is None:
                return accepted, rng.categorical(p, at, "token")
            node = pair[kept]
            accepted.append(node)

    @staticmethod
    def hub_step(p, q, tokens, rng, at) -> tuple[int | None, torch.Tensor]:
        """Steps 1-5 on the pair `tokens` drawn from q: (which draft is kept, or None, and the row
        the next token is then drawn from)."""
        hub, q_ia, q_ai = hub_pair_masses(q)
        if hub not in tokens:
            raise ValueError(f"a hub pair holds the drafter's most likely token {hub}; got {tokens}")
        other = tokens[1] if tokens[0] == hub else tokens[0]
        hub_second = tokens[1] == hub  # the pair is (i, a)

        def accept(mass: float, offered: float, sibling: int) -> bool:
            return rng.bernoulli(min(1.0, mass / offered) if offered > 0 else 1.0, at, "accept", sibling)

        if hub_second and accept(float(p[other]), float(q_ia[other]), 0):
            return 0, p
        not_hub = torch.ones_like(p, dtype=torch.bool)
        not_hub[hub] = False
        p1, r_ia = (p - q_ia).clamp_min(0) * not_hub, (q_ia - p).clamp_min(0) * not_hub
        if not hub_second and accept(float(p1[other]), float(q_ai[other]), 1):
            return 1, p
        p2, r_ai = (p1 - q_ai).clamp_min(0) * not_hub, (q_ai - p1).clamp_min(0) * not_hub
        hub_left = float(p[hub])
        if not hub_second and accept(hub_left, float(r_ai.sum()), 0):
            return 0, p
        hub_left = max(hub_left - float(r_ai.sum()), 0.0)
        if hub_second and accept(hub_left, float(r_ia.sum()), 1):
            return 1, p
        p2[hub] = max(hub_left - float(r_ia.sum()), 0.0)
        left = float(p2.sum())
        return None, (p2 / left if left > 0 else p)  # nothing left: this end had probability ~0


def hub_pair_masses(q: torch.Tensor) -> tuple[int, torch.Tensor, torch.Tensor]:
    """SpecHub's sparse joint of two drafts around the hub a = argmax q (`drafting.hub_pair` draws
    from it): (a, Q(·, a), Q(a, ·)), Q(x, a) = q(x) and Q(a, x) = q(a) q(x) / (1 - q(a)) for x != a,
    0 at a. The first draft's marginal is q."""
    hub = int(q.argmax())
    q_ia = q.clone()
    q_ia[hub] = 0
    q_ai = q_ia * (float(q[hub]) / float(q_ia.sum())) if float(q_ia.sum()) > 0 else q_ia
    return hub, q_ia, q_ai


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
