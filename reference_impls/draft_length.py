"""How many tokens to draft: a fixed k, or the k that maximises expected tokens per unit time.

On small models and CPUs verifying k tokens is far from free (a forward over 8 new tokens costs
~1.9x a one-token step on SmolLM2-135M in float32), so a fixed k loses to plain decoding wherever
drafts are poor. `CostAware` picks k = argmax E[tokens](k) / E[seconds](k), with k = 0 a plain
decoding step. (An engineering policy of this project, not a paper's method.)

- Verification cost: the *shape* of the cost curve, c(n) / c(1) for a forward over n tokens, is
  measured once per model (`calibrate`); its *scale*, the seconds of one step, is followed online
  from every verification, whatever its width. Load on the machine changes the scale of all
  widths alike, so an estimate cannot go stale for a width the policy has stopped choosing.
- Drafting cost: seconds per drafted level, set by the first draft and then followed online (a
  draft model costs a forward per level; copying from text costs next to nothing).
- Acceptance: per draft position, and per the draft's `key` when the drafter gives one (e.g. the
  length of the match a retrieval draft was copied from: a 4-token match predicts far better than
  a 1-token one). The loop asks `choose()` for a depth budget before drafting, and `trim()` cuts
  the proposed draft to the depth that pays for its key.
"""

from __future__ import annotations

import time

from specatlas.impls import kv


class FixedLength:
    def __init__(self, depth: int):
        self.depth = depth

    def choose(self) -> int:
        return self.depth

    def trim(self, draft):
        return draft

    def record(self, draft, accepted: int, draft_seconds: float, verify_seconds: float, width: int) -> None:
        pass

    def describe(self) -> str:
        return f"fixed draft length {self.depth}"


class _Acceptance:
    """Decayed counts of (accepted, reached) per draft position 1..max_depth, for one key."""

    def __init__(self, max_depth: int):
        self.accepted = [0.0] * (max_depth + 1)
        self.reached = [0.0] * (max_depth + 1)
        self.age = 0  # steps since these counts were last decayed


class CostAware:
    """`nodes(k)`: draft nodes a depth-k draft is expected to have (k for a chain, more for a tree);
    `relative_cost[n]`: c(n) / c(1), measured by `calibrate`."""

    def __init__(self, max_depth: int, relative_cost: dict[int, float], nodes=lambda k: k,
                 prior_acceptance: float = 0.5, prior_weight: float = 1.0, memory: float = 0.96,
                 idle_memory: float = 0.998):
        self.max_depth, self.nodes = max_depth, nodes
        self.relative = dict(relative_cost)
        self.step_seconds: float | None = None  # c(1), followed online
        self.level_seconds: float | None = None  # drafting cost per level, followed online
        self.prior_acceptance, self.prior_weight = prior_acceptance, prior_weight
        # Counts decay by `memory` per observation of their key (about 25 drafts of evidence: a
        # weak prior and a long memory, because a verification a little wider than a plain step
        # costs little, so a 10% acceptance estimate that is really 0% would keep a drafter going),
        # and by `idle_memory` per step otherwise: estimates drift back to the prior while a key
        # is not drafted, so a policy that stopped drafting probes again, but seldom.
        self.memory, self.idle_memory = memory, idle_memory
        self.keys: dict[object, _Acceptance] = {}
        self.step = 0

    # -- the model of a step ------------------------------------------------------------------
    def ratio(self, width: int) -> float:
        """c(width) / c(1), interpolated between measured widths, proportional beyond them."""
        if width in self.relative:
            return self.relative[width]
        below = max((n for n in self.relative if n < width), default=min(self.relative))
        above = min((n for n in self.relative if n > width), default=None)
        if above is None:
            return self.relative[below] * width / below
        share = (width - below) / (above - below)
        return self.relative[below] + share * (self.relative[above] - self.relative[below])

    def acceptances(self, key) -> list[float]:
        """Estimated acceptance at draft positions 1..max_depth (index 0 unused). A position's prior
        is the estimate of the position before it (the first one's: `prior_acceptance`), so
        positions never reached yet look as good as the deepest one tried: the policy explores
        deeper while drafts keep being accepted, and not when they are not."""
        counts = self.keys.get(key)
        factor = self.idle_memory ** (self.step - counts.age) if counts else 0.0  # idle decay, lazily
        estimates, prior = [0.0], self.prior_acceptance
        for position in range(1, self.max_depth + 1):
            accepted, reached = (counts.accepted[position] * factor, counts.reached[position] * factor) if counts else (0, 0)
            prior = (accepted + self.prior_weight * prior) / (reached + self.prior_weight)
            estimates.append(prior)
        return estimates

    def _best_depth(self, key, widths) -> int:
        """argmax over depth d of E[tokens](d) / E[seconds](d); `widths(d)`: verification width."""
        step = self.step_seconds or 1.0
        level = self.level_seconds or 0.0
        best_depth, best_rate, expected, survive = 0, 1.0 / step, 1.0, 1.0
        acceptance = self.acceptances(key)
        for depth in range(1, self.max_depth + 1):
            width = widths(depth)
            if width is None:
                break
            survive *= acceptance[depth]
            expected += survive
            rate = expected / (step * self.ratio(width) + depth * level)
            if rate > best_rate:
                best_depth, best_rate = depth, rate
        return best_depth

    # -- the loop's calls ---------------------------------------------------------------------
    def choose(self) -> int:
        """The depth budget for the drafter: the best depth for any key seen so far (or for a
        new one), since the key of the coming draft is not known yet."""
        widths = lambda depth: 1 + self.nodes(depth)  # noqa: E731
        keys = list(self.keys) or [None]
        if any(key is not None for key in keys):
            keys.append(object())  # a drafter that keys its drafts may come up with a new key
        return max(self._best_depth(key, widths) for key in keys)

    def trim(self, draft):
        """The draft cut to the depth that pays for its key, priced at its actual widths."""
        if draft.auxiliary or not draft.tokens:  # auxiliary rows (a Jacobi window) are not cut
            return draft
        node_depths = kv.depths(draft.parents)
        deepest = max(node_depths)

        def widths(depth):
            return None if depth > deepest else 1 + sum(d <= depth for d in node_depths)

        keep = self._best_depth(draft.key, widths)
        if not keep and self.evidence(draft.key) < 0.5:
            keep = 1  # a probe: without it a key the prior prices out would never be tried
        return draft.cut(keep) if keep < deepest else draft

    def evidence(self, key) -> float:
        """Decayed number of drafts of `key` that reached position 1."""
        counts = self.keys.get(key)
        return counts.reached[1] * self.idle_memory ** (self.step - counts.age) if counts else 0.0

    def record(self, draft, accepted: int, draft_seconds: float, verify_seconds: float, width: int) -> None:
        self.step += 1
        observed = verify_seconds / self.ratio(width)
        self.step_seconds = observed if self.step_seconds is None else 0.8 * self.step_seconds + 0.2 * observed
        if not draft.depth:
            return
        per_level = draft_seconds / draft.depth
        self.level_seconds = per_level if self.level_seconds is None else 0.8 * self.level_seconds + 0.2 * per_level
        counts = self.keys.get(draft.key)
        if counts is None:
            counts = self.keys[draft.key] = _Acceptance(self.max_depth)
        factor = self.memory * self.idle_memory ** (self.step - 1 - counts.age)
        counts.age = self.step
        for position in range(1, self.max_depth + 1):
            counts.accepted[position] *= factor
            counts.reached[position] *= factor
        for position in range(1, min(draft.depth, accepted + 1, self.max_depth) + 1):
            counts.reached[position] += 1
            counts.accepted[position] += position <= accepted

    def describe(self):
        return f"cost-aware draft length (0..{self.max_depth})"


_calibrations: dict[tuple, dict[int, float]] = {}


CALIBRATED_WIDTHS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128)


def calibrate(model, widths: range, context: int = 64, rounds: int = 3) -> dict[int, float]:
    """Seconds of a target forward over n new tokens after `context` cached ones, for a spread of
    n in `widths` (interpolated between). Measured once per model per process; the widths are
    interleaved within each round so a burst of load on the machine hits them alike."""
    import torch

    widths = [n for n in CALIBRATED_WIDTHS if widths[0] <= n < widths[-1]] + [widths[-1]]
    key = (id(model), tuple(widths))
    if key not in _calibrations:
        cache = kv.new_cache(model)
        runs: dict[int, list[float]] = {width: [] for width in widths}
        with torch.inference_mode():
            kv.forward(model, cache, [0] * context, last_only=True)
            for _ in range(rounds):
                for width in widths:
                    start = time.perf_counter()
                    kv.forward(model, cache, [0] * width)
                    runs[width].append(time.perf_counter() - start)
                    kv.truncate(cache, context)
        seconds = {width: min(times) for width, times in runs.items()}
        # Cost cannot fall with width: a suffix minimum removes spikes from a busy machine.
        ordered = sorted(seconds)
        for smaller, larger in zip(reversed(ordered[:-1]), reversed(ordered[1:])):
            seconds[smaller] = min(seconds[smaller], seconds[larger])
        _calibrations[key] = seconds
    return _calibrations[key]


def relative(seconds: dict[int, float]) -> dict[int, float]:
    """A cost curve as multiples of a one-token step."""
    base = seconds[min(seconds)]
    return {width: value / base for width, value in seconds.items()}
