"""PEARL (Liu et al. 2025): pre-verify and post-verify, the drafter on a thread beside the target.
Its output distribution, enumerated exactly on the toy, is the target's, with and without the
overlap; a planted bug (a target token drawn from the row that already judged the round's first
draft) is caught; every round's drafter is still drafting when the target's forward begins (run in
sequence, it never is); greedy output is plain decoding's on a real transformer."""

import threading

import pytest

from specatlas.impls.engine import verification
from specatlas.impls.engine.decoding import SpeculativeDecoder, Stats
from specatlas.impls.engine.draft_length import FixedLength
from specatlas.impls.engine.drafting import ModelDrafter
from specatlas.impls.drafters.draft_structure.pipeline import Pearl
from specatlas.impls.engine.sampling import Randomness, Sampling

from .test_exact_distribution import PROMPT, SAMPLINGS, deviation
from .tiny_world import randomise
from .toy import ToyLM, enumerate_outputs, sequence_distribution, tiny_llama

LENGTH = 4  # room for a pre-verify round, a post-verify round and a rejection after it


@pytest.fixture(scope="module")
def target():
    return ToyLM(seed=1)


def pearl(target, drafter, gamma=2, overlap=True):
    return Pearl(target, ModelDrafter(drafter), draft_length=FixedLength(gamma), overlap=overlap)


def distribution(target, overlap=True, sampling=SAMPLINGS[0]):
    drafter = ToyLM(seed=2, sharpness=1.5)
    return enumerate_outputs(lambda rng: tuple(pearl(target, drafter, overlap=overlap).generate(
        PROMPT, LENGTH, sampling, rng).tokens))


@pytest.mark.parametrize("sampling, overlap", [(sampling, True) for sampling in SAMPLINGS] + [(SAMPLINGS[0], False)],
                         ids=lambda x: {True: "overlapped", False: "sequential"}[x] if isinstance(x, bool)
                         else f"T{x.temperature}-p{x.top_p}")
def test_output_distribution_equals_target(target, sampling, overlap):
    worst = deviation(distribution(target, overlap, sampling), sequence_distribution(target, PROMPT, LENGTH, sampling))
    assert worst < 1e-6, f"PEARL: max |P_decoder - P_target| = {worst:.2e}"


def test_a_target_token_after_an_unscored_draft_is_caught(target, monkeypatch):
    """A planted bug: when post-verify keeps the whole chain, a target token is drawn anyway from
    the last row, the one that judged the round's first draft d_1 (as plain speculative sampling's
    bonus token would be), and placed after d_1. The enumeration must see it."""
    right = verification.RejectionSampling.verify

    def with_bonus(self, draft, logits, sampling, rng, position):
        accepted, token = right(self, draft, logits, sampling, rng, position)
        if token is None:
            token = rng.categorical(sampling.probs(logits[-1]), position + len(accepted), "token")
        return accepted, token

    monkeypatch.setattr(verification.RejectionSampling, "verify", with_bonus)
    sampling = SAMPLINGS[0]
    worst = deviation(distribution(target, sampling=sampling), sequence_distribution(target, PROMPT, LENGTH, sampling))
    assert worst > 1e-2, f"the planted bug moved the distribution by only {worst:.2e}"


def rounds(decoder, prompt, tokens, sampling=Sampling(), seed=0):
    """(output tokens, the chains its verifier judged as (nodes, kept))."""
    seen, verifier = [], decoder.verifier(sampling)

    class Recording(type(verifier)):
        def verify(self, draft, logits, sampling, rng, position):
            accepted, token = super().verify(draft, logits, sampling, rng, position)
            seen.append((len(draft.tokens), len(logits), len(accepted), token))
            return accepted, token

    if sampling.greedy:
        decoder.greedy_verifier = Recording()
    else:
        decoder.sampling_verifier = Recording()
    return decoder.generate(prompt, tokens, sampling, Randomness(seed)).tokens, seen


def test_greedy_output_is_plain_decoding_and_both_modes_run():
    """On a real (random, tiny) transformer: every output equals plain decoding's; pre-verify rounds
    judge one draft on one target row, post-verify rounds a chain whose last node has no row, and a
    fully kept post-verify round commits no target token."""
    target = randomise(tiny_llama(seed=1, vocab=3), 11)  # sharp distributions: drafts both kept and rejected
    drafter = randomise(tiny_llama(seed=2, layers=1, vocab=3), 12)
    plain = SpeculativeDecoder(target)
    modes = set()
    for prompt in ([1], [2, 1, 2, 1, 2]):
        for gamma in (1, 3):
            tokens, seen = rounds(pearl(target, drafter, gamma), prompt, 12)
            assert tokens == plain.generate(prompt, 12).tokens
            for nodes, rows, kept, token in seen:
                # The round's first draft is judged by the row before it (its own row only when no
                # draft was made: the last round, with no room left).
                assert rows in (nodes, nodes + 1) and (token is None) == (kept == nodes == rows)
                if rows == nodes:
                    modes.add(("pre-verify" if rows == 1 else "post-verify", "kept" if token is None else "rejected"))
    assert len(modes) == 4, modes


def test_the_overlap_does_not_change_the_sampled_text():
    """Every draw is keyed by position: the drafter on its thread and the same rounds in sequence
    sample the same text for a seed."""
    target, drafter = tiny_llama(seed=1, vocab=16), tiny_llama(seed=2, layers=1, vocab=16)
    sampling = Sampling(0.9, top_k=8)
    texts = {overlap: pearl(target, drafter, 4, overlap).generate([3, 5, 7], 24, sampling, Randomness(7)).tokens
             for overlap in (True, False)}
    assert texts[True] == texts[False]
    assert texts[True] != pearl(target, drafter, 4).generate([3, 5, 7], 24, sampling, Randomness(8)).tokens


class Meeting(threading.Condition):
    """A rendezvous per round: the drafting and the target's forward of round k each count
    themselves in, then wait (up to `patience` seconds) for the other to have begun round k."""

    def __init__(self, patience: float):
        super().__init__()
        self.patience, self.begun, self.met = patience, {"draft": 0, "score": 0}, []

    def arrive(self, side: str, other: str) -> bool:
        with self:
            self.begun[side] += 1
            mine = self.begun[side]
            self.notify_all()
            return self.wait_for(lambda: self.begun[other] >= mine, self.patience)


def watched(target, drafter, meeting: Meeting, overlap: bool) -> Pearl:
    class Watched(Pearl):
        def _draft(self, context, depth, sampling, rng):
            meeting.met.append(meeting.arrive("draft", "score"))
            return super()._draft(context, depth, sampling, rng)

        def _score(self, session, unverified):
            meeting.arrive("score", "draft")
            return super()._score(session, unverified)

    return Watched(target, ModelDrafter(drafter), draft_length=FixedLength(3), overlap=overlap)


@pytest.mark.parametrize("overlap", [True, False], ids=["overlapped", "planted-in-sequence"])
def test_drafting_and_the_targets_forward_are_under_way_at_once(overlap):
    """The overlap itself, without timing anything: in every round the drafting and the target's
    forward have both begun before either does its work. Run in sequence (overlap=False, the planted
    bug), no round's drafting sees its forward begin (each gives up after a short wait); overlapped,
    every one does (a long wait, over as soon as the other side arrives)."""
    target, drafter = tiny_llama(seed=1, vocab=16), tiny_llama(seed=2, layers=1, vocab=16)
    # The last forward has no drafting left to meet: it waits its whole patience out.
    meeting = Meeting(patience=5.0 if overlap else 0.05)
    watched(target, drafter, meeting, overlap).generate([3, 5, 7], 8)
    assert len(meeting.met) >= 2 and all(met == overlap for met in meeting.met), meeting.met


def test_overlapped_seconds_are_counted_only_where_the_two_ran_at_once():
    """`Stats.overlapped_seconds`, what `specatlas run pearl` reports: the draft and verification
    seconds beyond the decoding's wall time. Drafting then verifying, it is 0, PEARL in sequence too."""
    target, drafter = tiny_llama(seed=1, vocab=16), tiny_llama(seed=2, layers=1, vocab=16)
    plain = SpeculativeDecoder(target, ModelDrafter(drafter), draft_length=FixedLength(3)).generate([3, 5, 7], 12).stats
    sequential = pearl(target, drafter, 3, overlap=False).generate([3, 5, 7], 12).stats
    assert plain.draft_seconds > 0 and sequential.draft_seconds > 0
    assert plain.overlapped_seconds == 0 and sequential.overlapped_seconds == 0
    assert Stats(prefill_seconds=1.0, draft_seconds=2.0, verify_seconds=3.0, wall_seconds=5.5).overlapped_seconds == 0.5
