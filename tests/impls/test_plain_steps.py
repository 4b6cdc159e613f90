"""A step the draft-length policy makes plain runs as plain decoding does (issue 26: no tuned row
below plain decoding for a structural reason): SAM-Decoding[EAGLE-2] runs no EAGLE head forward
on a step whose auxiliary draft does not pay, and PEARL's target runs with no drafter thread
beside it, on as many torch threads as plain decoding's. Counted, never timed."""

import threading

import torch

from specatlas.impls.drafters.model_free.retrieval import AUXILIARY
from specatlas.impls.engine import draft_length, kv
from specatlas.impls.engine.decoding import SpeculativeDecoder
from specatlas.impls.engine.draft_length import DraftLengthPolicy, FixedLength
from specatlas.impls.engine.drafting import Draft, ModelDrafter
from specatlas.impls.drafters.draft_structure.pipeline import Pearl
from specatlas.impls.registry import METHODS

from .test_draft_length import CONTEXT, CURVE, STEP
from .tiny_world import TinyWorld, randomise
from .toy import tiny_llama

PROMPT, NEW_TOKENS = [12, 40, 12, 40, 8, 1, 12, 40], 24


class Keys:
    """A verifier that notes every draft's key, then defers to the real one."""

    def __init__(self, verifier):
        self.verifier, self.keys = verifier, []

    def verify(self, draft, *args):
        self.keys.append(draft.key)
        return self.verifier.verify(draft, *args)


def sam_eagle2(world, policy):
    """(the method on the tiny world, the EAGLE head forwards it makes, the keys of its drafts)."""
    decoder = world.build(METHODS["hu2025sam-eagle2"], policy)
    forwards = []
    decoder.drafter.auxiliary.head.register_forward_hook(lambda *_: forwards.append(1))
    decoder.greedy_verifier = Keys(decoder.greedy_verifier)
    return decoder, forwards, decoder.greedy_verifier.keys


def test_sam_eagle2_runs_no_head_forward_on_a_step_whose_auxiliary_draft_does_not_pay(tmp_path, monkeypatch):
    world = TinyWorld(tmp_path)
    want = SpeculativeDecoder(world.target).generate(PROMPT, NEW_TOKENS).tokens

    # The paper's setting: every step handed to EAGLE-2 grows its tree.
    decoder, forwards, keys = sam_eagle2(world, DraftLengthPolicy.paper())
    assert decoder.generate(PROMPT, NEW_TOKENS).tokens == want
    assert keys.count(AUXILIARY) > 0 and len(forwards) >= keys.count(AUXILIARY)

    # Cost-aware, on a fixed cost curve and clock: the suffix automaton's long matches always paid,
    # EAGLE-2's drafts never did and one was just verified (no probe due), so the loop still asks
    # for drafts but every step handed to EAGLE-2 is a plain one.
    monkeypatch.setattr(draft_length, "calibrate_contexts", lambda *args, **kwargs: {CONTEXT: CURVE})
    decoder, forwards, keys = sam_eagle2(world, DraftLengthPolicy.cost_aware())
    decoder.clock = lambda: 0.0
    for _ in range(40):
        decoder.draft_length.record(Draft.chain([1] * 4, key=("context", 8)), 4, 0.0, STEP, 5)
        decoder.draft_length.record(Draft.chain([1], key=AUXILIARY), 0, 0.0, STEP, 2)
    assert decoder.generate(PROMPT, NEW_TOKENS).tokens == want
    assert keys.count(AUXILIARY) > 0 and len(forwards) == 0, \
        f"{len(forwards)} EAGLE head forwards on {keys.count(AUXILIARY)} plain steps handed to EAGLE-2"


class Scripted(FixedLength):
    """The draft length `depths` in turn, then 0 (a plain step)."""

    def __init__(self, *depths):
        super().__init__(0)
        self.depths = list(depths)

    def choose(self):
        return self.depths.pop(0) if self.depths else 0


def test_pearl_runs_a_plain_step_as_plain_decoding_and_overlaps_the_rounds_that_draft():
    """Inside each target forward: our Python threads alive, and torch's threads. Plain decoding's,
    except in the two rounds that draft, where the drafter's thread runs beside the forward."""
    target = randomise(tiny_llama(seed=1, vocab=16), 11)
    drafter = randomise(tiny_llama(seed=2, layers=1, vocab=16), 12)
    seen = []

    def forward(*args, **kwargs):
        seen.append((threading.active_count(), torch.get_num_threads()))
        return kv.forward(*args, **kwargs)

    want = SpeculativeDecoder(target, forward=forward).generate([3, 5, 7], 12).tokens
    assert len(set(seen)) == 1
    (threads, torch_threads), = set(seen)
    seen.clear()
    pearl = Pearl(target, ModelDrafter(drafter), draft_length=Scripted(3, 0, 0, 2), forward=forward)
    assert pearl.generate([3, 5, 7], 12).tokens == want
    drafting = {1, 4}  # the forwards of rounds 1 and 4 (forward 0 is the prefill)
    assert all(torch_count == torch_threads for _, torch_count in seen)
    assert [count for count, _ in seen] == [threads + (i in drafting) for i in range(len(seen))], \
        f"Python threads alive in each target forward: {[count for count, _ in seen]}; plain decoding: {threads}"
