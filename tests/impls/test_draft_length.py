"""The cost-aware draft length: it stops drafting where drafts do not pay, drafts deep where they
do, prices drafting itself, follows the machine's speed at every width, and learns per draft key."""

import pytest
import torch

from types import SimpleNamespace

from specatlas.impls.engine import draft_length, kv
from specatlas.impls.engine.draft_length import (PROBE_EVERY, CostAware, DraftLengthPolicy, calibrate,
                                                 calibrate_contexts, price, relative, relative_by_context)
from specatlas.impls.engine.drafting import Draft

from .toy import ToyLM, tiny_llama

# A cost curve shaped like SmolLM2-135M's on a 2-core CPU (float32): seconds by forward width.
CURVE = {1: 0.031, 2: 0.033, 3: 0.035, 4: 0.048, 6: 0.051, 8: 0.059, 12: 0.066, 16: 0.068}
STEP = CURVE[1]
CONTEXT = 64
# The same after 2,048 cached tokens: reading the cache adds 6 ms to every width, scoring each new
# token against it 1 ms per token (the shape issue 26's analysis gives for SmolLM2-135M).
LONG = {w: s + 0.006 + 0.001 * w for w, s in CURVE.items()}


def run(policy: CostAware, steps: int, accepts, key=None, draft_seconds_per_level: float = 0.0) -> list[int]:
    """Drive the policy as the loop does; `accepts(depth)` says how many drafted tokens verify."""
    chosen = []
    for _ in range(steps):
        depth = policy.choose()
        chosen.append(depth)
        draft = Draft.chain(list(range(depth)), key=key) if depth else Draft()
        draft = policy.trim(draft)
        width = 1 + len(draft.tokens)
        policy.record(draft, accepts(draft.depth) if draft.depth else 0,
                      draft_seconds_per_level * draft.depth, STEP * policy.ratio(width), width)
    return chosen


def test_stops_drafting_when_nothing_is_accepted_and_seldom_probes_again():
    policy = CostAware(8, {CONTEXT: relative(CURVE)})
    chosen = run(policy, 400, lambda depth: 0)
    assert chosen[0] > 0  # the prior is worth a try
    probes = [step for step, depth in enumerate(chosen) if depth]
    assert all(depth <= 1 for depth in chosen[20:])  # then plain decoding...
    later = [step for step in probes if step >= 20]
    assert later and min(b - a for a, b in zip(later, later[1:])) > PROBE_EVERY  # ...and rare probes


def test_drafts_deep_when_drafts_are_good():
    policy = CostAware(8, {CONTEXT: relative(CURVE)})
    chosen = run(policy, 100, lambda depth: depth)  # every drafted token is accepted
    assert min(chosen[20:]) == 8


def test_prices_drafting_a_draft_model_that_costs_half_a_step_per_level_never_pays():
    # 40% acceptance would pay with free drafts (E = 1.4 tokens at 1.07x the cost)...
    free = CostAware(8, {CONTEXT: relative(CURVE)})
    half = lambda depth: int(torch.rand(()) < 0.4)  # noqa: E731  (the first token, never more)
    torch.manual_seed(0)
    assert sum(run(free, 200, half)[50:]) > 100
    # ...but not when each drafted level costs half a target step.
    priced = CostAware(8, {CONTEXT: relative(CURVE)})
    torch.manual_seed(0)
    drafted = sum(depth > 0 for depth in run(priced, 200, half, draft_seconds_per_level=STEP / 2)[50:])
    assert drafted <= 10  # probes, and a few drafts after a lucky one


def test_step_cost_follows_the_machine_at_any_width():
    # Verifications at width 5 only, on a machine twice as slow as calibrated: the one-token cost
    # (which is never observed directly) must follow, or the policy compares stale numbers.
    policy = CostAware(8, {CONTEXT: relative(CURVE)})
    for _ in range(30):
        policy.record(Draft.chain([1, 2, 3, 4]), 4, 0.0, 2 * STEP * policy.ratio(5), 5)
    assert abs(policy.step_seconds - 2 * STEP) < 1e-6


def test_learns_acceptance_per_key_and_trims_drafts_of_a_bad_key():
    policy = CostAware(8, {CONTEXT: relative(CURVE)})
    for _ in range(60):
        run(policy, 1, lambda depth: depth, key="long match")
        run(policy, 1, lambda depth: 0, key="short match")
    good = policy.trim(Draft.chain(list(range(8)), key="long match"))
    bad = policy.trim(Draft.chain(list(range(8)), key="short match"))
    assert good.depth == 8 and bad.depth == 0


def test_depth_for_gates_a_key_before_drafting_as_trim_cuts_after():
    """What a composed drafter asks before its part drafts (SAM-Decoding's auxiliary): the same
    depth `trim` would keep, so a part that does not pay is not run, and is probed seldom."""
    policy = CostAware(8, {CONTEXT: relative(CURVE)})
    assert policy.depth_for("auxiliary", 5) > 0  # no evidence yet: worth a try
    for _ in range(40):
        policy.record(Draft.chain([1] * 4, key="long match"), 4, 0.0, STEP * policy.ratio(5), 5)
        policy.record(Draft.chain([1], key="auxiliary"), 0, 0.0, STEP * policy.ratio(2), 2)
    assert policy.choose() > 0 and policy.depth_for("auxiliary", 5) == 0
    assert policy.depth_for("long match", 5) == 5 and policy.depth_for("long match", 3) == 3  # the budget caps
    for _ in range(PROBE_EVERY):
        policy.record(Draft(), 0, 0.0, STEP, 1)
    assert policy.depth_for("auxiliary", 5) == 1  # idle long enough: probed again


def test_cut_keeps_the_shallow_part_of_a_tree_with_its_parents_and_q():
    #        root
    #       /    \
    #      0      1
    #     / \     |
    #    2   3    4
    #    |
    #    5
    q = torch.arange(6.0)[:, None].repeat(1, 3)
    draft = Draft([10, 11, 12, 13, 14, 15], [-1, -1, 0, 0, 1, 2], q, key=3)
    cut = draft.cut(2)
    assert cut.tokens == [10, 11, 12, 13, 14] and cut.parents == [-1, -1, 0, 0, 1] and cut.key == 3
    assert torch.equal(cut.q, q[:5])
    assert max(kv.depths(draft.cut(1).parents)) == 1 and draft.cut(1).tokens == [10, 11]


def test_a_new_key_priced_out_by_the_prior_is_probed_once_then_judged_on_evidence():
    policy = CostAware(8, {CONTEXT: relative(CURVE)})
    wide = Draft([1, 2, 3, 4, 5, 6], [-1] * 6, key="wide")  # six siblings: width 7 at depth 1
    assert policy.trim(wide).depth == 1  # no evidence yet: probe
    policy.record(wide, 0, 0.0, STEP * policy.ratio(7), 7)  # rejected
    assert policy.trim(wide).depth == 0  # judged on evidence from now on
    for _ in range(30):
        policy.record(wide.cut(0), 0, 0.0, STEP, 1)  # plain steps: the evidence fades...
    assert policy.trim(wide).depth == 0  # ...but slowly


def test_a_drafter_whose_trees_never_pay_is_asked_for_drafts_only_to_probe():
    # The policy guesses a chain (`nodes`: one node a depth), which would pay at the prior; the
    # drafter's real trees hold 8 siblings a depth, which never do: asking for one is work thrown away.
    policy = CostAware(4, {CONTEXT: relative(CURVE)})
    asked, verified = [], []
    for step in range(100):
        depth = policy.choose()
        tree = Draft(list(range(8 * depth)), [-1 if node < 8 else 8 * (node // 8 - 1) for node in range(8 * depth)])
        draft = policy.trim(tree) if depth else Draft()
        asked += [step] if depth else []
        verified += [step] if draft.depth else []
        policy.record(draft, 0, 0.0, STEP * policy.ratio(1 + len(draft.tokens)), 1 + len(draft.tokens))
    assert asked == verified and len(verified) == 100 // (PROBE_EVERY + 1) + 1  # the first draft, then a probe every PROBE_EVERY plain steps


def test_one_draft_wider_than_its_key_pays_for_does_not_stop_the_drafts_that_pay():
    # A tree of 3 siblings (width 4) whose first token is always accepted pays on this curve
    # (2 tokens for 1.55 steps). One draft of 15 siblings is cut (a Hydra or EAGLE-2 tree that
    # spread where its heads were unsure); the next step still asks for the drafts that pay, since
    # the key's widths follow its drafts (faded), not that one.
    policy = CostAware(4, {CONTEXT: relative(CURVE)})
    siblings = lambda n: Draft(list(range(n)), [-1] * n)  # noqa: E731
    for _ in range(40):
        draft = policy.trim(siblings(3)) if policy.choose() else Draft()
        policy.record(draft, 1 if draft.depth else 0, 0.0, STEP * policy.ratio(1 + len(draft.tokens)), 1 + len(draft.tokens))
    assert policy.choose() > 0 and policy.trim(siblings(3)).depth == 1
    assert policy.trim(siblings(15)).depth == 0  # 2 tokens for 2.2 steps: cut
    policy.record(Draft(), 0, 0.0, STEP, 1)
    assert policy.choose() > 0 and policy.expected_width(None, 1) == pytest.approx(1 + 0.95 * 3 + 0.05 * 15)


def test_a_drafters_first_draft_paying_its_setup_is_not_taken_for_the_cost_of_drafting():
    # Sequoia's first draft searches its tree and times two cost curves: seconds, against a few
    # milliseconds for every later draft of its one-level tree. Priced as drafting, those seconds
    # made the policy draft on 3% of steps; left out, it drafts the tree that pays on every step.
    policy = CostAware(1, {CONTEXT: relative(CURVE)})
    siblings = Draft([1, 2, 3], [-1, -1, -1])
    first = policy.trim(siblings)
    policy.record(first, 1, 100 * STEP, STEP * policy.ratio(4), 4)  # the setup
    for _ in range(30):
        draft = policy.trim(siblings) if policy.choose() else Draft()
        policy.record(draft, 1 if draft.depth else 0, 0.1 * STEP * draft.depth, STEP * policy.ratio(1 + len(draft.tokens)),
                      1 + len(draft.tokens))
        assert draft.depth == 1
    assert policy.level_seconds == pytest.approx(0.1 * STEP)


# `--draft-length` is parsed once into a `DraftLengthPolicy`, whose name is what results record.
@pytest.mark.parametrize("text, policy", [
    ("paper", DraftLengthPolicy.paper()),
    ("cost-aware", DraftLengthPolicy.cost_aware()),
    ("auto", DraftLengthPolicy.cost_aware()),  # the older spelling
    ("4", DraftLengthPolicy.fixed(4)),
    ("1024", DraftLengthPolicy.fixed(1024)),
])
def test_parse(text, policy):
    assert DraftLengthPolicy.parse(text) == policy


@pytest.mark.parametrize("text", ["many", "0", "1025", "-1", "\u00b2", "\u0664", " 4", "Paper", ""])
def test_bad_text_is_one_line(text):
    with pytest.raises(ValueError, match=r"^--draft-length must be 'paper', 'cost-aware' or a positive integer") as error:
        DraftLengthPolicy.parse(text)
    assert "\n" not in str(error.value)


def test_names_are_the_result_files_policy_values():
    assert [p.name for p in (DraftLengthPolicy.paper(), DraftLengthPolicy.cost_aware(), DraftLengthPolicy.fixed(2))] == \
        ["paper", "cost-aware", "fixed"]
    assert DraftLengthPolicy.cost_aware().is_cost_aware and not DraftLengthPolicy.paper().is_cost_aware


def test_price_is_linear_in_context_between_timed_ones_and_extended_beyond():
    curves = {64: {1: 1.0, 8: 2.0}, 1024: {1: 2.0, 8: 6.0}}
    assert price(curves, 8, 64) == 2.0 and price(curves, 8, 10) == 2.0  # below the shortest: the shortest's
    assert price(curves, 8, 544) == pytest.approx(4.0)  # halfway
    assert price(curves, 4, 544) == pytest.approx((1 + 3 / 7) * 0.5 + (2 + 4 * 3 / 7) * 0.5)  # widths interpolated too
    assert price(curves, 8, 1984) == pytest.approx(10.0)  # extended along the last two: attention is linear
    noisy = {64: {1: 1.0, 8: 2.0}, 1024: {1: 0.9, 8: 1.9}}  # the long context timed a little faster
    assert price(noisy, 8, 8000) == 1.9  # never extrapolated below the last timed
    assert price({64: {1: 1.0, 8: 2.0}}, 8, 5000) == 2.0  # one context: the same at every context


def test_a_wide_forward_after_a_long_context_is_priced_dearer_and_a_plain_step_stays_the_unit():
    policy = CostAware(8, relative_by_context({CONTEXT: CURVE, 2048: LONG}), lambda d: 4 * d)
    short = policy.ratio(16)
    policy.at(2048)
    assert policy.ratio(16) == pytest.approx(LONG[16] / STEP) and policy.ratio(16) > short
    # The machine is as fast as calibrated: steps at the long context must not read as a slower machine.
    for _ in range(30):
        policy.record(Draft.chain([1, 2, 3]), 3, 0.0, LONG[4], 4)
    assert policy.step_seconds == pytest.approx(STEP)


def test_the_chosen_tree_is_shallower_at_a_long_context_where_wide_forwards_cost_more():
    """A 4-wide tree per level (widths 5, 9, 13, 17) whose first level is always accepted and the
    second half the time: worth two levels at a short context, one after 2,048 tokens, where each
    new token's attention costs 3 ms more (attention at a quarter of the linears' rate, issue 26)."""
    curves = relative_by_context({CONTEXT: CURVE, 2048: {w: s + 0.006 + 0.003 * w for w, s in CURVE.items()}})
    depths = {}
    for context in (CONTEXT, 2048):
        policy = CostAware(4, curves, lambda d: 4 * d)
        policy.at(context)
        for step in range(40):
            policy.record(Draft.chain([1, 2, 3, 4], key="k"), 1 + step % 2, 0.0, STEP * policy.ratio(5), 5)
        depths[context] = policy.trim(Draft(list(range(16)), [-1] * 4 + list(range(12)), key="k")).depth
    assert depths == {CONTEXT: 2, 2048: 1}


def test_the_decoder_says_each_steps_context_to_the_policy():
    from specatlas.impls.engine.decoding import SpeculativeDecoder
    from specatlas.impls.engine.drafting import PromptLookup

    seen = []
    policy = CostAware(4, {CONTEXT: relative(CURVE)})
    policy.at = seen.append
    prompt = [1, 2, 3, 1, 2, 3, 1, 2]
    output = SpeculativeDecoder(ToyLM(seed=1), PromptLookup(), draft_length=policy).generate(prompt, 6)
    assert seen[0] == len(prompt) and seen == sorted(seen) and len(seen) == output.stats.target_forwards - 1
    assert all(b - a >= 1 for a, b in zip(seen, seen[1:]))  # every step commits at least one token


class FakeClock:
    """`perf_counter` for `calibrate`: a forward over w new tokens after L cached ones costs
    1 ms + 0.2 ms per token + 1 us per (new, cached) pair; its first time 5 ms more (a burst of load)."""

    def __init__(self, monkeypatch):
        self.now, self.seen, self.forwards = 0.0, set(), 0
        original = kv.forward

        def forward(model, cache, ids, **kwargs):
            context, width = cache.get_seq_length(), len(ids)
            self.now += self.cost(context, width) + (0.005 if (context, width) not in self.seen else 0.0)
            self.seen.add((context, width))
            self.forwards += 1
            return original(model, cache, ids, **kwargs)

        monkeypatch.setattr(kv, "forward", forward)
        monkeypatch.setattr(draft_length, "time", SimpleNamespace(perf_counter=lambda: self.now))

    @staticmethod
    def cost(context, width):
        return 0.001 + 0.0002 * width + 1e-6 * width * context


def test_each_model_object_is_timed_for_itself(monkeypatch):
    """Two models of one name and shape (other weights, another machine's copy) each get their own
    curve: none is shared through a process-wide cache keyed by the model's name."""
    clock, slow = FakeClock(monkeypatch), tiny_llama(0)
    timed = kv.forward

    def forward(model, cache, ids, **kwargs):  # `slow` costs one extra step per forward
        clock.now += 0.001 * (model is slow)
        return timed(model, cache, ids, **kwargs)

    monkeypatch.setattr(kv, "forward", forward)
    fast_curve = calibrate(tiny_llama(0), 4, context=8, widths=(1, 2))
    slow_curve = calibrate(slow, 4, context=8, widths=(1, 2))
    assert slow_curve == pytest.approx({w: fast_curve[w] + 0.001 for w in (1, 2)})


def test_calibration_times_each_context_that_fits_once_and_keeps_the_fastest(monkeypatch):
    clock = FakeClock(monkeypatch)
    model = tiny_llama(0)  # 128 positions: a 100-token context leaves no room for a 32-token forward
    curves = calibrate_contexts(model, 32, contexts=(8, 40, 100), widths=(1, 2, 32))
    assert set(curves) == {8, 40}
    for context, curve in curves.items():
        assert curve == pytest.approx({w: FakeClock.cost(context, w) for w in (1, 2, 32)})
    forwards = clock.forwards
    assert calibrate_contexts(model, 32, contexts=(8, 40, 100), widths=(1, 2, 32)) == curves  # cached: no forward
    assert clock.forwards == forwards
    assert calibrate(model, 32, context=8, widths=(1, 2, 32)) == pytest.approx(curves[8])
