"""How many tokens to draft: the paper's depth (the default), a fixed depth, or the cost-aware policy.

`DraftLengthPolicy` is the choice (`--draft-length paper|cost-aware|N`), parsed once; every
method's builder turns it into the per-step controller for its structure (`controller`):
`FixedLength` or `CostAware`.

On small models and CPUs verifying k tokens is far from free, so a fixed depth can lose to plain
decoding wherever drafts are poor. `CostAware` (an engineering policy of this project, not a
paper's method) drafts the depth d that maximises expected tokens per second:

    rate(d) = (1 + a1 + a1·a2 + ... + a1···ad) / (step · r(width(d)) + d · level)

a_k is the chance that draft position k is accepted once k-1 were, learnt per draft key (e.g.
the length of the match a retrieval draft was copied from) as (accepted_k + a_{k-1}) /
(reached_k + 1) with counts that fade by `MEMORY` per draft of the key, starting from a_0 = 1/2
(so an unreached position looks as good as the one before it: the policy explores deeper while
drafts keep being accepted). r(w) is the cost of a forward over w tokens after the step's
context relative to a one-token step after a short one, its shape measured once per model at a
few context lengths and interpolated between them (`calibrate_contexts`: attention over a long
context makes wide forwards dearer); `step`, the seconds of one step, and `level`, the seconds of
drafting one level, are followed online from every step, whatever its width, so load on the
machine rescales every width alike. d = 0 is a plain step. When the best depth is 0, a
depth-1 probe is made after `PROBE_EVERY` steps without a draft, so a drafter that stopped
paying is tried again, seldom. Before a key's first draft its widths are the structure's guess
(`nodes`); from then on `choose` prices the widths its drafts had (a tree may be wider than
guessed: SWIFT's widens where its drafter is unsure), as `trim` does, so a draft the policy
asks for is one it expects to keep, and a plain step asks the drafter for nothing.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

PRIOR, MEMORY, PROBE_EVERY = 0.5, 0.95, 32
MAX_DRAFT_LENGTH = 1024  # beyond any structure: a larger fixed depth is a typo
MAX_DEPTH = 8  # the cost-aware policy's deepest draft, where a method's structure sets no bound
PAPER, FIXED, COST_AWARE = "paper", "fixed", "cost-aware"
CHOICES = f"'{PAPER}', '{COST_AWARE}' or a positive integer (at most {MAX_DRAFT_LENGTH})"


@dataclass(frozen=True)
class DraftLengthPolicy:
    """How a method chooses its draft length. `name` is what `--draft-length`, the result files
    (`policy`) and the leaderboard call it: "paper" (the paper's draft length and structures: γ,
    tree, window, n-gram size), "fixed" (`depth` tokens on the paper's structure) or "cost-aware"
    (the depth that pays on this hardware, with structures sized for the device: a named
    engineering variant, not a paper's setting)."""

    name: str
    depth: int = 0  # a fixed policy's depth

    @classmethod
    def paper(cls) -> DraftLengthPolicy:
        return cls(PAPER)

    @classmethod
    def fixed(cls, depth: int) -> DraftLengthPolicy:
        return cls(FIXED, depth)

    @classmethod
    def cost_aware(cls) -> DraftLengthPolicy:
        return cls(COST_AWARE)

    @classmethod
    def parse(cls, text: str) -> DraftLengthPolicy:
        """`--draft-length`'s value; "auto" is the older spelling of "cost-aware". A ValueError
        with a one-line message on anything else."""
        if text == PAPER:
            return cls.paper()
        if text in (COST_AWARE, "auto"):
            return cls.cost_aware()
        if re.fullmatch(r"[0-9]{1,4}", text) and 1 <= int(text) <= MAX_DRAFT_LENGTH:
            return cls.fixed(int(text))
        raise ValueError(f"--draft-length must be {CHOICES}, got {text[:40]!r}")

    @property
    def is_cost_aware(self) -> bool:
        return self.name == COST_AWARE

    def controller(self, target, paper_depth: int, nodes=lambda d: d, max_depth: int = MAX_DEPTH,
                   source: str = "the paper's"):
        """The per-step draft length for a method's structure: `paper_depth` (its paper's, named by
        `source`), the fixed depth, or the cost-aware policy calibrated on `target` up to `max_depth`
        (the deepest draft the structure allows; `nodes(d)`: draft nodes at depth d)."""
        if self.name == PAPER:
            return FixedLength(paper_depth, source)
        if self.name == FIXED:
            return FixedLength(self.depth)
        return CostAware(max_depth, relative_by_context(calibrate_contexts(target, nodes(max_depth) + 1)), nodes)


class FixedLength:
    def __init__(self, depth: int, source: str | None = None):
        self.depth, self.source = depth, source

    def at(self, context: int) -> None:
        pass

    def choose(self) -> int:
        return self.depth

    def depth_for(self, key, budget: int) -> int:
        return budget

    def trim(self, draft):
        return draft

    def record(self, draft, accepted: int, draft_seconds: float, verify_seconds: float, width: int) -> None:
        pass

    def describe(self) -> str:
        return f"{self.source + ' ' if self.source else 'fixed '}draft length {self.depth}"


class CostAware:
    """`relative_cost[context][w]`: r(w) at measured contexts and widths
    (`relative_by_context(calibrate_contexts(...))`); `nodes(d)`: draft nodes a depth-d draft is
    expected to have (d for a chain, more for a tree). The decoder says each step's context (`at`)
    before choosing, trimming and recording it."""

    def __init__(self, max_depth: int, relative_cost: dict[int, dict[int, float]], nodes=lambda d: d):
        self.max_depth, self.relative, self.nodes = max_depth, dict(relative_cost), nodes
        self.context = min(self.relative)
        self.ratios: dict[int, float] = {}  # r(w) at `context`: every key and depth prices the same few widths
        self.step_seconds: float | None = None
        self.level_seconds = 0.0
        self.drafts = 0  # drafts recorded
        self.counts: dict[object, tuple[list[float], list[float]]] = {}  # key -> (accepted, reached) by position
        self.idle: dict[object, int] = {}  # key -> steps since a draft of it was verified
        self.node_counts: dict[object, list[float | None]] = {}  # key -> by depth d, nodes at depth <= d in its drafts
        self.plain = PROBE_EVERY  # steps since any draft was verified

    def at(self, context: int) -> None:
        """The coming step verifies after `context` tokens."""
        if context != self.context:
            self.context, self.ratios = context, {}

    def ratio(self, width: int) -> float:
        if width not in self.ratios:
            self.ratios[width] = price(self.relative, width, self.context)
        return self.ratios[width]

    def acceptances(self, key) -> list[float]:
        """a_1..a_max for `key` (index 0 holds the prior)."""
        accepted, reached = self.counts.get(key, (None, None))
        rates = [PRIOR]
        for position in range(1, self.max_depth + 1):
            seen = (accepted[position], reached[position]) if accepted else (0.0, 0.0)
            rates.append((seen[0] + rates[-1]) / (seen[1] + 1))
        return rates

    def _best_depth(self, key, width_of) -> int:
        step = self.step_seconds or 1.0
        rates = self.acceptances(key)
        best, best_rate, expected, survive = 0, 1.0 / (step * self.ratio(1)), 1.0, 1.0  # r(1) > 1 after a long context
        for depth in range(1, self.max_depth + 1):
            width = width_of(depth)
            if width is None:
                break
            survive *= rates[depth]
            expected += survive
            rate = expected / (step * self.ratio(width) + depth * self.level_seconds)
            if rate > best_rate:
                best, best_rate = depth, rate
        return best

    def expected_width(self, key, depth: int) -> float:
        """The width of a depth-`depth` draft of `key`: as its drafts had it (faded by `MEMORY`),
        else the structure's guess."""
        counts = self.node_counts.get(key)
        learnt = counts[depth] if counts and depth < len(counts) else None
        return 1 + (self.nodes(depth) if learnt is None else learnt)

    def choose(self) -> int:
        """A depth budget for the drafter: the best for any key seen, or for a new one (the coming
        draft's key is not known yet); a probe when none pays and nothing was drafted for long."""
        keys = list(self.counts)
        keys += [object()] if any(key is not None for key in self.counts) or not self.counts else []
        best = max((self._best_depth(key, lambda d, key=key: self.expected_width(key, d)) for key in keys), default=0)
        return best or int(self.plain >= PROBE_EVERY)

    def depth_for(self, key, budget: int) -> int:
        """Before drafting, for a drafter that knows its draft's key (SAM-Decoding's auxiliary
        drafter): the depth that pays for `key` at its expected widths, at most `budget`; 0, so
        nothing is drafted, unless a probe is due."""
        return min(budget, self._best_depth(key, lambda d: self.expected_width(key, d)) or self._probe(key))

    def trim(self, draft):
        """The draft cut to the depth that pays for its key, priced at its actual widths (which
        `choose` learns from here); a probe of depth 1 for a key idle for `PROBE_EVERY` steps (or
        never drafted)."""
        if draft.auxiliary or not draft.tokens:  # auxiliary rows (a Jacobi window) are not cut
            return draft
        node_depths = draft.node_depths()
        widths = {d: 1 + sum(x <= d for x in node_depths) for d in range(1, min(max(node_depths), self.max_depth) + 1)}
        counts = self.node_counts.setdefault(draft.key, [None] * (self.max_depth + 1))
        for depth, width in widths.items():
            counts[depth] = width - 1 if counts[depth] is None else MEMORY * counts[depth] + (1 - MEMORY) * (width - 1)
        return draft.cut(self._best_depth(draft.key, widths.get) or self._probe(draft.key))

    def _probe(self, key) -> int:
        """A probe of depth 1 for a key idle for `PROBE_EVERY` steps (or never drafted)."""
        return int(self.idle.get(key, PROBE_EVERY) >= PROBE_EVERY)

    def record(self, draft, accepted: int, draft_seconds: float, verify_seconds: float, width: int) -> None:
        observed = verify_seconds / self.ratio(width)
        self.step_seconds = observed if self.step_seconds is None else MEMORY * self.step_seconds + (1 - MEMORY) * observed
        self.plain += 1
        for key in self.idle:
            self.idle[key] += 1
        if not draft.depth:
            return
        # A drafter's first draft pays its one-off setup (Sequoia's tree search and the cost curves
        # it times, a datastore's load): seconds, not a level's cost, and the fading average would
        # keep them for dozens of drafts, which the policy, seeing drafts as dear, would not make.
        # The second draft sets the cost outright; later ones fade into it.
        level = draft_seconds / draft.depth
        if self.drafts:
            self.level_seconds = level if self.drafts == 1 else MEMORY * self.level_seconds + (1 - MEMORY) * level
        self.drafts += 1
        self.plain = self.idle[draft.key] = 0
        accepted_at, reached_at = self.counts.setdefault(draft.key, ([0.0] * (self.max_depth + 1), [0.0] * (self.max_depth + 1)))
        for position in range(1, self.max_depth + 1):
            accepted_at[position] *= MEMORY
            reached_at[position] *= MEMORY
        for position in range(1, min(draft.depth, accepted + 1, self.max_depth) + 1):
            reached_at[position] += 1
            accepted_at[position] += position <= accepted

    def describe(self):
        return f"cost-aware draft length (0..{self.max_depth})"


WIDTHS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128)
# Cached tokens the cost-aware policy's curves are timed after: two suffice, as attention's cost is
# linear in the context (`price` extends it beyond the longest); 1,024 keeps the prefill cheap.
CONTEXTS = (64, 1024)
CURVES = "_specatlas_cost_curves"  # the model's attribute holding its measured curves


def timing_conditions(model) -> tuple:
    """What a model's cost curve depends on besides its weights: dtype, device, threads, and
    whether its packed layers run the default kernel for now (`cpu_kernels.default_kernels`)."""
    import torch

    from specatlas.impls.engine import cpu_kernels

    return str(model.dtype), str(model.device), torch.get_num_threads(), cpu_kernels.suspended(model)


def calibrate(model, max_width: int, context: int = CONTEXTS[0], rounds: int = 3, widths=None) -> dict[int, float]:
    """Seconds c(w) of a forward over w new tokens after `context` cached ones (`calibrate_contexts`)."""
    return calibrate_contexts(model, max_width, (context,), rounds, widths)[context]


def calibrate_contexts(model, max_width: int, contexts=CONTEXTS, rounds: int = 3, widths=None) -> dict[int, dict[int, float]]:
    """Seconds c(w, L) of a forward over w new tokens after L cached ones: the fastest of `rounds`, for a spread of w up
    to `max_width` (or exactly `widths`) at each context L of `contexts` that leaves room for the widest forward in the
    model's positions (the shortest always). Measured once per model object and `timing_conditions`; contexts and widths
    interleave within each round, so a burst of load hits them alike.

    Why more than one context: a forward's weights cost the same after any context, but its attention reads
    the whole cache (SmolLM2-135M: 30 layers x 2 x 3 KV heads x 64 x 4 bytes = 46 KB per cached token) and scores every
    new token against it (34,560 multiply-adds per new-token / cached-token pair, beside 134.5 M per new token in the
    linears and LM head). In multiply-adds alone r(w) = c(w)/c(1) hardly moves with context (within 0.3% for w <= 64,
    L = 64..2048: both parts scale with w), but on a CPU a narrow forward is bound by reading the weights (538 MB; the
    2-core AMD EPYC curve of 2026-12-05 gives c(1) = 52 ms, 10 GB/s, and 97 G multiply-adds/s on wide forwards), so the
    cache read adds the same time to every width while the attention arithmetic adds time in proportion to w. Priced
    that way on that curve, r(w) after 2,048 tokens against after 64 is +1.9% at w = 8, +3.7% at 16, +10.6% at 32 and
    +17.3% at 64 if attention runs at the linears' rate, and +27%, +59%, +86% and +113% at a quarter of it (the
    Intel Xeon curve of 2026-12-02: +15% to +103% at w = 64): enough to misjudge trees, so the policy prices each step
    at its own context, interpolated between these (`price`)."""
    import torch

    from specatlas.impls.engine import kv

    widths = list(widths) if widths is not None else [w for w in WIDTHS if w < max_width] + [max_width]
    limit = getattr(getattr(model, "config", None), "max_position_embeddings", None) or float("inf")
    contexts = sorted(set(contexts))
    contexts = [c for c in contexts if c + max(widths) <= limit] or contexts[:1]
    key = (timing_conditions(model), tuple(widths), tuple(contexts))
    measured = model.__dict__.setdefault(CURVES, {})  # kept with the model measured, never shared by name
    if key not in measured:
        caches = {context: kv.new_cache(model) for context in contexts}
        runs: dict[int, dict[int, list[float]]] = {c: {w: [] for w in widths} for c in contexts}
        with torch.inference_mode():
            for context, cache in caches.items():
                kv.forward(model, cache, [0] * context, last_only=True)
            for _ in range(rounds):
                for context, cache in caches.items():
                    for width in widths:
                        start = time.perf_counter()
                        kv.forward(model, cache, [0] * width)
                        runs[context][width].append(time.perf_counter() - start)
                        kv.truncate(cache, context)
        # As measured, not smoothed: where a kernel makes a wider forward cheaper, the policy must see it.
        measured[key] = {c: {w: min(times) for w, times in by_width.items()} for c, by_width in runs.items()}
    return measured[key]


def interpolate(curve: dict[int, float], width: int) -> float:
    """A cost curve at `width`: interpolated between measured widths, proportional beyond them."""
    below = max((w for w in curve if w <= width), default=min(curve))
    above = min((w for w in curve if w >= width), default=None)
    if above is None:
        return curve[below] * width / below
    if above == below:
        return curve[below]
    return curve[below] + (width - below) / (above - below) * (curve[above] - curve[below])


def price(curves: dict[int, dict[int, float]], width: int, context: int) -> float:
    """Curves by context (`calibrate_contexts`) at `width` after `context` tokens: linear in the
    context between timed ones (attention's cost is), extended along the last two beyond them
    (never below the last: noise must not make a longer context cheaper), the shortest's below it."""
    timed = sorted(curves)
    if context <= timed[0] or len(timed) == 1:
        return interpolate(curves[timed[0]], width)
    above = next((c for c in timed if c >= context), timed[-1])
    below = timed[timed.index(above) - 1]
    low, high = interpolate(curves[below], width), interpolate(curves[above], width)
    value = low + (context - below) / (above - below) * (high - low)
    return max(value, high) if context > above else value


def relative(seconds: dict[int, float]) -> dict[int, float]:
    """A cost curve as multiples of a one-token step."""
    return {width: value / seconds[min(seconds)] for width, value in seconds.items()}


def relative_by_context(curves: dict[int, dict[int, float]]) -> dict[int, dict[int, float]]:
    """Curves by context as multiples of a one-token step after the shortest context."""
    step = interpolate(curves[min(curves)], 1)
    return {context: {width: value / step for width, value in curve.items()} for context, curve in curves.items()}
