"""The engine's hooks for drafters that read the target: `start` after the prefill, hidden states
by layer (prefill and every verification), composed drafters forwarding what their parts need,
and `Verified.committed` as a snapshot. Checked with a hidden-state drafter on the toy model."""

import pytest
import torch

from specatlas.impls.decoding import SpeculativeDecoder
from specatlas.impls.draft_length import FixedLength
from specatlas.impls.drafting import Draft, Drafter
from specatlas.impls.retrieval import SuffixAutomatonDraft
from specatlas.impls.sampling import Sampling

from .toy import ToyLM, enumerate_outputs, sequence_distribution

PROMPT = [1, 2, 1]


class ToyHeads(Drafter):
    """A Medusa-like drafter on ToyLM: it drafts from the target's layer-1 state at the last
    committed position (its next-token logits, shifted by 1), read from the prefill and then
    from each verification's rows, and checks every row it is given against the toy's own."""

    hidden_layers = (1, ToyLM.LAYERS)

    def __init__(self, target: ToyLM):
        self.target, self.state, self.checked, self.starts = target, None, 0, 0

    def start(self, prompt, prefill):
        self.starts += 1
        assert prefill.prompt == tuple(prompt) and set(prefill.hidden_states) == set(self.hidden_layers)
        for layer, rows in prefill.hidden_states.items():
            assert rows.shape[0] == len(prompt) - 1  # rows of prompt[:-1]
            for row in range(len(prompt) - 1):
                torch.testing.assert_close(rows[row], self.target.hidden(layer, tuple(prompt[: row + 1])))
                self.checked += 1
        self.state = prefill.hidden_states[1][-1]

    def propose(self, context, depth, sampling, rng):
        torch.testing.assert_close(self.state, self.target.hidden(1, tuple(context[:-1])))
        q = sampling.probs(self.state - 1)
        if sampling.greedy:
            return Draft.chain([int(q.argmax())] * depth)
        tokens = [rng.categorical(q, len(context) + i, "draft") for i in range(depth)]
        return Draft.chain(tokens, q=q.expand(depth, -1))

    def observe(self, step):
        assert set(step.hidden_states) == set(self.hidden_layers)
        row = step.accepted[-1] + 1 if step.accepted else 0  # the last row the target kept
        for layer, rows in step.hidden_states.items():
            assert rows.shape[0] == step.logits.shape[0]
            torch.testing.assert_close(rows[row], self.target.hidden(layer, step.committed[:-1]))
            self.checked += 1
        self.state = step.hidden_states[1][row]


@pytest.mark.parametrize("sampling", [Sampling(1.0), Sampling(0.7, top_p=0.8)], ids=str)
def test_hidden_state_drafter_is_lossless_and_reads_the_right_rows(sampling):
    target, length = ToyLM(seed=4), 3
    drafters = []

    def run(rng):
        drafters.append(ToyHeads(target))  # a fresh drafter for every enumerated run
        decoder = SpeculativeDecoder(target, drafters[-1], draft_length=FixedLength(2))
        return tuple(decoder.generate(PROMPT, length, sampling, rng).tokens)

    got = enumerate_outputs(run)
    want = sequence_distribution(target, PROMPT, length, sampling)
    worst = max(abs(got.get(seq, 0.0) - p) for seq, p in want.items())
    assert abs(sum(got.values()) - 1) < 1e-9 and worst < 1e-6, f"max |P_decoder - P_target| = {worst:.2e}"
    assert all(d.starts == 1 and d.checked >= 2 * (len(PROMPT) - 1) + 2 for d in drafters)


def test_the_target_is_asked_for_exactly_the_drafters_layers_prefill_included():
    target = ToyLM(seed=4)
    SpeculativeDecoder(target, ToyHeads(target), draft_length=FixedLength(2)).generate(PROMPT, 4)
    assert target.hidden_asked and all(asked == [1, ToyLM.LAYERS] for asked in target.hidden_asked)
    target.hidden_asked.clear()
    SpeculativeDecoder(target).generate(PROMPT, 4)  # no drafter, no hidden states: no cost
    assert target.hidden_asked and not any(target.hidden_asked)


def test_a_composed_drafter_forwards_its_parts_needs_and_start():
    target = ToyLM(seed=4)
    heads = ToyHeads(target)
    composed = SuffixAutomatonDraft(None, auxiliary=heads, threshold=99)  # every draft from the heads
    assert composed.hidden_layers == heads.hidden_layers
    output = SpeculativeDecoder(target, composed, draft_length=FixedLength(2)).generate(PROMPT, 5)
    assert heads.starts == 1 and heads.checked > 0 and sum(output.stats.drafted_at) > 0


def test_verified_committed_is_a_snapshot():
    target = ToyLM(seed=4)

    class Keeper(Drafter):
        steps = []

        def propose(self, context, depth, sampling, rng):
            return Draft()

        def observe(self, step):
            self.steps.append(step)

    SpeculativeDecoder(target, Keeper(), draft_length=FixedLength(1)).generate(PROMPT, 3)
    assert [len(step.committed) for step in Keeper.steps] == [4, 5, 6]
