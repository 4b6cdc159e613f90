"""Self-speculation by layer skipping: Draft & Verify (Zhang et al. 2024) and SWIFT (Xia et al. 2025).

Both draft with the target itself minus a set of skipped decoder layers (a `LayerView` in a
scratch of the target's own cache, `drafting.TargetLayers`: no second model, cache or prefill),
stop drafting after a token whose confidence (the draft's probability of the token it drafted,
before temperature, as both codes compute it) is below a threshold, and let the full target
verify. They differ in how the skipped set is found:

- Draft & Verify searches it once per model, before decoding, by Bayesian optimisation of
  decoding speed on calibration prompts (`search_skipped`), and adapts the exit threshold online
  (`ExitThreshold`) so the acceptance rate stays near its target.
- SWIFT searches it during decoding (`Swift`): before each draft, while optimising, it scores one
  candidate set by how well the skipped model re-drafts the first tokens it generated, and keeps
  the best; drafts are verified as a tree of the draft's top candidates at each depth, more of
  them where the draft was less confident.

Both papers skip attention and MLP sub-layers independently; a `LayerView` runs whole decoder
layers, so here skipping a layer skips both (one bit per layer instead of two).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from dataclasses import dataclass

import numpy as np
import torch

from specatlas.fsutil import CACHE_BYTES, ReadError, read_json
from specatlas.impls.engine import kv
from specatlas.impls.drafters.self_drafting.bayes import GaussianProcess
from specatlas.impls.engine.head_folders import SHIPPED_HEADS
from specatlas.impls.engine.decoding import SpeculativeDecoder
from specatlas.impls.engine.drafting import Draft, Drafter, ModelDrafter, TargetLayers
from specatlas.impls.engine.layer_view import LayerView
from specatlas.impls.engine.models import cache_root, encode_chat
from specatlas.impls.engine.sampling import without
from specatlas.impls.registry import METHODS
from specatlas.train_prompts import PROMPTS

# Draft & Verify's adaptive draft-exiting (its code's `auto_parameters` = [1, 0.5, 0.9, 1e-2, 0.9]):
# after every verification the acceptance rate is smoothed with β1 = 0.5; below the target 0.9 the
# threshold goal rises by ε = 0.01 (draft less), above it falls by ε (draft more) unless the draft
# already reached its maximum length; the threshold follows the goal with β2 = 0.9.
BETA1, TARGET_RATE, EPSILON, BETA2 = 0.5, 0.9, 1e-2, 0.9


@dataclass
class ExitThreshold:
    """Stop drafting after a token whose confidence is below `value`; `adaptive`: Draft & Verify's rule."""

    value: float
    adaptive: bool = False
    rate: float = 0.0  # the smoothed acceptance rate (the code starts it at 0)

    def update(self, drafted: int, accepted: int, reached_max: bool) -> None:
        if not self.adaptive or not drafted:
            return
        self.rate = BETA1 * self.rate + (1 - BETA1) * accepted / drafted
        if self.rate < TARGET_RATE:
            goal = self.value + EPSILON
        else:
            goal = self.value if reached_max else self.value - EPSILON
        self.value = BETA2 * self.value + (1 - BETA2) * goal


def kept_layers(model, skipped) -> list[int]:
    skipped = set(skipped)
    return [layer for layer in range(model.config.num_hidden_layers) if layer not in skipped]


class LayerSkip(Drafter):
    """Drafts with the target minus `skipped` layers on its own cache, one view forward per depth,
    until the confidence falls below `threshold` or the depth budget is spent. `candidates`
    (SWIFT): how many of the draft's top tokens to verify at a depth, from the confidence there;
    the first drawn continues the chain and the others are leaves. None: a chain."""

    def __init__(self, model, skipped, threshold: ExitThreshold, candidates=None):
        self.model, self.threshold, self.candidates = model, threshold, candidates
        self.target, self.asked = None, 0
        self.skip(skipped)

    def skip(self, skipped) -> None:
        self.skipped = sorted(set(skipped))
        self.view = LayerView(self.model, kept_layers(self.model, self.skipped))

    def start(self, prompt, prefill):
        self.target = prefill.target

    def propose(self, context, depth, sampling, rng):
        draft, parent, feed = Draft(q=None if sampling.greedy else []), -1, context[-1]
        with self.target.scratch() as scratch:  # the view's rows of skipped-layer inputs must not stay
            for level in range(depth):
                logits = scratch.forward(self.view, [feed], last_only=True).logits[-1]
                key = (len(context) + level, "draft", 0)
                drawn = ModelDrafter._children(logits, 1, sampling, rng, key)
                confidence = float(logits.softmax(-1)[drawn[0][0]])
                if self.candidates:
                    drawn += self._siblings(logits, drawn[0][0], self.candidates(confidence, sampling.greedy), sampling, rng, key)
                chain = len(draft.tokens)
                for token, q in drawn:
                    draft.tokens.append(token)
                    draft.parents.append(parent)
                    if q is not None:
                        draft.q.append(q)
                parent, feed = chain, drawn[0][0]
                if confidence < self.threshold.value:
                    break
        self.asked = depth
        if draft.q is not None:
            draft.q = torch.stack(draft.q) if draft.q else None
        return draft

    @staticmethod
    def _siblings(logits, first, width, sampling, rng, key):
        """Siblings 1..width-1 of the token drawn first: the next best, or drawn without replacement."""
        if sampling.greedy:
            return [(int(t), None) for t in logits.topk(width).indices if int(t) != first][: width - 1]
        q, drawn = sampling.probs(logits), [first]
        for sibling in range(1, min(width, int((q > 0).sum()))):
            drawn.append(rng.categorical(without(q, drawn), *key, sibling))
        return [(token, q) for token in drawn[1:]]

    def observe(self, step):
        depth = step.draft.depth
        self.threshold.update(depth, len(step.accepted), depth >= self.asked)

    def describe(self):
        kept = len(self.view.layers)
        return f"the target skipping layers {self.skipped} ({kept} of {kept + len(self.skipped)} layers, shared cache)"


def replay(target: TargetLayers, view, start: int, tokens: list[int], own_rows: bool) -> torch.Tensor:
    """The view's logits after each of `tokens`, the text's tokens at positions start, start+1, ...,
    run as new rows of one forward in a scratch of `target`'s cache. Each row sees the target's
    cached rows before `start` and, with `own_rows`, the view's own rows of the earlier tokens (a
    draft of the whole span, SWIFT's parallel drafting); else the target's cached rows of every
    earlier position (at each position, the first draft token self-speculation would make there)."""
    with target.scratch() as scratch:
        span = scratch.committed - start  # cached rows after `start`, a chain: node j is position start + j
        tree = list(range(-1, span - 1))
        tree += [-1] + [span + i for i in range(len(tokens) - 1)] if own_rows else [i - 1 for i in range(len(tokens))]
        return scratch.forward(view, tokens, tree=tree).logits


# SWIFT's defaults (its released evaluation script, eval_llama.sh): context window 50, skip ratio
# 0.45 of the layers between the first and the last, an optimisation step after every decoding
# step, a Bayesian suggestion every 25th (else a random set), stop at matchness 0.93, after 300
# steps without improvement or after 1000; drafting stops below confidence 0.8 (at most 25
# tokens); verify the top 3/5/8/10 tokens at a depth drafted with confidence >0.95/>0.8/>0.5/less
# (1/3/5/10 when sampling). UCB κ = 2.5.
# The paper's numbers are its definition's (`registry.py`).
_SWIFT = METHODS["xia2025swift"].paper
SWIFT_WINDOW, SWIFT_SKIP_RATIO, SWIFT_BAYES_EVERY = _SWIFT.window, _SWIFT.skip_ratio, _SWIFT.bayes_every
SWIFT_MAX_SCORE, SWIFT_TOLERANCE, SWIFT_MAX_ITERATIONS = _SWIFT.max_score, _SWIFT.tolerance, _SWIFT.max_iterations
SWIFT_STOP, SWIFT_MAX_DRAFT, SWIFT_KAPPA = _SWIFT.stop, _SWIFT.max_draft, 2.5
SWIFT_CANDIDATES = {True: _SWIFT.candidates, False: (1, 3, 5, 10)}  # by greedy


def swift_candidates(confidence: float, greedy: bool) -> int:
    sizes = SWIFT_CANDIDATES[greedy]
    return sizes[0] if confidence > 0.95 else sizes[1] if confidence > 0.8 else sizes[2] if confidence > 0.5 else sizes[3]


class Swift(LayerSkip):
    """SWIFT: layer skipping whose skipped set is optimised on the fly (see the module doc). The
    optimisation state lives as long as the drafter, across generations (the code's input stream)."""

    def __init__(self, model, window: int = SWIFT_WINDOW, seed: int = 1):
        total = model.config.num_hidden_layers
        self.middle = list(range(1, total - 1))  # the first and last layers are always kept
        self.count = int(len(self.middle) * SWIFT_SKIP_RATIO)
        super().__init__(model, self.middle[::2], ExitThreshold(SWIFT_STOP), swift_candidates)  # every other layer
        self.window, self.random = window, np.random.default_rng(seed)
        self.gp, self.best_score, self.iterations, self.idle, self.optimising = GaussianProcess(), 0.0, 0, 0, True
        self.prompt_length = 0

    def start(self, prompt, prefill):
        super().start(prompt, prefill)
        self.prompt_length = len(prompt)

    def propose(self, context, depth, sampling, rng):
        # The code optimises after each verification, right before the next draft (its
        # `swift_forward`; its last one of a generation feeds a draft never verified): here at the
        # start of each draft, so its cost is drafting's and a step the cost-aware policy makes
        # plain (no draft asked for) runs neither.
        if self.optimising and len(context) - self.prompt_length > self.window + 1:
            self._optimise(context)
        return super().propose(context, depth, sampling, rng)

    def _optimise(self, text):
        """One optimisation step: score a candidate set by its matchness on the context window."""
        self.iterations += 1
        candidate = self._suggest() if self.iterations % SWIFT_BAYES_EVERY == 0 else self._random()
        window = list(text[self.prompt_length : self.prompt_length + self.window + 1])
        view = LayerView(self.model, kept_layers(self.model, candidate))
        logits = replay(self.target, view, self.prompt_length, window, own_rows=True)
        score = float((logits[:-1].argmax(-1).cpu() == torch.tensor(window[1:])).double().mean())
        self.gp.register(self._bits(candidate), score)
        if score > self.best_score:
            self.best_score, self.idle = score, 0
            self.skip(candidate)
            self.optimising = score <= SWIFT_MAX_SCORE
        else:
            self.idle += 1
        if self.idle > SWIFT_TOLERANCE or self.iterations > SWIFT_MAX_ITERATIONS:
            self.optimising = False

    def describe(self):
        return f"{super().describe()}, optimised on the fly ({'searching' if self.optimising else 'settled'})"

    def _bits(self, skipped) -> np.ndarray:
        return np.isin(self.middle, list(skipped)).astype(float)

    def _random(self) -> list[int]:
        return sorted(int(layer) for layer in self.random.choice(self.middle, self.count, replace=False))

    def _suggest(self) -> list[int]:
        """The Bayesian step: among random sets of the right size, the one with the best upper
        confidence bound (the code keeps the top-scoring coordinates of the UCB maximiser)."""
        pool = np.stack([self._bits(self._random()) for _ in range(256)])
        bits = self.gp.suggest(pool, SWIFT_KAPPA)
        return [layer for layer, bit in zip(self.middle, bits) if bit]


# Draft & Verify's search (its search.ipynb): 8 calibration prompts (CNN/DM and XSum one-shot
# summaries), 32 new tokens each, 1000 iterations of Bayesian optimisation (GP noise 1e-2, UCB κ
# 2.576, bayes_opt's default) of the measured decoding speed. On a CPU the search is cut to
# `DV_ITERATIONS_CPU` iterations on 2 of this project's own training prompts (a labelled variant).
# Timing 1000 decodes is out of reach there and timings on a shared CPU are noise, so the objective
# is computed instead: tokens per target-forward equivalent of the method's greedy loop replayed on
# the target's own text (a verification costs 1, a draft forward the share of the weights the view
# reads, as in memory-bound decoding), each draft token taken as the view's first draft after its
# position (`replay`: one forward per prompt and candidate).
# Decoding (its evaluate_sum.ipynb): at most 12 draft tokens, adaptive threshold starting at 0.6.
# The numbers stated in its settings are its definition's (`registry.py`).
_DV = METHODS["zhang2024draft"].paper
DV_ITERATIONS, DV_ITERATIONS_CPU, DV_INIT_POINTS, DV_KAPPA = _DV.iterations, _DV.iterations_cpu, 5, 2.576
DV_PROMPTS, DV_PROMPTS_CPU, DV_TOKENS = _DV.prompts, _DV.prompts_cpu, _DV.tokens
DV_MAX_DRAFT, DV_THRESHOLD = _DV.max_draft, _DV.threshold


def simulated_speed(matches: list[bool], confidence: list[float], view_cost: float, threshold: ExitThreshold) -> tuple[int, float]:
    """(tokens, cost) of Draft & Verify's greedy loop on a text whose draft at each position is
    right (`matches`) with `confidence`, costing a verification 1 and a draft forward `view_cost`."""
    done, cost = 0, 0.0
    while done < len(matches):
        drafted = accepted = 0
        right = True
        while drafted < min(DV_MAX_DRAFT, len(matches) - done - 1):
            position = done + drafted
            drafted += 1
            right = right and matches[position]
            accepted += right
            if confidence[position] < threshold.value:
                break
        threshold.update(drafted, accepted, drafted == DV_MAX_DRAFT)
        done, cost = done + accepted + 1, cost + 1 + drafted * view_cost
    return len(matches), cost


def view_cost(model, kept: int) -> float:
    """A draft forward's cost relative to the target's: the share of the weights it reads."""
    layer = sum(p.numel() for p in model.model.layers[0].parameters())
    head = model.lm_head.weight.numel()
    return (kept * layer + head) / (model.config.num_hidden_layers * layer + head)


def search_skipped(model, prompts: list[list[int]], iterations: int, seed: int = 1) -> tuple[list[int], float]:
    """Draft & Verify's Bayesian search for the skipped layers: (skipped, tokens per target forward)."""
    texts, targets = [], []
    with torch.inference_mode():
        for prompt in prompts:
            text = prompt + SpeculativeDecoder(model).generate(prompt, DV_TOKENS).tokens
            cache = kv.new_cache(model)
            kv.forward(model, cache, text[:-1], last_only=True)
            texts.append((len(prompt), text))
            targets.append(TargetLayers(model, cache))

    total = model.config.num_hidden_layers

    def speed(bits: np.ndarray) -> float:
        view = LayerView(model, [layer for layer in range(total) if not bits[layer]])
        tokens = cost = 0.0
        with torch.inference_mode():
            for (length, text), target in zip(texts, targets):
                logits = replay(target, view, length - 1, text[length - 1 : -1], own_rows=False)
                probs = logits.softmax(-1).max(-1)
                matches = (probs.indices.cpu() == torch.tensor(text[length:])).tolist()
                done, spent = simulated_speed(matches, probs.values.tolist(), view_cost(model, len(view.layers)),
                                              ExitThreshold(DV_THRESHOLD, adaptive=True))
                tokens, cost = tokens + done, cost + spent
        return tokens / cost

    random, gp = np.random.default_rng(seed), GaussianProcess()

    def sample(count: int) -> np.ndarray:
        """Random skip masks at random skip ratios, never skipping every layer."""
        bits = random.random((count, total)) < random.random((count, 1))
        bits[bits.all(1), 0] = False
        return bits.astype(float)

    for bits in sample(DV_INIT_POINTS):
        gp.register(bits, speed(bits))
    for _ in range(max(iterations - DV_INIT_POINTS, 0)):
        best, _ = gp.best()
        flips = np.abs(np.eye(total) - best)  # every one-layer change of the best so far
        pool = np.concatenate([sample(256), flips[~flips.all(1)]])
        bits = gp.suggest(pool, DV_KAPPA)
        gp.register(bits, speed(bits))
    best, score = gp.best()
    return [layer for layer in range(total) if best[layer]], score


def calibration_prompts(model, count: int, purpose: str = "Draft & Verify's layer search") -> list[list[int]]:
    """`count` of this project's training prompts, spread over its tasks, in the model's chat template
    (for `purpose`, named when the model has no tokenizer)."""
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(model.config._name_or_path, local_files_only=True,
                                                  trust_remote_code=False)
    except (OSError, ValueError) as exc:
        raise ValueError(f"{purpose} needs the model's tokenizer") from exc
    stride = len(PROMPTS) // count
    return [encode_chat(tokenizer, PROMPTS[i * stride]) for i in range(count)]


# Search results shipped with the package (the embedded model's), looked up before the user cache;
# `specatlas run draft-and-verify` on a fresh cache writes the file to copy here.
SHIPPED_SEARCHES = SHIPPED_HEADS / "draft-and-verify"


def search_budget(model) -> tuple[int, int]:
    """(iterations, calibration prompts) of Draft & Verify's search for `model`'s device."""
    return (DV_ITERATIONS_CPU, DV_PROMPTS_CPU) if model.device.type == "cpu" else (DV_ITERATIONS, DV_PROMPTS)


def search_identity(model) -> tuple[str, str]:
    """(identity, file name) of `model`'s layer search: what its result depends on, and its hash."""
    config = model.config
    # The model's folder name, not its path, so that a search shipped for the embedded model matches.
    name = str(config._name_or_path).rstrip("/").rsplit("/", 1)[-1].lower()
    identity = json.dumps([name, config.num_hidden_layers, config.hidden_size, config.vocab_size,
                           str(model.dtype), *search_budget(model), DV_TOKENS])
    return identity, f"{hashlib.sha256(identity.encode()).hexdigest()[:16]}.json"


def _cached_search(path: Path, layers: int) -> list[int] | None:
    """The skipped layers a search stored in `path` (JSON, never code), or None if they are not a
    list of distinct layer indices of this model."""
    try:
        skipped = read_json(path, CACHE_BYTES)["skipped"]
    except (ReadError, KeyError, TypeError):
        return None
    valid = (isinstance(skipped, list) and len(set(skipped)) == len(skipped) < layers
             and all(type(layer) is int and 0 <= layer < layers for layer in skipped))
    return skipped if valid else None


def skipped_layers(model) -> list[int]:
    """The skipped set for `model`, searched once per model identity and cached in the user cache."""
    iterations, prompts = search_budget(model)
    identity, file = search_identity(model)
    for folder in (SHIPPED_SEARCHES, cache_root() / "draft-and-verify"):
        if (folder / file).is_file():
            skipped = _cached_search(folder / file, model.config.num_hidden_layers)
            if skipped is not None:
                return skipped
            print(f"Draft & Verify: ignoring the unreadable search result {folder / file}", file=sys.stderr)
    path = cache_root() / "draft-and-verify" / file
    print(f"Draft & Verify: searching which layers to skip ({iterations} iterations, once for this model; "
          f"cached in {path.parent})", file=sys.stderr)
    skipped, score = search_skipped(model, calibration_prompts(model, prompts), iterations)
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = path.with_suffix(f".{os.getpid()}.tmp")
    staging.write_text(json.dumps({"identity": json.loads(identity), "skipped": skipped,
                                   "tokens_per_target_forward": score}))
    staging.replace(path)
    return skipped
