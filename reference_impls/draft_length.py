"""How many tokens to draft: a fixed k, or the k that maximises expected tokens per unit time.

On small models and CPUs verifying k tokens is far from free (a forward over 8 new tokens costs
~1.8x a one-token step on SmolLM2-135M), so a fixed k loses to plain decoding wherever drafts are
poor. `CostAware` measures the cost c(n) of a target forward over n tokens, learns online how often
each draft position is accepted, and picks k = argmax E[tokens](k) / E[time](k), with k = 0 a
plain decoding step. (An engineering policy of this project, not a paper's method.)
"""

from __future__ import annotations

import time


class FixedLength:
    def __init__(self, depth: int):
        self.depth = depth

    def choose(self) -> int:
        return self.depth

    def record(self, depth: int, accepted: int, draft_seconds: float, verify_seconds: float, width: int) -> None:
        pass

    def describe(self) -> str:
        return f"fixed draft length {self.depth}"


class CostAware:
    """`nodes(k)`: how many draft nodes a depth-k draft has (k for a chain, more for a tree)."""

    def __init__(self, max_depth: int, forward_seconds: dict[int, float], nodes=lambda k: k,
                 prior_acceptance: float = 0.6, prior_weight: float = 2.0, memory: float = 0.9):
        self.max_depth, self.nodes = max_depth, nodes
        self.seconds = dict(forward_seconds)  # target forward time by number of input tokens
        self.prior = (prior_acceptance * prior_weight, prior_weight)
        # Per draft position j: decayed counts of (accepted, reached). Decay pulls estimates back
        # to the prior while we do not draft, so a policy that stopped drafting probes again later.
        self.accepted = [0.0] * (max_depth + 1)
        self.reached = [0.0] * (max_depth + 1)
        self.memory = memory
        self.draft_seconds_per_level = 0.0

    def acceptance(self, position: int) -> float:
        return (self.accepted[position] + self.prior[0]) / (self.reached[position] + self.prior[1])

    def cost(self, width: int) -> float:
        """Seconds of a target forward over `width` tokens, interpolated between measured widths."""
        if width in self.seconds:
            return self.seconds[width]
        below = max((n for n in self.seconds if n < width), default=min(self.seconds))
        above = min((n for n in self.seconds if n > width), default=None)
        if above is None:  # beyond the measurements: grow proportionally
            return self.seconds[below] * width / below
        share = (width - below) / (above - below)
        return self.seconds[below] + share * (self.seconds[above] - self.seconds[below])

    def choose(self) -> int:
        best_depth, best_rate, expected, survive = 0, 1.0 / self.cost(1), 1.0, 1.0
        for depth in range(1, self.max_depth + 1):
            survive *= self.acceptance(depth)
            expected += survive
            seconds = self.cost(1 + self.nodes(depth)) + depth * self.draft_seconds_per_level
            if expected / seconds > best_rate:
                best_depth, best_rate = depth, expected / seconds
        return best_depth

    def record(self, depth, accepted, draft_seconds, verify_seconds, width):
        for position in range(1, self.max_depth + 1):
            self.accepted[position] *= self.memory
            self.reached[position] *= self.memory
        for position in range(1, min(depth, accepted + 1) + 1):
            self.reached[position] += 1
            self.accepted[position] += position <= accepted
        self.seconds[width] = 0.8 * self.cost(width) + 0.2 * verify_seconds  # follow the machine's load
        if depth:
            per_level = draft_seconds / depth
            self.draft_seconds_per_level = 0.8 * self.draft_seconds_per_level + 0.2 * per_level

    def describe(self):
        return f"cost-aware draft length (0..{self.max_depth})"


_calibrations: dict[tuple, dict[int, float]] = {}


CALIBRATED_WIDTHS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)


def calibrate(model, widths: range, context: int = 64, repeats: int = 3) -> dict[int, float]:
    """Seconds of a target forward over n new tokens after `context` cached ones, for a spread of
    n in `widths` (CostAware interpolates between them). Measured once per model per process."""
    import torch

    from specatlas.impls import kv

    widths = [n for n in CALIBRATED_WIDTHS if widths[0] <= n < widths[-1]] + [widths[-1]]
    key = (id(model), tuple(widths))
    if key not in _calibrations:
        cache = kv.new_cache(model)
        with torch.inference_mode():
            kv.forward(model, cache, [0] * context, last_only=True)
            seconds = {}
            for width in widths:
                runs = []
                for _ in range(repeats):
                    start = time.perf_counter()
                    kv.forward(model, cache, [0] * width)
                    runs.append(time.perf_counter() - start)
                    kv.truncate(cache, context)
                seconds[width] = min(runs)
        # Cost cannot fall with width: a suffix minimum removes spikes from a busy machine.
        ordered = sorted(seconds)
        for smaller, larger in zip(reversed(ordered[:-1]), reversed(ordered[1:])):
            seconds[smaller] = min(seconds[smaller], seconds[larger])
        _calibrations[key] = seconds
    return _calibrations[key]
