"""Sequoia (Chen et al. 2024): the token tree that pays most on this hardware, from a measured
positional acceptance vector and the measured cost curves.

Positional acceptance: the chance that a node's k-th drafted child is the one the target keeps
depends on k only: p_k (the k-th ranked token when greedy; the k-th drawn without replacement
when sampling), with p_1 + ... + p_W <= 1. A node's chance of being kept is then the product of
the p_k along its path, and a tree's expected tokens per step (its accepted nodes plus the one the
target adds) is the sum of those products over its nodes, the root counting 1. The best tree of
m nodes (the root, i.e. the pending token, included) and at most l levels follows from smaller
ones, its b-th child's subtree weighted by p_b:

    G(m, l, 0) = 1 for m = 1
    G(m, l, b) = max over y of G(y, l, b - 1) + p_b · max_b' G(m - y, l - 1, b')

(the first b - 1 children and the root take y nodes, the b-th child's subtree the other m - y).
The hardware-aware optimiser then picks the size n and depth d maximising expected tokens per
second, G(n, d) / (t(n) + drafting), t(n) the target's measured seconds for a forward over n
tokens (only the widths the curve measured are candidates, as in Sequoia's `valid_budget`) and
drafting the drafter's d forwards, each priced by the drafter's own measured curve at the width it
runs (the paper's d·c when that curve is flat). A single root (n = 1) is plain decoding.

The acceptance vector is measured per target, drafter and sampling as Sequoia's test_accept.py
does (trees of one level of W children, counting which child the verification keeps), on the
target's own text: its continuation of a few calibration prompts is scored once by the target and
once by the drafter, and at every position W children are drafted from the drafter's row and
verified against the target's. Cached in the user cache (`$SPECATLAS_CACHE/sequoia/`).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from specatlas.fsutil import CACHE_BYTES, ReadError, read_json
from specatlas.impls.engine import kv
from specatlas.impls.engine.draft_length import calibrate, interpolate
from specatlas.impls.engine.drafting import Draft, ModelDrafter
from specatlas.impls.engine.sampling import Randomness, Sampling

# Sequoia's code: acceptance vectors over W = 16 children (tests/test_accept.py's --W default);
# trees of at most 128 nodes and 10 levels, root included (demo-config.json's max_budget, max_depth).
MAX_BRANCH, MAX_NODES, MAX_LEVELS = 16, 128, 10
# Ours (the paper measures on 200 dataset examples): the measurement's size on a CPU.
MEASURE_PROMPTS, MEASURE_TOKENS, MEASURE_DRAWS = 4, 64, 2


@lru_cache(maxsize=8)
def optimal_values(acceptance: tuple[float, ...], max_nodes: int = MAX_NODES, max_levels: int = MAX_LEVELS):
    """(G, split) of the dynamic programme: G[m, l, b] the best expected tokens of a tree of m nodes,
    at most l levels and b children at the root (-inf where none exists); split[m, l, b] the y that
    achieves it (the nodes left to the root and its first b - 1 children). Read-only arrays, computed
    once per vector."""
    p = [0.0, *acceptance]
    width = len(acceptance)
    value = np.full((max_nodes + 1, max_levels + 1, width + 1), -np.inf)
    split = np.zeros(value.shape, dtype=np.int64)
    value[1, 1:, 0] = 1.0
    best = np.full((max_nodes + 1, max_levels + 1), -np.inf)
    best[1, 1:] = 1.0
    for m in range(2, max_nodes + 1):
        for l in range(2, max_levels + 1):
            for b in range(1, min(width, m - 1) + 1):
                # y = 1..m-1 nodes for the root and its first b - 1 children, m - y for child b.
                subtree = best[m - 1 : 0 : -1, l - 1]
                # A subtree that cannot exist stays impossible even when p_b = 0.
                gain = np.where(subtree > -np.inf, p[b] * np.nan_to_num(subtree, neginf=0.0), -np.inf)
                candidates = value[1:m, l, b - 1] + gain
                y = int(np.argmax(candidates))
                value[m, l, b], split[m, l, b] = candidates[y], y + 1
            best[m, l] = value[m, l].max()
    value.flags.writeable = split.flags.writeable = False
    return value, split


def tree_paths(value, split, nodes: int, levels: int, prefix: tuple[int, ...] = ()) -> list[tuple[int, ...]]:
    """The optimal tree of `nodes` nodes and at most `levels` levels as paths of sibling ranks
    (the root is `prefix`, not listed)."""
    children = int(np.argmax(value[nodes, levels]))
    sizes, m = [], nodes
    for b in range(children, 0, -1):  # peel the last child off, then the one before...
        y = int(split[m, levels, b])
        sizes.insert(0, m - y)
        m = y
    paths = []
    for rank, size in enumerate(sizes):
        path = prefix + (rank,)
        paths += [path, *tree_paths(value, split, size, levels - 1, path)]
    return paths


@dataclass(frozen=True)
class Tree:
    paths: tuple[tuple[int, ...], ...]  # draft nodes (the root excluded), parents before children
    expected: float  # G: expected tokens per step
    seconds: float  # predicted seconds per step: verification and drafting

    @property
    def depth(self) -> int:
        return max(map(len, self.paths), default=0)

    def describe(self) -> str:
        return (f"{len(self.paths)}-node tree of depth {self.depth}, {self.expected:.2f} tokens per step "
                f"expected, {self.expected / self.seconds:.3g} tokens/s predicted")


def drafting_seconds(paths, draft_curve: dict[int, float]) -> float:
    """The drafter's forwards for a tree: one over the committed text (priced at one row), then one
    per level over that level's nodes with children."""
    if not paths:
        return 0.0
    expanded = {path[:-1] for path in paths if len(path) > 1}
    widths = [sum(len(path) == level for path in expanded) for level in range(1, max(map(len, paths)))]
    return interpolate(draft_curve, 1) + sum(interpolate(draft_curve, w) for w in widths)


def hardware_aware(acceptance: list[float], target_curve: dict[int, float], draft_curve: dict[int, float],
                   max_nodes: int = MAX_NODES, max_levels: int = MAX_LEVELS) -> Tree:
    """The tree of most expected tokens per second among sizes n the target curve measured (n <= max_nodes)
    and depths up to max_levels - 1; `target_curve[n]`, `draft_curve[w]`: seconds of a forward over n (w) tokens.
    As in the paper's optimiser the choice is among trees (at least one drafted node), even where plain
    decoding would be faster; whether to draft at all is the cost-aware policy's call."""
    value, split = optimal_values(tuple(acceptance), max_nodes, max_levels)
    best = Tree((), 1.0, target_curve[min(target_curve)])  # only if the curve measured no width above 1
    for nodes in sorted(n for n in target_curve if 1 < n <= max_nodes):
        for levels in range(2, max_levels + 1):
            expected = float(value[nodes, levels].max())
            paths = tuple(tree_paths(value, split, nodes, levels))
            tree = Tree(paths, expected, target_curve[nodes] + drafting_seconds(paths, draft_curve))
            if not best.paths or tree.expected / tree.seconds > best.expected / best.seconds:
                best = tree
    return best


def measure_acceptance(target, draft_model, sampling: Sampling, verifier, prompts: list[list[int]],
                       width: int = MAX_BRANCH, tokens: int = MEASURE_TOKENS, draws: int = MEASURE_DRAWS) -> list[float]:
    """p_1..p_width: how often the verification keeps a node's k-th drafted child, over the
    target's own continuations of `prompts` (sampled under `sampling`), `draws` drafts per position
    when sampling (a greedy draft is always the same)."""
    from specatlas.impls.engine.decoding import SpeculativeDecoder

    kept = [0] * (width + 1)  # the last: no child kept
    with torch.inference_mode():
        for i, prompt in enumerate(prompts):
            text = prompt + SpeculativeDecoder(target).generate(prompt, tokens, sampling, Randomness(i)).tokens
            scored = [kv.forward(model, kv.new_cache(model), text[:-1]).logits[len(prompt) - 1 :]
                      for model in (target, draft_model)]
            for row, (p_row, q_row) in enumerate(zip(*scored)):
                position = len(prompt) + row
                for draw in range(1 if sampling.greedy else draws):
                    rng = Randomness(draw * len(prompts) + i)
                    drawn = ModelDrafter._children(q_row, width, sampling, rng, (position, "draft", 0))
                    draft = Draft([token for token, _ in drawn], [-1] * len(drawn),
                                  None if sampling.greedy else torch.stack([q for _, q in drawn]))
                    # The children's own rows only decide the token after a kept child, not counted here.
                    accepted, _ = verifier.verify(draft, p_row.expand(len(drawn) + 1, -1), sampling, rng, position)
                    kept[accepted[0] if accepted else width] += 1
    return [count / sum(kept) for count in kept[:width]]


def model_fingerprint(model) -> list:
    """What a model's acceptance depends on: its name, shape, dtype and a checksum of its weights."""
    config = model.config
    name = str(config._name_or_path).rstrip("/").rsplit("/", 1)[-1].lower()
    with torch.no_grad():
        checksum = sum(float(parameter.double().sum()) for parameter in model.parameters())
    return [name, config.num_hidden_layers, config.hidden_size, config.vocab_size, str(model.dtype), f"{checksum:.6g}"]


def acceptance_file(target, draft_model, sampling: Sampling, width: int = MAX_BRANCH) -> tuple[list, str]:
    """(identity, file name) of a measured acceptance vector."""
    identity = [model_fingerprint(target), model_fingerprint(draft_model), sampling.describe(), width,
                MEASURE_PROMPTS, MEASURE_TOKENS, MEASURE_DRAWS]
    return identity, f"{hashlib.sha256(json.dumps(identity).encode()).hexdigest()[:16]}.json"


def _cached_vector(path: Path, width: int) -> list[float] | None:
    """The vector stored in `path` (JSON, never code), or None if it is not `width` probabilities summing to <= 1."""
    try:
        vector = read_json(path, CACHE_BYTES)["acceptance"]
    except (ReadError, KeyError, TypeError):
        return None
    valid = (isinstance(vector, list) and len(vector) == width and all(isinstance(x, float) and 0 <= x <= 1 for x in vector)
             and sum(vector) <= 1 + 1e-9)
    return vector if valid else None


def acceptance_vector(target, draft_model, sampling: Sampling, verifier, width: int = MAX_BRANCH) -> list[float]:
    """The measured vector for this target, drafter and sampling, from the user cache or measured now."""
    from specatlas.impls.drafters.self_drafting.layer_skip import calibration_prompts
    from specatlas.impls.engine.models import cache_root

    identity, file = acceptance_file(target, draft_model, sampling, width)
    path = cache_root() / "sequoia" / file
    if path.is_file():
        vector = _cached_vector(path, width)
        if vector is not None:
            return vector
        print(f"Sequoia: ignoring the unreadable acceptance vector {path}", file=sys.stderr)
    print(f"Sequoia: measuring the acceptance vector ({sampling.describe()}, once for this target and drafter; "
          f"cached in {path.parent})", file=sys.stderr)
    prompts = calibration_prompts(target, MEASURE_PROMPTS, "Sequoia's acceptance vector")
    vector = measure_acceptance(target, draft_model, sampling, verifier, prompts, width)
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = path.with_suffix(f".{os.getpid()}.tmp")
    staging.write_text(json.dumps({"identity": identity, "acceptance": vector}))
    staging.replace(path)
    return vector


class SequoiaDrafter(ModelDrafter):
    """The draft model filling Sequoia's tree: node (.., k) is the k-th ranked token (greedy) or the
    k-th drawn without replacement from the drafter's distribution. The tree is chosen on the first
    draft under each sampling (its acceptance vector depends on it): `hardware_aware` on the
    measured vector and the target's and drafter's cost curves, at most `max_levels` levels."""

    def __init__(self, target, model, verifier, label: str = "draft model", max_levels: int = MAX_LEVELS):
        super().__init__(model, label=label)
        self.target, self.verifier, self.max_levels = target, verifier, max_levels
        self.trees: dict[Sampling, Tree] = {}
        self.chosen: Tree | None = None

    def choose_tree(self, sampling: Sampling) -> Tree:
        if sampling not in self.trees:
            acceptance = acceptance_vector(self.target, self.model, sampling, self.verifier)
            self.trees[sampling] = hardware_aware(acceptance, calibrate(self.target, MAX_NODES),
                                                  calibrate(self.model, MAX_NODES), MAX_NODES, self.max_levels)
        return self.trees[sampling]

    def nodes(self, depth: int) -> int:
        """Draft nodes within `depth` levels of the chosen tree (before any: the largest budget)."""
        if self.chosen is None:
            return MAX_NODES - 1
        return sum(len(path) <= depth for path in self.chosen.paths)

    def propose(self, context, depth, sampling, rng):
        self.chosen = self.choose_tree(sampling)
        self.tree = self.chosen.paths
        if not self.tree:  # the target's cost curve has no width above one token
            return Draft()
        return super().propose(context, depth, sampling, rng)

    def describe(self):
        chosen = f": {self.chosen.describe()}" if self.chosen else ""
        return f"Sequoia's hardware-aware tree on {self.label}{chosen}"
