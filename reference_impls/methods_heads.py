"""Trained-head drafters on the shared loop: Medusa, EAGLE (static tree), EAGLE-2 (dynamic tree) and
Kangaroo (an adapter on the target's shallow exit; its drafter is in `layer_view`).

Each drafter reads the target's final normed hidden state (`hidden_layers = (N,)`): from the
prefill at `start`, then from the rows the target kept at each `observe`. The heads come from a
published-layout checkpoint (`checkpoints.load`); for the embedded model the trained heads shipped
in `trained_heads/` are the default.

Drafts are the heads' top-ranked tokens (deterministic: `q is None`), so exact-match verification
under greedy decoding and recursive rejection sampling under sampling are both lossless. Medusa's
typical acceptance is the paper's relaxed alternative: it accepts tokens the target finds
plausible enough, which changes the output distribution (labelled not lossless everywhere).
"""

from __future__ import annotations

import math
from pathlib import Path

import torch
from torch.nn import functional as F

from specatlas.impls.decoding import SpeculativeDecoder
from specatlas.impls.drafting import Draft, Drafter
from specatlas.impls.heads import HeadCache
from specatlas.impls.layer_view import Kangaroo
from specatlas.impls.methods import PAPER, draft_policy
from specatlas.impls.recycling import tree_nodes
from specatlas.impls.verification import GreedyMatch, Verifier

SHIPPED = Path(__file__).resolve().parent / "trained_heads"

# Medusa's tree for Vicuna-7B (`mc_sim_7b_63` in FasterDecoding/Medusa medusa_choices.py): 63 nodes,
# depth 4; node (i, j) is head 1's (i+1)-th token followed by head 2's (j+1)-th.
MEDUSA_TREE = tuple(map(tuple, [
    [0], [0, 0], [1], [0, 1], [2], [0, 0, 0], [1, 0], [0, 2], [3], [0, 3], [4], [0, 4], [2, 0], [0, 5], [0, 0, 1],
    [5], [0, 6], [6], [0, 7], [0, 1, 0], [1, 1], [7], [0, 8], [0, 0, 2], [3, 0], [0, 9], [8], [9], [1, 0, 0],
    [0, 2, 0], [1, 2], [0, 0, 3], [4, 0], [2, 1], [0, 0, 4], [0, 0, 5], [0, 0, 0, 0], [0, 1, 1], [0, 0, 6], [0, 3, 0],
    [5, 0], [1, 3], [0, 0, 7], [0, 0, 8], [0, 0, 9], [6, 0], [0, 4, 0], [1, 4], [7, 0], [0, 1, 2], [2, 0, 0], [3, 1],
    [2, 2], [8, 0], [0, 5, 0], [1, 5], [1, 0, 1], [0, 2, 1], [9, 0], [0, 6, 0], [0, 0, 0, 1], [1, 6], [0, 7, 0]]))
# Medusa's typical acceptance defaults (MedusaModel.medusa_generate): epsilon and delta.
POSTERIOR_THRESHOLD, POSTERIOR_ALPHA = 0.09, 0.3
# EAGLE-1's static tree (SafeAILab/EAGLE eagle/model/choices.py): 25 nodes, depth 5.
EAGLE_TREE = tuple(map(tuple, [
    [0], [1], [2], [3], [0, 0], [0, 1], [0, 2], [1, 0], [1, 1], [2, 0], [2, 1], [3, 0], [0, 0, 0], [0, 0, 1], [0, 0, 2],
    [0, 1, 0], [0, 1, 1], [0, 2, 0], [0, 2, 1], [1, 0, 0], [0, 0, 0, 0], [0, 0, 0, 1], [0, 0, 0, 2], [0, 0, 0, 0, 0],
    [0, 0, 0, 0, 1]]))
# EAGLE-2's dynamic tree (EaModel defaults in SafeAILab/EAGLE): expand the top_k best nodes per level
# for `depth` levels, then keep the total_token best of all by cumulative draft log-probability.
EAGLE2_TOTAL, EAGLE2_DEPTH, EAGLE2_TOP_K = 60, 7, 10


def template_draft(paths, ranked: list[torch.Tensor], depth: int) -> Draft:
    """Fill a tree template: node `path` is rank path[-1] of `ranked[len(path) - 1]`'s row for its parent.

    `ranked[d]` is [parents at depth d, ranks] for EAGLE (one row per depth-d node that has
    children) or [1, ranks] for Medusa (every node at depth d shares head d's candidates)."""
    draft, node = Draft(), {(): -1}
    for path in sorted(paths, key=len):
        if len(path) > min(depth, len(ranked)) or path[:-1] not in node:
            continue
        node[path] = len(draft.tokens)
        draft.tokens.append(int(ranked[len(path) - 1][path[-1]]))
        draft.parents.append(node[path[:-1]])
    return draft


class MedusaDrafter(Drafter):
    """Medusa (Cai et al. 2024), per step:
    1. h = the target's last kept final state (the one whose logits gave the pending token);
    2. head k's top tokens are candidates for the token k+2 positions after h;
    3. the tree template combines them (node (i, j): head 1's i-th, then head 2's j-th);
    4. the target verifies the tree in one forward; its kept rows give the next h."""

    def __init__(self, heads, lm_head_weight, final_layer: int, tree=MEDUSA_TREE, label: str = ""):
        self.heads, self.lm_head_weight, self.tree, self.label = heads, lm_head_weight, tree, label
        self.hidden_layers = (final_layer,)
        self.state = None

    def start(self, prompt, prefill):
        rows = prefill.hidden_states[self.hidden_layers[0]]
        self.state = rows[-1] if len(rows) else None

    def propose(self, context, depth, sampling, rng):
        if self.state is None:
            return Draft()
        logits = self.heads(self.state, self.lm_head_weight)  # [heads, vocab]
        widest = max(path[-1] for path in self.tree) + 1
        return template_draft(self.tree, list(logits.topk(widest, dim=-1).indices), depth)

    def observe(self, step):
        row = step.accepted[-1] + 1 if step.accepted else 0
        self.state = step.hidden_states[self.hidden_layers[0]][row]

    def describe(self):
        return f"Medusa heads ({len(self.heads)} heads, {len(self.tree)}-node tree; {self.label})"


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


class EagleDrafter(Drafter):
    """EAGLE (Li et al. 2024): a one-layer head extrapolates the target's features.

    The head's row t reads (embedding of token t+1, feature t) and predicts feature t+1; the
    target's LM head turns a feature into the next token's distribution. Rows for committed
    tokens read the target's own features (prefill, then the verified rows); draft rows read the
    head's predictions, attending to the committed rows and their own ancestors in the tree.
    `tree`: a static template (EAGLE-1), or None for EAGLE-2's dynamic tree."""

    def __init__(self, head, embed_weight, lm_head_weight, final_layer: int, tree=EAGLE_TREE,
                 dynamic: tuple[int, int, int] = (EAGLE2_TOTAL, EAGLE2_DEPTH, EAGLE2_TOP_K), label: str = ""):
        self.head, self.embed_weight, self.lm_head_weight = head, embed_weight, lm_head_weight
        self.tree, self.dynamic, self.label = tree, dynamic, label
        self.hidden_layers = (final_layer,)

    def start(self, prompt, prefill):
        self.cache, self.fed = HeadCache(), 0  # rows in the cache: one per committed token but the pending one
        self.features = prefill.hidden_states[self.hidden_layers[0]]  # target features not yet fed, from row `fed`

    def observe(self, step):
        rows = [0] + [node + 1 for node in step.accepted]  # the pending token and the accepted nodes
        self.features = torch.cat([self.features, step.hidden_states[self.hidden_layers[0]][rows]])

    def _rows(self, tokens, features, positions, visible=None):
        embeds = F.embedding(torch.tensor(tokens, device=features.device), self.embed_weight)
        return self.head(embeds[None], features[None], torch.tensor([positions], device=features.device),
                         self.cache, visible)[0]

    def propose(self, context, depth, sampling, rng):
        # Feed the committed rows the head has not seen: row t = (token t+1, target feature t).
        count = len(self.features)
        if count:
            out = self._rows(context[self.fed + 1 : self.fed + 1 + count], self.features,
                             list(range(self.fed, self.fed + count)))
            self.fed, self.last, self.features = self.fed + count, out[-1], self.features[:0]
        if not self.fed:
            return Draft()
        draft = self._dynamic(depth) if self.tree is None else self._static(depth)
        self.cache.keep(list(range(self.fed)))  # drop the draft rows
        return draft

    def _logits(self, features):
        return F.linear(features, self.lm_head_weight)

    def _expand(self, tokens: list[int], features: torch.Tensor, depth_of: int, ancestors: list[list[int]]) -> torch.Tensor:
        """Head rows for draft nodes (token, parent's predicted feature) at position fed + depth - 1,
        each seeing the committed rows, its ancestors' rows and itself."""
        start = len(self.cache)
        visible = torch.zeros(len(tokens), start + len(tokens), dtype=torch.bool)
        visible[:, : self.fed] = True
        for i, rows in enumerate(ancestors):
            visible[i, rows] = True
            visible[i, start + i] = True
        return self._rows(tokens, features, [self.fed + depth_of - 1] * len(tokens), visible.to(features.device))

    def _static(self, depth):
        levels = max(map(len, self.tree))
        draft, node_of, row_of, feature_of = Draft(), {(): -1}, {(): None}, {(): self.last}
        ranked = {(): self._logits(self.last).topk(max(p[-1] for p in self.tree if len(p) == 1) + 1).indices}
        for level in range(1, min(depth, levels) + 1):
            paths = [p for p in self.tree if len(p) == level and p[:-1] in node_of and p[-1] < len(ranked[p[:-1]])]
            for path in paths:
                node_of[path] = len(draft.tokens)
                draft.tokens.append(int(ranked[path[:-1]][path[-1]]))
                draft.parents.append(node_of[path[:-1]])
            expand = [p for p in paths if any(len(q) == level + 1 and q[:-1] == p for q in self.tree)]
            if level == min(depth, levels) or not expand:
                break
            ancestors = [[row_of[p[:k]] for k in range(1, level)] for p in expand]
            start = len(self.cache)
            out = self._expand([draft.tokens[node_of[p]] for p in expand],
                               torch.stack([feature_of[p[:-1]] for p in expand]), level, ancestors)
            widest = max(q[-1] for q in self.tree if len(q) == level + 1) + 1
            top = self._logits(out).topk(widest, dim=-1).indices
            for i, p in enumerate(expand):
                row_of[p], feature_of[p], ranked[p] = start + i, out[i], top[i]
        return draft

    def _dynamic(self, depth):
        """EAGLE-2: grow by cumulative confidence (the product of the head's probabilities along
        the path), expanding the top_k best new nodes per level, then rerank every node and keep
        the `total` best (a node's score never exceeds its parent's, so the kept set is a tree)."""
        total, max_depth, top_k = self.dynamic
        tokens, parents, scores, rows = [], [], [], []
        logp = self._logits(self.last).log_softmax(-1)
        best = logp.topk(top_k)
        frontier = []
        for value, token in zip(best.values.tolist(), best.indices.tolist()):
            frontier.append(len(tokens))
            tokens.append(token), parents.append(-1), scores.append(value), rows.append(None)
        features = {node: self.last for node in frontier}  # the feature each node's head row reads
        for level in range(1, min(depth, max_depth)):
            ancestors = []
            for node in frontier:
                chain, parent = [], parents[node]
                while parent >= 0:
                    chain.append(rows[parent])
                    parent = parents[parent]
                ancestors.append(chain)
            start = len(self.cache)
            out = self._expand([tokens[n] for n in frontier], torch.stack([features[n] for n in frontier]),
                                level, ancestors)
            for i, node in enumerate(frontier):
                rows[node] = start + i
            logp = self._logits(out).log_softmax(-1)
            best = logp.topk(top_k, dim=-1)
            candidates = []
            for i, node in enumerate(frontier):
                for value, token in zip(best.values[i].tolist(), best.indices[i].tolist()):
                    candidates.append((scores[node] + value, node, token, i))
            candidates.sort(key=lambda c: -c[0])
            new_frontier = []
            for score, parent, token, i in candidates:
                node = len(tokens)
                tokens.append(token), parents.append(parent), scores.append(score), rows.append(None)
                if len(new_frontier) < top_k:
                    new_frontier.append(node)
                    features[node] = out[i]
            frontier = new_frontier
        keep = sorted(sorted(range(len(tokens)), key=lambda n: -scores[n])[:total])
        kept = set(keep)
        keep = [n for n in keep if all(a in kept for a in self._ancestors(n, parents))]
        index = {old: new for new, old in enumerate(keep)}
        return Draft([tokens[n] for n in keep], [index.get(parents[n], -1) for n in keep])

    @staticmethod
    def _ancestors(node, parents):
        out, parent = [], parents[node]
        while parent >= 0:
            out.append(parent)
            parent = parents[parent]
        return out

    def describe(self):
        shape = (f"{len(self.tree)}-node static tree" if self.tree is not None else
                 "dynamic tree: top-{2} per level, depth {1}, {0} nodes kept".format(*self.dynamic))
        return f"EAGLE head ({shape}; {self.label})"


# --------------------------------------------------------------------------------------------
# Compositions (the signature of methods.py's builders)


def load_head(target, family: str, drafter_checkpoint=None):
    """The head for `target`: a given checkpoint, else the one shipped for the embedded model."""
    from specatlas.impls.checkpoints import CheckpointError, load
    from specatlas.impls.models import EMBEDDED, ModelLoadError

    source = drafter_checkpoint or SHIPPED / f"{EMBEDDED}-{family}"
    if drafter_checkpoint is None and not source.is_dir():
        raise ModelLoadError(f"no trained {family} head is shipped yet; train one with `specatlas train {family}` "
                             "or pass --drafter-checkpoint")
    try:
        checkpoint = load(source, target, None if drafter_checkpoint else EMBEDDED)
    except CheckpointError as exc:
        hint = "" if drafter_checkpoint else " (the shipped head is for the embedded model: pass --drafter-checkpoint)"
        raise ModelLoadError(f"{exc}{hint}") from None
    if checkpoint.family != family:
        raise ModelLoadError(f"{source} is a {checkpoint.family} checkpoint, this method needs {family}")
    return checkpoint


def medusa(target, draft_model=None, draft_length=PAPER, drafter_checkpoint=None) -> SpeculativeDecoder:
    """Cai et al. 2024: Medusa heads + the paper's 63-node tree; exact match when greedy, typical
    acceptance (relaxed) when sampling, as the paper runs it."""
    checkpoint = load_head(target, "medusa", drafter_checkpoint)
    drafter = MedusaDrafter(checkpoint.head, target.lm_head.weight, checkpoint.hidden_layers[0], label=checkpoint.describe())
    return SpeculativeDecoder(target, drafter, sampling_verifier=TypicalAcceptance(),
                              draft_length=draft_policy(target, draft_length, max(map(len, MEDUSA_TREE)),
                                                        tree_nodes(MEDUSA_TREE), max(map(len, MEDUSA_TREE))))


BLOCKWISE_CHAIN = tuple((0,) * depth for depth in range(1, 5))


def blockwise(target, draft_model=None, draft_length=PAPER, drafter_checkpoint=None,
              top_k_acceptance: int = 0) -> SpeculativeDecoder:
    """Stern et al. 2018: the extra heads' top-1 tokens form a block (a chain), verified in one
    forward; the longest prefix that matches the target's greedy choices is kept. Exact by
    default; `top_k_acceptance=k` is the paper's approximate variant (relaxed). Uses the Medusa
    heads (one per look-ahead position), k = 4 block positions after the target's own token."""
    checkpoint = load_head(target, "medusa", drafter_checkpoint)
    drafter = MedusaDrafter(checkpoint.head, target.lm_head.weight, checkpoint.hidden_layers[0], tree=BLOCKWISE_CHAIN,
                            label=checkpoint.describe())
    greedy = TopKAcceptance(top_k_acceptance) if top_k_acceptance > 1 else GreedyMatch()
    depth = len(BLOCKWISE_CHAIN)
    return SpeculativeDecoder(target, drafter, greedy_verifier=greedy,
                              draft_length=draft_policy(target, draft_length, depth, max_depth=depth))


def eagle(target, draft_model=None, draft_length=PAPER, drafter_checkpoint=None) -> SpeculativeDecoder:
    """Li et al. 2024 (EAGLE-1): the feature-level head drafts EAGLE's 25-node static tree."""
    return _eagle(target, draft_length, drafter_checkpoint, EAGLE_TREE)


def eagle2(target, draft_model=None, draft_length=PAPER, drafter_checkpoint=None) -> SpeculativeDecoder:
    """Li et al. 2024 (EAGLE-2): the same head, with a dynamic tree grown and reranked by the
    head's cumulative confidence."""
    return _eagle(target, draft_length, drafter_checkpoint, None)


def _eagle(target, draft_length, drafter_checkpoint, tree):
    checkpoint = load_head(target, "eagle", drafter_checkpoint)
    drafter = EagleDrafter(checkpoint.head, target.model.embed_tokens.weight, target.lm_head.weight,
                           checkpoint.hidden_layers[0], tree=tree, label=checkpoint.describe())
    if tree is None:
        nodes, depth = (lambda k: min(EAGLE2_TOTAL, EAGLE2_TOP_K * k)), EAGLE2_DEPTH
    else:
        nodes, depth = tree_nodes(tree), max(map(len, tree))
    return SpeculativeDecoder(target, drafter, draft_length=draft_policy(target, draft_length, depth, nodes, depth))


# Kangaroo's Vicuna-7B command (its README): exit after layer 2 (of 32), at most 6 draft steps, stop
# drafting after a token whose top-1 probability is below 0.6. The exit layer is the adapter's own
# (its checkpoint config): 2 of SmolLM2's 30 layers, the same depth (~6%) as in the paper.
KANGAROO_STEPS, KANGAROO_THRESHOLD = 6, 0.6


def kangaroo(target, draft_model=None, draft_length=PAPER, drafter_checkpoint=None) -> SpeculativeDecoder:
    """Liu et al. 2024: the target's first l layers + the adapter draft on the target's own cache,
    stopping early on low confidence; verification resumes from layer l."""
    checkpoint = load_head(target, "kangaroo", drafter_checkpoint)
    drafter = Kangaroo(target, checkpoint.head, checkpoint.hidden_layers[0], KANGAROO_THRESHOLD, checkpoint.describe())
    return SpeculativeDecoder(target, drafter, forward=drafter.forward,
                              draft_length=draft_policy(target, draft_length, KANGAROO_STEPS, max_depth=KANGAROO_STEPS))
