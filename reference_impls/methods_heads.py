"""Trained-head drafters on the shared loop: Medusa, Hydra, EAGLE (static tree), EAGLE-2 (dynamic
tree), EAGLE-3 (its own head on EAGLE-2's tree), FR-Spec (EAGLE-2 drafting from frequent tokens)
and Kangaroo (an adapter on the target's shallow exit; its drafter is in `layer_view`).

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

from specatlas.impls.checkpoints import HeadNotShipped, load_head, shipped_head_folder
from specatlas.impls.decoding import SpeculativeDecoder
from specatlas.impls.draft_length import DraftLengthPolicy
from specatlas.impls.drafting import Draft, Drafter
from specatlas.impls.families.fr_spec import FR_SPEC_FRACTION
from specatlas.impls.heads import HeadCache
from specatlas.impls.layer_view import Kangaroo
from specatlas.impls.errors import ModelLoadError, unpickle_failure
from specatlas.impls.recycling import template_nodes
from specatlas.impls.verification import GreedyMatch, Verifier


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
# Hydra drafts Medusa's tree: `hydra_generate` defaults to the same mc_sim_7b_63 (zankner/Hydra hydra_choices.py).
HYDRA_TREE = MEDUSA_TREE
# EAGLE-1's static tree (SafeAILab/EAGLE eagle/model/choices.py): 25 nodes, depth 5.
EAGLE_TREE = tuple(map(tuple, [
    [0], [1], [2], [3], [0, 0], [0, 1], [0, 2], [1, 0], [1, 1], [2, 0], [2, 1], [3, 0], [0, 0, 0], [0, 0, 1], [0, 0, 2],
    [0, 1, 0], [0, 1, 1], [0, 2, 0], [0, 2, 1], [1, 0, 0], [0, 0, 0, 0], [0, 0, 0, 1], [0, 0, 0, 2], [0, 0, 0, 0, 0],
    [0, 0, 0, 0, 1]]))
# EAGLE-2's dynamic tree (EaModel defaults in SafeAILab/EAGLE): expand the top_k best nodes per level
# for `depth` levels, then keep the total_token best of all by cumulative draft log-probability.
EAGLE2_TOTAL, EAGLE2_DEPTH, EAGLE2_TOP_K = 60, 7, 10


def grow_template(tree, depth: int, root: torch.Tensor, expand) -> Draft:
    """Fill a static tree template level by level (EAGLE-1's and Hydra's trees): node `path` is
    the path[-1]-th ranked candidate after its parent. `root` ranks the candidates after the
    pending token (target ids, best first); `expand(paths, chains, width)` ranks `width` candidates
    after each of those nodes, `chains[i]` being the tokens drafted along `paths[i]`. Only nodes
    with children in the template are expanded, one batched call per level."""
    levels = min(depth, max(map(len, tree)))
    draft, node_of, ranked = Draft(), {(): -1}, {(): root}
    for level in range(1, levels + 1):
        paths = [p for p in tree if len(p) == level and p[:-1] in ranked and p[-1] < len(ranked[p[:-1]])]
        for path in paths:
            node_of[path] = len(draft.tokens)
            draft.tokens.append(int(ranked[path[:-1]][path[-1]]))
            draft.parents.append(node_of[path[:-1]])
        deeper = [q for q in tree if len(q) == level + 1]
        parents = [p for p in paths if any(q[:-1] == p for q in deeper)]
        if level == levels or not parents:
            break
        chains = [[draft.tokens[node_of[p[:k]]] for k in range(1, level + 1)] for p in parents]
        ranked.update(zip(parents, expand(parents, chains, max(q[-1] for q in deeper) + 1)))
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
        ranked = logits.topk(max(path[-1] for path in self.tree) + 1, dim=-1).indices
        # Every node at depth d shares head d's candidates: they do not depend on the path.
        return grow_template(self.tree, depth, ranked[0], lambda paths, chains, width: [ranked[len(paths[0])]] * len(paths))

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


class HydraDrafter(MedusaDrafter):
    """Hydra (Ankner et al. 2024), per step:
    1. h = the target's last kept final state, x = the pending token its logits chose;
    2. head 1 ranks candidates for the token after x from (h, E(x));
    3. each tree node with children is expanded by the next head from (h, E(x), E(its path's
       tokens)): unlike Medusa's, a branch's candidates depend on the tokens drafted before them;
    4. the target verifies the tree in one forward; its kept rows give the next h."""

    def __init__(self, heads, embed_weight, lm_head_weight, final_layer: int, tree=HYDRA_TREE, label: str = ""):
        super().__init__(heads, lm_head_weight, final_layer, tree, label)
        self.embed_weight = embed_weight

    def propose(self, context, depth, sampling, rng):
        if self.state is None:
            return Draft()

        def rank(paths, chains, width):
            k = len(chains[0])  # head k drafts depth k + 1
            ids = torch.tensor([[context[-1], *chain] for chain in chains], device=self.state.device)
            features = self.heads.features(k, self.state.expand(len(chains), -1), F.embedding(ids, self.embed_weight))
            logits = self.heads.logits(k, features, self.lm_head_weight)
            return list(logits.topk(min(width, logits.shape[-1]), dim=-1).indices)

        root = rank([()], [[]], max(path[-1] for path in self.tree if len(path) == 1) + 1)[0]
        return grow_template(self.tree, min(depth, len(self.heads)), root, rank)

    def describe(self):
        return f"Hydra heads ({len(self.heads)} heads, {len(self.tree)}-node tree; {self.label})"


class EagleDrafter(Drafter):
    """EAGLE (Li et al. 2024): a one-layer head extrapolates the target's features.

    The head's row t reads (embedding of token t+1, feature t) and predicts feature t+1; the
    target's LM head turns a feature into the next token's distribution. Rows for committed
    tokens read the target's own features (prefill, then the verified rows); draft rows read the
    head's predictions, attending to the committed rows and their own ancestors in the tree.
    `tree`: a static template (EAGLE-1), or None for EAGLE-2's dynamic tree. `vocabulary`
    (FR-Spec): the target ids drafts are drawn from; the LM head keeps only their rows, which is
    the point (it dominates a draft step). Verification still scores the whole vocabulary."""

    name = "EAGLE"

    def __init__(self, head, embed_weight, lm_head_weight, final_layer: int, tree=EAGLE_TREE,
                 dynamic: tuple[int, int, int] = (EAGLE2_TOTAL, EAGLE2_DEPTH, EAGLE2_TOP_K), label: str = "",
                 vocabulary: torch.Tensor | None = None):
        self.head, self.embed_weight, self.vocabulary = head, embed_weight, vocabulary
        self.lm_head_weight = lm_head_weight if vocabulary is None or lm_head_weight is None else lm_head_weight[vocabulary]
        self.tree, self.dynamic, self.label = tree, dynamic, label
        self.hidden_layers = (final_layer,)

    def start(self, prompt, prefill):
        self.cache, self.fed = HeadCache(), 0  # rows in the cache: one per committed token but the pending one
        self.features = self._target_features(prefill.hidden_states)  # target features not yet fed, from row `fed`

    def observe(self, step):
        rows = [0] + [node + 1 for node in step.accepted]  # the pending token and the accepted nodes
        self.features = torch.cat([self.features, self._target_features(step.hidden_states, rows)])

    def _target_features(self, states, rows=slice(None)):
        return torch.cat([states[layer][rows] for layer in self.hidden_layers], -1)

    def _rows(self, tokens, features, positions, visible=None):
        embeds = F.embedding(torch.tensor(tokens, device=features.device), self.embed_weight)
        return self._advance(embeds[None], features[None], torch.tensor([positions], device=features.device), visible)[0]

    def _advance(self, embeds, features, positions, visible):
        """The head's predicted next features for these rows (appending them to the head's cache)."""
        return self.head(embeds, features, positions, self.cache, visible)

    def _logits(self, features):
        return F.linear(features, self.lm_head_weight)

    def _top(self, features, k: int):
        """The k best draft tokens after these features: (log-probabilities, target ids)."""
        best = self._logits(features).log_softmax(-1)
        best = best.topk(min(k, best.shape[-1]), dim=-1)
        return best.values, best.indices if self.vocabulary is None else self.vocabulary[best.indices]

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
        row_of, feature_of = {}, {(): self.last}

        def expand(paths, chains, width):
            level, start = len(paths[0]), len(self.cache)
            out = self._expand([chain[-1] for chain in chains], torch.stack([feature_of[p[:-1]] for p in paths]), level,
                               [[row_of[p[:k]] for k in range(1, level)] for p in paths])
            for i, path in enumerate(paths):
                row_of[path], feature_of[path] = start + i, out[i]
            return list(self._top(out, width)[1])

        root = self._top(self.last, max(p[-1] for p in self.tree if len(p) == 1) + 1)[1]
        return grow_template(self.tree, depth, root, expand)

    def _dynamic(self, depth):
        """EAGLE-2: grow by cumulative confidence (the product of the head's probabilities along
        the path), expanding the top_k best new nodes per level, then rerank every node and keep
        the `total` best (a node's score never exceeds its parent's, so the kept set is a tree)."""
        total, max_depth, top_k = self.dynamic
        tokens, parents, scores, rows = [], [], [], []
        values, ids = self._top(self.last, top_k)
        frontier = []
        for value, token in zip(values.tolist(), ids.tolist()):
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
            values, ids = self._top(out, top_k)
            candidates = []
            for i, node in enumerate(frontier):
                for value, token in zip(values[i].tolist(), ids[i].tolist()):
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
        vocabulary = "" if self.vocabulary is None else f", drafts from {len(self.vocabulary)} frequent tokens"
        return f"{self.name} head ({shape}{vocabulary}; {self.label})"


class Eagle3Drafter(EagleDrafter):
    """EAGLE-3 (Li et al. 2025) drafts EAGLE-2's dynamic tree with its own head: committed rows
    read the target's low/mid/high states fused (fc), draft rows the head's own outputs, and
    the head ranks its draft vocabulary through its own norm and LM head (d2t maps to target ids)."""

    name = "EAGLE-3"

    def __init__(self, head, embed_weight, hidden_layers: tuple[int, ...],
                 dynamic: tuple[int, int, int] = (EAGLE2_TOTAL, EAGLE2_DEPTH, EAGLE2_TOP_K), label: str = ""):
        vocabulary = head.to_target(torch.arange(len(head.d2t), device=head.d2t.device))
        super().__init__(head, embed_weight, None, hidden_layers[-1], None, dynamic, label, vocabulary)
        self.hidden_layers = tuple(hidden_layers)

    def _advance(self, embeds, features, positions, visible):
        return self.head.hidden(embeds, features, positions, self.cache, visible)

    def _logits(self, features):
        return self.head.logits(features)


# --------------------------------------------------------------------------------------------
# Compositions (the signature of methods.py's builders)


def medusa(target, draft_model=None, policy=DraftLengthPolicy.paper(), drafter_checkpoint=None) -> SpeculativeDecoder:
    """Cai et al. 2024: Medusa heads + the paper's 63-node tree; exact match when greedy, typical
    acceptance (relaxed) when sampling, as the paper runs it."""
    checkpoint = load_head(target, "medusa", drafter_checkpoint)
    drafter = MedusaDrafter(checkpoint.head, target.lm_head.weight, checkpoint.hidden_layers[0], label=checkpoint.describe())
    return SpeculativeDecoder(target, drafter, sampling_verifier=TypicalAcceptance(),
                              draft_length=policy.controller(target, max(map(len, MEDUSA_TREE)),
                                                             template_nodes(MEDUSA_TREE), max(map(len, MEDUSA_TREE))))


BLOCKWISE_CHAIN = tuple((0,) * depth for depth in range(1, 5))


def blockwise(target, draft_model=None, policy=DraftLengthPolicy.paper(), drafter_checkpoint=None,
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
                              draft_length=policy.controller(target, depth, max_depth=depth))


def eagle(target, draft_model=None, policy=DraftLengthPolicy.paper(), drafter_checkpoint=None) -> SpeculativeDecoder:
    """Li et al. 2024 (EAGLE-1): the feature-level head drafts EAGLE's 25-node static tree."""
    return _eagle(target, policy, drafter_checkpoint, EAGLE_TREE)


def eagle2(target, draft_model=None, policy=DraftLengthPolicy.paper(), drafter_checkpoint=None) -> SpeculativeDecoder:
    """Li et al. 2024 (EAGLE-2): the same head, with a dynamic tree grown and reranked by the
    head's cumulative confidence."""
    return _eagle(target, policy, drafter_checkpoint, None)


def _eagle(target, policy, drafter_checkpoint, tree, vocabulary=None):
    checkpoint = load_head(target, "eagle", drafter_checkpoint)
    drafter = EagleDrafter(checkpoint.head, target.model.embed_tokens.weight, target.lm_head.weight,
                           checkpoint.hidden_layers[0], tree=tree, label=checkpoint.describe(), vocabulary=vocabulary)
    if tree is None:
        return SpeculativeDecoder(target, drafter, draft_length=_dynamic_length(target, policy))
    depth = max(map(len, tree))
    return SpeculativeDecoder(target, drafter, draft_length=policy.controller(target, depth, template_nodes(tree), depth))


def _dynamic_length(target, policy: DraftLengthPolicy):
    """EAGLE-2's dynamic tree: top-k nodes per level up to the total kept."""
    return policy.controller(target, EAGLE2_DEPTH, lambda k: min(EAGLE2_TOTAL, EAGLE2_TOP_K * k), EAGLE2_DEPTH)


def hydra(target, draft_model=None, policy=DraftLengthPolicy.paper(), drafter_checkpoint=None) -> SpeculativeDecoder:
    """Ankner et al. 2024: Hydra's sequentially dependent heads draft Medusa's 63-node tree (its
    code's default), each branch conditioned on its own tokens. Verification is exact (greedy
    matching; recursive rejection sampling when sampling), as in the paper's greedy evaluation."""
    checkpoint = load_head(target, "hydra", drafter_checkpoint)
    drafter = HydraDrafter(checkpoint.head, target.model.embed_tokens.weight, target.lm_head.weight,
                           checkpoint.hidden_layers[0], label=checkpoint.describe())
    depth = max(map(len, HYDRA_TREE))
    return SpeculativeDecoder(target, drafter, draft_length=policy.controller(target, depth, template_nodes(HYDRA_TREE), depth))


def eagle3(target, draft_model=None, policy=DraftLengthPolicy.paper(), drafter_checkpoint=None) -> SpeculativeDecoder:
    """Li et al. 2025 (EAGLE-3): the EAGLE-3 head (fused target states, own draft vocabulary)
    drafts EAGLE-2's dynamic tree with EAGLE-2's defaults (EaModel's for EAGLE-3 too)."""
    checkpoint = load_head(target, "eagle3", drafter_checkpoint)
    drafter = Eagle3Drafter(checkpoint.head, target.model.embed_tokens.weight, checkpoint.hidden_layers,
                            label=checkpoint.describe())
    return SpeculativeDecoder(target, drafter, draft_length=_dynamic_length(target, policy))


def fr_spec(target, draft_model=None, policy=DraftLengthPolicy.paper(), drafter_checkpoint=None) -> SpeculativeDecoder:
    """Zhao et al. 2025 (FR-Spec): EAGLE-2 whose drafter ranks only the most frequent quarter of the
    vocabulary (its LM head cut to those rows); the target verifies over the whole vocabulary, so
    the output is unchanged. The ranking is FR-Spec's `freq_{V}.pt` (token ids, most frequent
    first) beside the EAGLE head, computed once from the training data by `specatlas train fr-spec`."""
    folder = Path(drafter_checkpoint) if drafter_checkpoint else shipped_head_folder("eagle")
    return _eagle(target, policy, drafter_checkpoint, None,
                  frequent_tokens(folder, target.config.vocab_size // FR_SPEC_FRACTION, drafter_checkpoint is None)
                  .to(target.lm_head.weight.device))


def frequent_tokens(folder: Path, size: int, is_shipped: bool) -> torch.Tensor:
    path = folder / f"freq_{size}.pt"
    if not path.is_file():
        error = HeadNotShipped if is_shipped else ModelLoadError
        raise error(f"no FR-Spec token ranking {path.name} beside the EAGLE head in {folder}; compute it with "
                    f"`specatlas train fr-spec{'' if is_shipped else ' --output ' + str(folder)}`")
    try:  # weights_only: a list of ints, never code to run
        ranked = torch.tensor(torch.load(path, map_location="cpu", weights_only=True), dtype=torch.long)
        if ranked.dim() != 1 or not len(ranked):
            raise ValueError("not a list of token ids")
    except Exception as exc:  # noqa: BLE001 - unpickling refused, truncated, wrong content...
        raise ModelLoadError(f"{path}: cannot read FR-Spec's token ranking ({unpickle_failure(exc)})") from None
    return ranked


# Kangaroo's Vicuna-7B command (its README): exit after the first 2 layers (of 32), at most 6 draft steps, stop
# drafting after a token whose top-1 probability is below 0.6. The exit layer is the adapter's own
# (its checkpoint config): 2 of SmolLM2's 30 layers, the same depth (~6%) as in the paper.
KANGAROO_STEPS, KANGAROO_THRESHOLD = 6, 0.6


def kangaroo(target, draft_model=None, policy=DraftLengthPolicy.paper(), drafter_checkpoint=None) -> SpeculativeDecoder:
    """Liu et al. 2024: the target's first l layers + the adapter draft on the target's own cache,
    stopping early on low confidence; verification resumes from layer l (the draft carries its exit states)."""
    checkpoint = load_head(target, "kangaroo", drafter_checkpoint)
    drafter = Kangaroo(target, checkpoint.head, checkpoint.hidden_layers[0], KANGAROO_THRESHOLD, checkpoint.describe())
    return SpeculativeDecoder(target, drafter, draft_length=policy.controller(target, KANGAROO_STEPS, max_depth=KANGAROO_STEPS))
