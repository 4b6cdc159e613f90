"""SuffixDecoding (Oliaro et al. 2025): model-free drafts from suffix trees over the current request
(its prompt and what it has generated so far) and over the outputs of earlier generations.

Each tree holds every substring of up to `depth` tokens of the text added to it, with how often it
occurs. The last p tokens of the context (the pattern) are matched in a tree for every p, and
what followed them there grows a speculation tree, most frequent continuations first, each node
scored by its estimated probability D = the product of the conditional frequencies
count(child) / count(parent) along its path. Of the trees grown for every pattern length in both
suffix trees, the one with the highest score (the sum of its nodes' D) is the draft.

Drafts are point masses (`Draft.q is None`): greedy decoding verifies them by exact match, sampling
by the engine's rejection sampling, lossless for deterministic drafts.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from specatlas.impls.engine.drafting import Draft, Drafter
from specatlas.impls.drafters.model_free.retrieval import match_key


class Node:
    __slots__ = ("children", "count")

    def __init__(self):
        self.children: dict[int, Node] = {}
        self.count = 0  # occurrences of the substring that ends here


class SuffixTree:
    """The suffixes of a set of token sequences, cut at `depth` tokens, as a trie with counts: the
    node of a string s holds how many times s occurs in them. Sequences grow online: appending a
    token extends the node of every suffix shorter than `depth` that ends the sequence (O(depth)
    per token). Substrings never span two sequences."""

    def __init__(self, depth: int):
        self.depth = depth
        self.root = Node()
        self.ends: dict[object, list[Node]] = {}  # per sequence: its suffixes' nodes, of lengths 0..depth-1

    def extend(self, sequence: object, tokens) -> None:
        ends = self.ends.get(sequence, [self.root])
        for token in tokens:
            grown = []
            for node in ends:
                child = node.children.get(token)
                if child is None:
                    child = node.children[token] = Node()
                child.count += 1
                grown.append(child)
            ends = [self.root] + grown[: self.depth - 1]
        self.ends[sequence] = ends

    def find(self, pattern) -> Node | None:
        node = self.root
        for token in pattern:
            node = node.children.get(token)
            if node is None:
                return None
        return node

    def speculate(self, context: list[int], budget, depth: int, min_probability: float) -> Speculation:
        """The best speculation tree over every pattern length p (the last p tokens of `context`,
        1 <= p < `depth`): grown from the pattern's node with at most `budget(p)` nodes and
        `depth` levels. Ties go to the longer pattern."""
        best = Speculation()
        for length in range(1, min(len(context), self.depth - 1) + 1):
            node = self.find(context[-length:])
            if node is None:  # a longer pattern cannot occur either
                break
            grown = grow(node, budget(length), depth, min_probability)
            if grown.score >= best.score:
                grown.match = length
                best = grown
        return best


@dataclass
class Speculation:
    tokens: list[int] = field(default_factory=list)
    parents: list[int] = field(default_factory=list)
    probabilities: list[float] = field(default_factory=list)  # each node's D
    match: int = 0  # the pattern length it was grown from

    @property
    def score(self) -> float:
        return sum(self.probabilities)


def grow(matched: Node, budget: int, depth: int, min_probability: float) -> Speculation:
    """The speculation tree after `matched`: repeatedly add the candidate with the highest D (a
    child of the matched node or of a node already added), until `budget` nodes; a candidate's D is
    its parent's times count(candidate) / count(parent), and candidates below `min_probability`
    are never added (nor, as D only falls along a path, anything after them)."""
    tree, order = Speculation(), 0
    frontier: list[tuple[float, int, Node, int, int, int]] = []  # (-D, order, node, token, parent, level)

    def offer(node: Node, probability: float, parent: int, level: int) -> None:
        nonlocal order
        if level > depth:
            return
        for token, child in node.children.items():
            d = probability * child.count / node.count
            if d >= min_probability:
                heapq.heappush(frontier, (-d, order, child, token, parent, level))
                order += 1

    offer(matched, 1.0, -1, 1)
    while frontier and len(tree.tokens) < budget:
        d, _, node, token, parent, level = heapq.heappop(frontier)
        tree.tokens.append(token)
        tree.parents.append(parent)
        tree.probabilities.append(-d)
        offer(node, -d, len(tree.tokens) - 1, level + 1)
    return tree


class SuffixDecoding(Drafter):
    """SuffixDecoding (Oliaro et al. 2025): two suffix trees, one over this request (the prompt and
    the tokens generated so far, `start` resets it) and one over every generation's output (kept
    across generations: what the drafter served before predicts what it will serve again, the
    agentic and repetitive workloads the paper targets). Each proposes its best speculation tree
    (`SuffixTree.speculate`); the higher score wins, the request's on a tie.

    Paper defaults (its simulator's and vLLM integration's): trees of depth 64; at most
    MAX_SPEC = α·p nodes for a pattern of p tokens, α = 1 (`factor`), and at most 64; nodes below
    D = 0.1 (`min_probability`) dropped. Here `nodes(depth)` also bounds the tree, and its depth is
    the loop's budget, so the cost-aware policy prices the tree it will get.
    """

    def __init__(self, depth: int = 64, factor: float = 1.0, min_probability: float = 0.1, nodes=lambda depth: 64):
        self.depth, self.factor, self.min_probability, self.nodes = depth, factor, min_probability, nodes
        self.outputs = SuffixTree(depth)
        self.request = SuffixTree(depth)
        self.generation = 0
        self.seen = 0  # context tokens already added to the trees

    def start(self, prompt, prefill):
        self.generation += 1
        self.request = SuffixTree(self.depth)
        self.request.extend("request", prompt)
        self.seen = len(prompt)

    def _add(self, text) -> None:
        """The committed tokens not yet in the trees go into both."""
        generated = list(text[self.seen :])
        self.request.extend("request", generated)
        self.outputs.extend(self.generation, generated)
        self.seen = len(text)

    def propose(self, context, depth, sampling, rng):
        self._add(context)
        cap = self.nodes(depth)

        def budget(length: int) -> int:
            return min(cap, int(self.factor * length + 1e-6))

        best, source = None, None
        for name, tree in (("request", self.request), ("outputs", self.outputs)):
            speculation = tree.speculate(context, budget, depth, self.min_probability)
            if best is None or speculation.score > best.score:
                best, source = speculation, name
        return Draft(best.tokens, best.parents, key=(source, match_key(best.match)))

    def observe(self, step):
        self._add(step.committed)  # the last step's tokens too, before the generation ends

    def describe(self):
        return (f"SuffixDecoding (suffix trees of depth {self.depth} over this request and {max(self.generation - 1, 0)} "
                f"earlier outputs; α = {self.factor:g}, D >= {self.min_probability:g})")
