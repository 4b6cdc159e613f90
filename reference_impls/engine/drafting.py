"""Axis 1 of the taxonomy: where draft tokens come from.

A drafter proposes a `Draft` (a chain or a token tree) after the committed tokens, and may
observe each `Verified` step (target logits and hidden states of every verified position and
the tokens committed), which is what Medusa/EAGLE heads, Lookahead's Jacobi branch or Token
Recycling's tables feed on. The loop never needs to know which kind of drafter it runs.

Self-speculative drafters (layer skipping, early exits) run the target's own layers on its own
cache through `TargetLayers`, the one door the session opens to them: a scratch that puts the
cache back to the committed text when it closes. What an early exit computed of the target's
forward travels to the verification inside the `Draft` (`ExitStates`), never on the drafter.
"""

from __future__ import annotations

from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache

import torch

from specatlas.impls.engine import kv
from specatlas.impls.engine.sampling import Randomness, Sampling, without


@dataclass
class Draft:
    """Draft tokens as a tree: node i continues node parents[i] (-1: the last committed token).

    parents[i] < i, so a chain is parents == [-1, 0, 1, ...]. Siblings were drawn in order,
    without replacement, from `q[i]` (the drafter's distribution at the parent, the same row for
    all siblings), or independently when `replacement` (so they may repeat), or, when `hub`, as
    SpecHub's pairs (`hub_pair`: the first from q; the second the hub, q's most likely token, unless
    the first is the hub, then from q without it); `q is None` means deterministic proposals (a
    point mass on each token).
    The last `auxiliary` nodes ride along in the verification forward so the drafter can read
    their outputs back (e.g. a Jacobi window), but they can never be accepted.
    `key`: what the drafter knows of this draft's reliability (e.g. the length of the match it was
    copied from); the cost-aware draft length learns acceptance per key.
    `exit_states`: the target's own forward of the verification's first rows up to an exit layer,
    computed while drafting (Kangaroo); the session's verification resumes from it.
    """

    tokens: list[int] = field(default_factory=list)
    parents: list[int] = field(default_factory=list)
    q: torch.Tensor | None = None
    auxiliary: int = 0
    key: object = None
    replacement: bool = False
    exit_states: ExitStates | None = None
    hub: bool = False

    @classmethod
    def chain(cls, tokens: list[int], q: torch.Tensor | None = None, key: object = None,
              exit_states: ExitStates | None = None) -> Draft:
        return cls(list(tokens), list(range(-1, len(tokens) - 1)), q, key=key, exit_states=exit_states)

    def node_depths(self) -> list[int]:
        """Each node's depth: 1 for a child of the last committed token."""
        return kv.depths(self.parents)

    def cut(self, depth: int) -> Draft:
        """The nodes at depth <= `depth` (a draft without auxiliary nodes)."""
        kept = [node for node, d in enumerate(self.node_depths()) if d <= depth]
        index = {old: new for new, old in enumerate(kept)}
        exit_states = None if self.exit_states is None else self.exit_states.select([0] + [node + 1 for node in kept])
        return Draft([self.tokens[node] for node in kept], [index.get(self.parents[node], -1) for node in kept],
                     None if self.q is None else self.q[kept], key=self.key, replacement=self.replacement,
                     exit_states=exit_states, hub=self.hub)

    @property
    def proposed(self) -> int:
        return len(self.tokens) - self.auxiliary

    @property
    def depth(self) -> int:
        return max(kv.depths(self.parents[: self.proposed]), default=0)

    def children(self) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {-1: []}
        for node in range(self.proposed):
            out.setdefault(self.parents[node], []).append(node)
            out.setdefault(node, [])
        return out


@dataclass
class ExitStates:
    """An early exit's share of a verification forward: the target's decoder layers 0..layer-1 run,
    while drafting, over the forward's first rows ([pending] + draft nodes, in order). The
    verification puts their keys and values back in the cache and runs only layers layer.. on
    them (`layer_view.forward_from_exit`): the shallow work is done once."""

    layer: int
    hidden: torch.Tensor  # [rows, hidden]: each row's state entering decoder layer `layer`
    cached: list[tuple[torch.Tensor, torch.Tensor]]  # per layer < `layer`: the rows' keys and values (`kv.copy_rows`)

    def select(self, rows: list[int]) -> ExitStates:
        """The states of those of `rows` (increasing verification rows, e.g. a cut draft's) it holds."""
        held = torch.tensor([row for row in rows if row < len(self.hidden)], device=self.hidden.device)
        return ExitStates(self.layer, self.hidden[held], [(keys[..., held, :], values[..., held, :]) for keys, values in self.cached])


class TargetLayers:
    """The target's decoder layers on the session's KV cache, as a self-speculative drafter uses
    them. Only inside `scratch()`: what a drafter runs there appends scratch rows to the layers it
    runs, and closing the scratch, however the drafter leaves it (an exception included), truncates
    every layer back to the committed text. The drafter never holds the session or its cache."""

    def __init__(self, model, cache):
        self.model, self._cache, self._committed = model, cache, None

    @contextmanager
    def scratch(self):
        assert self._committed is None, "scratches do not nest"
        self._committed = kv.cache_length(self._cache)
        try:
            yield self
        finally:
            kv.truncate(self._cache, self._committed)
            self._committed = None

    @property
    def committed(self) -> int | None:
        """Inside a scratch: the cached positions of committed text (every committed token but the pending one)."""
        return self._committed

    def forward(self, view, input_ids: list[int], tree=None, hidden_layers=(), last_only=False, head=True) -> kv.ForwardOutput:
        """`view` (a `layer_view.LayerView` of the target) over `input_ids` after the rows its layers
        hold, as in `kv.forward`; `head` False: no norm and LM head (logits None)."""
        assert self._committed is not None, "the target's layers run inside `scratch()`"
        return view(self.model, self._cache, input_ids, tree, hidden_layers, last_only, head)

    def exit_states(self, layer: int, hidden: torch.Tensor) -> ExitStates:
        """For the verification (`Draft.exit_states`): this scratch's rows, a chain after the committed
        text through exactly layers 0..layer-1, with `hidden`, their states entering `layer`."""
        assert all(kv.cache_length(self._cache, below) == self._committed + len(hidden) for below in range(layer)), \
            "exit states are the scratch's rows of every layer below the exit"
        return ExitStates(layer, hidden, kv.copy_rows(self._cache, self._committed, range(layer)))


@dataclass
class Prefill:
    """The target's prefill, as a drafter's `start` sees it."""

    prompt: tuple[int, ...]  # the whole prompt
    # layer -> [len(prompt) - 1, hidden]: the target's hidden states of prompt[:-1] (the last prompt
    # token is the pending one that opens the first verification forward); {} when none were asked.
    hidden_states: dict[int, torch.Tensor] = field(default_factory=dict)
    # The target's layers on the generation's cache, for self-speculative drafters; None outside the loop.
    target: TargetLayers | None = None


@dataclass
class Verified:
    """One verification step, as drafters may observe it."""

    draft: Draft
    logits: torch.Tensor  # target logits: row 0 after the last committed token, row 1+i after node i
    hidden_states: dict[int, torch.Tensor]  # layer -> [rows, hidden], same rows as logits; {} when none asked
    accepted: list[int]  # accepted node indices, root to leaf
    committed: tuple[int, ...]  # every token (prompt included) after this step: a snapshot, never the live list
    pending: int  # the token that opened the forward (row 0's input): the last one committed before it


class Drafter:
    """Interface. `start` once per generation after the target's prefill; then, each step,
    `propose` (the committed tokens and a depth budget >= 1) and `observe` (the verification).

    `hidden_layers`: the target hidden states the drafter reads, as indices into transformers'
    `hidden_states` (`kv.forward`'s numbering: h is the state after the first h decoder layers;
    num_hidden_layers the final normed one). The loop asks the target for exactly the union of
    what its drafter asks; none costs nothing.
    """

    hidden_layers: tuple[int, ...] = ()

    def start(self, prompt: list[int], prefill: Prefill) -> None:
        """Called once per generation, after the prefill and before the first `propose`: where a
        drafter resets what belongs to one text. Default: nothing to reset."""

    def propose(self, context: list[int], depth: int, sampling: Sampling, rng: Randomness) -> Draft:
        """A draft of at most `depth` levels after `context`: the committed tokens (PEARL's: followed
        by the drafts of its last round, not verified yet)."""
        raise NotImplementedError

    def observe(self, step: Verified) -> None:
        """Called after every verification; default: nothing to learn."""

    def describe(self) -> str:
        return type(self).__name__


class PromptLookup(Drafter):
    """Copy the tokens that followed the latest earlier occurrence of the current suffix n-gram
    (Saxena 2023). Free to compute, so it only costs verification width."""

    def __init__(self, max_ngram: int = 3, min_ngram: int = 1):
        self.max_ngram, self.min_ngram = max_ngram, min_ngram

    def propose(self, context, depth, sampling, rng):
        for n in range(min(self.max_ngram, len(context) - 1), self.min_ngram - 1, -1):
            suffix = context[-n:]
            # Scan backwards: the most recent occurrence best reflects what is being written now.
            for start in range(len(context) - n - 1, -1, -1):
                if context[start] == suffix[0] and context[start : start + n] == suffix:
                    return Draft.chain(context[start + n : start + n + depth], key=n)
        return Draft()

    def describe(self):
        return f"prompt lookup (n-gram {self.max_ngram}..{self.min_ngram})"


class ModelDrafter(Drafter):
    """A small causal LM drafting autoregressively: a chain (widths all 1), a token tree that
    expands widths[d] children per node at depth d, or a static `tree` template (paths of sibling
    ranks, as EAGLE's: node (0, 2) is the third child of the first child), one drafter forward
    per tree level over the nodes that have children.

    Greedy decoding drafts the drafter's top tokens; sampling draws children without replacement
    (independently when `replacement`, as SpecHub's pairs when `hub`: widths of at most 2) from the
    drafter's tempered distribution and records it in `Draft.q` for the verifier.

    `stop` (chains only): a rule that may end the chain after each drafted token from the draft
    model's states (`stop.layers`) at its last row (SpecDec++'s acceptance head,
    `families.specdecpp.PredictedRejection`): `stop.start()` per draft, then `stop.stop(drafted,
    states)` once the second token is drawn, with the states of the forward that drew it.
    """

    def __init__(self, model, widths: tuple[int, ...] = (), label: str = "draft model", replacement: bool = False,
                 hub: bool = False, tree: tuple[tuple[int, ...], ...] | None = None, stop=None):
        if hub and any(width > 2 for width in widths):
            raise ValueError("SpecHub's hub pairs are two siblings: widths of at most 2")
        if stop is not None and any(width > 1 for width in widths):
            raise ValueError("a stopping rule ends a chain: widths of 1")
        self.model, self.widths, self.label, self.replacement, self.hub = model, widths, label, replacement, hub
        self.tree, self.stop = tree, stop
        self.cache = kv.new_cache(model)
        self.cached: list[int] = []  # the tokens whose keys/values the cache holds, in order

    def start(self, prompt, prefill):
        self.cache, self.cached = kv.new_cache(self.model), list(prompt[:-1])
        if self.cached:
            kv.forward(self.model, self.cache, self.cached, last_only=True)

    def uncached(self, context: list[int]) -> list[int]:
        """The tokens of `context` the cache lacks (at least the last), the cache cut back to the rest.
        The cache holds the last context plus its draft: it is kept up to the first token that
        differs (compared from the start: PEARL's context ends with drafts since rejected)."""
        shared = min(len(self.cached), len(context) - 1)
        common = next((i for i in range(shared) if self.cached[i] != context[i]), shared)
        kv.truncate(self.cache, common)
        self.cached = list(context)
        return context[common:]

    def propose(self, context, depth, sampling, rng):
        logits = kv.forward(self.model, self.cache, self.uncached(context), last_only=True).logits

        branches = None if self.tree is None else Counter(path[:-1] for path in self.tree)

        def width(level: int, path: tuple[int, ...]) -> int:
            if branches is not None:
                return branches[path]
            return self.widths[level] if level < len(self.widths) else 1

        draft = Draft(q=None if sampling.greedy else [], replacement=self.replacement, hub=self.hub)
        frontier, rows = [(-1, ())], []  # (node, its path of sibling ranks); the nodes in the cache, in order
        if self.stop is not None:
            self.stop.start()
        for level in range(depth):
            new_nodes = []
            for row, (parent, path) in enumerate(frontier):
                key = (len(context) + level, "draft", row)  # the position drafted, and which parent
                drawn = self._children(logits[row], width(level, path), sampling, rng, key, self.replacement, self.hub)
                for rank, (token, q) in enumerate(drawn):
                    draft.tokens.append(token)
                    draft.parents.append(parent)
                    if q is not None:
                        draft.q.append(q)
                    new_nodes.append((len(draft.tokens) - 1, path + (rank,)))
            frontier = [(node, path) for node, path in new_nodes if width(level + 1, path)]
            stopped = self.stop is not None and level > 0 and self.stop.stop(level + 1, out.hidden_states)
            if level == depth - 1 or not frontier or stopped:
                break
            # Only nodes with children are run; their parents were, so the cache rows form a tree.
            rows += [node for node, _ in frontier]
            row_of = {node: i for i, node in enumerate(rows)}
            parents = [row_of.get(draft.parents[node], -1) for node in rows]
            tree = None if kv.is_chain(draft.parents) else parents
            out = kv.forward(self.model, self.cache, [draft.tokens[node] for node, _ in frontier], tree=tree,
                             hidden_layers=self.stop.layers if self.stop else ())
            logits = out.logits
        if kv.is_chain(draft.parents):
            self.cached += draft.tokens[:-1]  # a chain's rows are a valid continuation to reuse
        else:
            kv.truncate(self.cache, len(context))
        if draft.q is not None:
            draft.q = torch.stack(draft.q) if draft.q else None
        return draft

    @staticmethod
    def _children(logits, width, sampling, rng, key, replacement: bool = False, hub: bool = False):
        if sampling.greedy:
            return [(int(t), None) for t in logits.topk(width).indices]
        q = sampling.probs(logits)
        if hub and width == 2:
            return [(token, q) for token in hub_pair(q, rng, key)]
        if replacement:
            return [(rng.categorical(q, *key, sibling), q) for sibling in range(width)]
        drawn: list[int] = []
        for sibling in range(min(width, int((q > 0).sum()))):
            drawn.append(rng.categorical(without(q, drawn), *key, sibling))
        return [(token, q) for token in drawn]

    def describe(self):
        return self.label


def hub_pair(q: torch.Tensor, rng: Randomness, key: tuple) -> list[int]:
    """SpecHub's two drafts (Sun et al. 2024) from q around its hub a = argmax q: the first X1 ~ q;
    the second is a when X1 != a, else X2 ~ q without a. Every pair holds the hub, so the joint is
    the sparse Q(x, a) = q(x), Q(a, x) = q(a) q(x) / (1 - q(a)) (`verification.hub_pair_masses`).
    One draft when q has no other token."""
    hub = int(q.argmax())
    first = rng.categorical(q, *key, 0)
    if first != hub:
        return [first, hub]
    if int((q > 0).sum()) < 2:
        return [first]
    return [first, rng.categorical(without(q, [hub]), *key, 1)]


def grow_template(tree, depth: int, root: list[int], expand) -> Draft:
    """Fill a static tree template level by level (EAGLE-1's and Hydra's trees): node `path` is
    the path[-1]-th ranked candidate after its parent. `root` ranks the candidates after the
    pending token (target ids, best first); `expand(paths, chains, width)` ranks `width` candidates
    after each of those nodes (a list of id lists), `chains[i]` being the tokens drafted along
    `paths[i]`. Only nodes with children in the template are expanded, one batched call per level."""
    levels = _template_levels(tuple(map(tuple, tree)))[: min(depth, max(map(len, tree)))]
    draft, node_of, ranked = Draft(), {(): -1}, {(): root}
    for level, (nodes, branching, width) in enumerate(levels, 1):
        paths = [p for p in nodes if p[:-1] in ranked and p[-1] < len(ranked[p[:-1]])]
        for path in paths:
            node_of[path] = len(draft.tokens)
            draft.tokens.append(ranked[path[:-1]][path[-1]])
            draft.parents.append(node_of[path[:-1]])
        parents = [p for p in paths if p in branching]
        if level == len(levels) or not parents:
            break
        chains = [[draft.tokens[node_of[p[:k]]] for k in range(1, level + 1)] for p in parents]
        ranked.update(zip(parents, expand(parents, chains, width)))
    return draft


@lru_cache(maxsize=None)
def _template_levels(tree: tuple[tuple[int, ...], ...]) -> list[tuple[list, frozenset, int]]:
    """A static template by level, computed once per template: (its nodes in template order, those
    with children, how many candidates the next level ranks after each: its largest rank + 1)."""
    out = []
    for level in range(1, max(map(len, tree)) + 1):
        deeper = [q for q in tree if len(q) == level + 1]
        out.append(([p for p in tree if len(p) == level], frozenset(q[:-1] for q in deeper),
                    max((q[-1] for q in deeper), default=-1) + 1))
    return out
