"""PaSS's look-ahead rows and SpecDec++'s stopping rule: what they put in the target forward and
the cache, the drafts they make, and their output distribution enumerated exactly (toy models)."""

from functools import partial

import pytest
import torch

from specatlas.impls.engine import kv
from specatlas.impls.families import checkpoints
from specatlas.impls.families.checkpoints import HeadNotShipped
from specatlas.impls.engine.decoding import Session, SpeculativeDecoder
from specatlas.impls.engine.draft_length import FixedLength
from specatlas.impls.engine.drafting import ModelDrafter
from specatlas.impls.engine.models import EMBEDDED
from specatlas.impls.engine.sampling import Sampling
from specatlas.impls.families.pass_tokens import LookAheadTokens, PassDrafter, PassFamily
from specatlas.impls.families.specdecpp import AcceptanceHead, PredictedRejection
from specatlas.impls.families.training import Features
from specatlas.impls.methods import heads

from .test_exact_distribution import deviation
from .tiny_world import randomise
from .toy import VOCAB, ToyLM, enumerate_outputs, sequence_distribution, tiny_llama

PROMPT = [1, 2, 3, 4, 5]


@pytest.fixture(scope="module")
def model():
    return tiny_llama(seed=5)


def lookahead(model, count=3):
    return randomise(LookAheadTokens(model.config.hidden_size, count), 1).to(torch.float64)


@torch.no_grad()
def test_lookahead_rows_see_the_text_and_leave_the_cache_as_a_fresh_prefill(model):
    tokens = lookahead(model)
    embed = tokens.embed(model.get_input_embeddings())
    drafter = PassDrafter(model.config.vocab_size, len(tokens))
    session = Session(model, PROMPT, forward=partial(kv.forward, embed=embed))
    drafter.start(PROMPT, session.prefill)
    draft = drafter.propose(session.tokens, 3, Sampling(), None)  # nothing drafted yet: the look-ahead rows only
    assert (draft.tokens, draft.auxiliary, draft.proposed) == ([16, 17, 18], 3, 0)
    step = session.step(draft)
    # Row 0 and the look-ahead rows are exactly the target over the text followed by the look-ahead embeddings.
    text = torch.tensor([session.tokens[:-1]])
    alone = model(inputs_embeds=torch.cat([model.get_input_embeddings()(text), tokens.lookahead_embeddings[None]], 1)).logits[0]
    torch.testing.assert_close(step.logits, alone[len(PROMPT) - 1 :], rtol=0, atol=1e-9)
    assert kv.cache_length(session.cache) == len(session.tokens) - 1
    fresh = kv.forward(model, kv.new_cache(model), session.tokens).logits[-1]
    torch.testing.assert_close(kv.forward(model, session.cache, session.tokens[-1:]).logits[-1], fresh, rtol=0, atol=1e-9)


@torch.no_grad()
def test_a_fully_accepted_step_drafts_the_next_and_a_rejection_drafts_nothing(model):
    tokens = lookahead(model)
    drafter = PassDrafter(model.config.vocab_size, len(tokens))
    session = Session(model, PROMPT, forward=partial(kv.forward, embed=tokens.embed(model.get_input_embeddings())))
    drafter.start(PROMPT, session.prefill)
    step = session.step(drafter.propose(session.tokens, 3, Sampling(), None))
    drafter.observe(step)
    draft = drafter.propose(session.tokens, 2, Sampling(), None)  # a budget of 2: two drafts, two look-ahead rows
    assert draft.tokens[:2] == step.logits[1:3].argmax(-1).tolist() and draft.tokens[2:] == [16, 17]
    assert draft.auxiliary == 2 and draft.parents == [-1, 0, 1, 2]
    step = session.step(draft)
    drafter.observe(step)
    nothing = drafter.propose(session.tokens, 3, Sampling(), None)
    assert (nothing.proposed == 3) == (len(step.accepted) == 2)  # a rejection leaves only the drafting rows


@torch.no_grad()
def test_training_scores_each_lookahead_block_as_if_it_followed_its_position_alone(model):
    """PaSS's training appends blocks of look-ahead rows after several positions in one forward:
    each block's states are the target's over the text up to its position followed by the block,
    and its labels the target's greedy tokens 2.. after that position."""
    tokens = lookahead(model)
    text = torch.tensor([1, 2, 3, 4, 5, 6, 7, 8, 9])
    greedy = model(input_ids=text[None]).logits[0].argmax(-1)
    features = Features([text], [3], {}, [greedy])
    starts = [2, 5, 7]
    hidden, labels = PassFamily()._look_ahead(model, tokens, features, 0, starts)
    embed = model.get_input_embeddings()
    for b, t in enumerate(starts):
        rows = torch.cat([embed(text[: t + 1]), tokens.lookahead_embeddings], 0)[None]
        alone = model.model(inputs_embeds=rows).last_hidden_state[0, t + 1 :]
        torch.testing.assert_close(hidden[b * 3 : (b + 1) * 3], alone.float(), rtol=1e-6, atol=1e-6)
        want = [int(greedy[t + j]) if t + j < len(text) else -100 for j in (1, 2, 3)]
        assert labels[b * 3 : (b + 1) * 3].tolist() == want


def test_without_shipped_weights_both_methods_fail_in_one_line(model, tmp_path, monkeypatch):
    monkeypatch.setattr(checkpoints, "SHIPPED_HEADS", tmp_path)
    monkeypatch.setattr(model.config, "_name_or_path", EMBEDDED)
    for builder, family in ((heads.pass_tokens, "pass"), (heads.specdec_pp, "specdecpp")):
        with pytest.raises(HeadNotShipped, match=f"no trained {family} head is shipped yet; train one with "
                                                 f"`specatlas train {family}`"):
            builder(model)


class Acceptances:
    """A head whose predictions are given: the i-th call predicts `values[i]`."""

    def __init__(self, values):
        self.values, self.calls = list(values), 0

    def acceptance(self, states):
        self.calls += 1
        return torch.tensor(self.values[self.calls - 1])


@pytest.mark.parametrize("values, threshold, expected", [
    ([0.9, 0.9, 0.9, 0.9, 0.9, 0.9], 0.5, 5),  # 1 - 0.9^4 = 0.34 at the budget of 5: never above h
    ([0.3, 0.9, 0.9], 0.5, 2),  # never fewer than 2: the first judged token already tips it
    ([0.9, 0.6, 0.9], 0.4, 3),  # 1 - 0.9 * 0.6 = 0.46 > 0.4 once token 3 is drawn
])
def test_the_draft_stops_once_some_rejection_is_predicted_likelier_than_h(model, values, threshold, expected):
    """After drafting token n the head judges token n - 1 (its row came with the forward that drew
    token n); the draft ends when 1 - Π acceptance > h, at least 2 and at most the budget (5) long."""
    drafter = ModelDrafter(tiny_llama(seed=6, layers=1), stop=PredictedRejection(Acceptances(values), 1, threshold, 2))
    drafter.start(PROMPT, None)
    with torch.no_grad():
        assert len(drafter.propose(PROMPT, 5, Sampling(), None).tokens) == expected


# --------------------------------------------------------------------------------------------
# Exact output distributions (toy models, vocabulary 3)


TARGET, DRAFTER = ToyLM(seed=1), ToyLM(seed=2, sharpness=1.5)
TOY_PROMPT = [1, 2, 1]
SAMPLINGS = [Sampling(1.0), Sampling(0.6), Sampling(1.3, top_p=0.8)]


def pass_decoder(drafter_class=PassDrafter):
    # The toy target reads any id: the look-ahead ids past its vocabulary are tokens it has never seen.
    return SpeculativeDecoder(TARGET, drafter_class(VOCAB, 2), draft_length=FixedLength(2))


class Recording(PredictedRejection):
    lengths: set = set()

    def stop(self, drafted, states):
        stopped = super().stop(drafted, states)
        Recording.lengths.add(drafted if stopped else 0)
        return stopped


def specdec_decoder():
    head = randomise(AcceptanceHead(VOCAB, 1), 4)
    return SpeculativeDecoder(TARGET, ModelDrafter(DRAFTER, stop=Recording(head, ToyLM.LAYERS, 0.5, 2)),
                              draft_length=FixedLength(3))


@pytest.mark.parametrize("sampling", SAMPLINGS, ids=lambda s: f"T{s.temperature}-p{s.top_p}")
@pytest.mark.parametrize("name", ["pass", "specdec++"])
def test_output_distribution_equals_target(name, sampling):
    decoder = pass_decoder if name == "pass" else specdec_decoder
    Recording.lengths = set()
    got = enumerate_outputs(lambda rng: tuple(decoder().generate(TOY_PROMPT, 4, sampling, rng).tokens))
    worst = deviation(got, sequence_distribution(TARGET, TOY_PROMPT, 4, sampling))
    assert worst < 1e-6, f"{name}: max |P_decoder - P_target| = {worst:.2e}"
    if name == "specdec++":  # the rule both stopped a draft at 2 tokens and let one grow on
        assert {0, 2} <= Recording.lengths, Recording.lengths


class OffByOne(PassDrafter):
    """A planted bug: each draft recorded with another look-ahead row's distribution than the one it
    was drawn from (the rows' order rolled by one)."""

    def propose(self, context, depth, sampling, rng):
        draft = super().propose(context, depth, sampling, rng)
        if draft.q is not None:
            draft.q = draft.q.roll(1, 0)
        return draft


def test_a_draft_recorded_with_the_wrong_distribution_is_caught():
    sampling = SAMPLINGS[0]
    got = enumerate_outputs(lambda rng: tuple(pass_decoder(OffByOne).generate(TOY_PROMPT, 4, sampling, rng).tokens))
    worst = deviation(got, sequence_distribution(TARGET, TOY_PROMPT, 4, sampling))
    assert worst > 1e-2, f"the planted bug moved the distribution by only {worst:.2e}"
