"""Medusa, Hydra, EAGLE, EAGLE-2, EAGLE-3, FR-Spec and ReDrafter drafters: exact output distribution on the toy
model with tiny heads, typical acceptance held to its own rule, greedy identity on the embedded model."""

import pytest
import torch

from specatlas.impls.engine.decoding import SpeculativeDecoder
from specatlas.impls.engine.draft_length import DraftLengthPolicy, FixedLength
from specatlas.impls.engine.drafting import Draft
from specatlas.impls.families.eagle import EagleDrafter, EagleHead
from specatlas.impls.families.eagle3 import Eagle3Drafter, Eagle3Head
from specatlas.impls.families.hydra import HydraDrafter, HydraHeads
from specatlas.impls.families.medusa import MedusaDrafter, MedusaHeads
from specatlas.impls.families.redrafter import RecurrentDrafter, ReDrafterDrafter
from specatlas.impls.families.blocks import LayerConfig
from specatlas.impls.methods.heads import BLOCKWISE_CHAIN
from specatlas.impls.engine.verification import TopKAcceptance, TypicalAcceptance
from specatlas.impls.engine.sampling import Randomness, Sampling
from specatlas.impls.engine.verification import RejectionSampling

from .toy import VOCAB, ToyLM, enumerate_outputs, sequence_distribution

PROMPT = [1, 2, 1]
KINDS = ["medusa", "blockwise", "hydra", "eagle", "eagle2", "eagle3", "fr-spec", "redrafter", "redrafter-d2t"]
SMALL_TREE = ((0,), (1,), (0, 0), (0, 1), (1, 0))


def random_(module, seed):
    generator = torch.Generator().manual_seed(seed)
    for parameter in module.parameters():
        parameter.data = torch.randn(parameter.shape, generator=generator, dtype=torch.float64) * 0.5
    return module.double().eval()


def toy_drafter(kind):
    generator = torch.Generator().manual_seed(7)
    lm_head = torch.randn(VOCAB, VOCAB, generator=generator, dtype=torch.float64)
    if kind == "medusa":
        return MedusaDrafter(random_(MedusaHeads(VOCAB, 2), 1), lm_head, ToyLM.LAYERS, tree=((0,), (1,), (0, 0), (0, 1)))
    if kind == "blockwise":
        return MedusaDrafter(random_(MedusaHeads(VOCAB, 4), 1), lm_head, ToyLM.LAYERS, tree=BLOCKWISE_CHAIN)
    config = LayerConfig(hidden_size=VOCAB, intermediate_size=8, num_attention_heads=2, num_key_value_heads=1,
                         head_dim=2, rms_norm_eps=1e-6, rope_theta=10000.0)
    embed = torch.randn(VOCAB, VOCAB, generator=generator, dtype=torch.float64)
    if kind == "redrafter":  # 4 beams of 3 drafts: a tree of up to 12 nodes
        return ReDrafterDrafter(random_(RecurrentDrafter(VOCAB, VOCAB, 1), 8), embed, ToyLM.LAYERS, width=4, length=4)
    if kind == "redrafter-d2t":  # the layout `specatlas train` writes: draft ids 0, 1 are target tokens 0, 2
        head = random_(RecurrentDrafter(VOCAB, VOCAB, 1, exit_dim=VOCAB, draft_vocab_size=2), 8)
        head.d2t.copy_(torch.tensor([0, 1]))
        return ReDrafterDrafter(head, embed, ToyLM.LAYERS, width=4, length=4)
    if kind == "hydra":
        return HydraDrafter(random_(HydraHeads(VOCAB, 2), 3), embed, lm_head, ToyLM.LAYERS, tree=SMALL_TREE)
    if kind == "eagle3":
        head = random_(Eagle3Head(config, VOCAB, VOCAB, 2), 4)
        head.d2t.copy_(torch.tensor([0, 1]))  # draft ids 0, 1 are target tokens 0, 2
        head.t2d.copy_(torch.tensor([True, False, True]))
        return Eagle3Drafter(head, embed, (0, 1, ToyLM.LAYERS), dynamic=(4, 3, 2))
    head = random_(EagleHead(config), 2)
    if kind == "eagle":
        return EagleDrafter(head, embed, lm_head, ToyLM.LAYERS, tree=((0,), (1,), (0, 0), (1, 0), (0, 0, 0)))
    vocabulary = torch.tensor([2, 0]) if kind == "fr-spec" else None  # FR-Spec: token 1 is never drafted
    return EagleDrafter(head, embed, lm_head, ToyLM.LAYERS, tree=None, dynamic=(4, 3, 2), vocabulary=vocabulary)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("sampling", [Sampling(1.0), Sampling(0.7, top_p=0.9)], ids=str)
def test_head_drafters_with_rejection_sampling_keep_the_targets_distribution(kind, sampling):
    target, length = ToyLM(seed=5), 3
    drafted = []

    def run(rng):
        decoder = SpeculativeDecoder(target, toy_drafter(kind), sampling_verifier=RejectionSampling(),
                                     draft_length=FixedLength(3))
        output = decoder.generate(PROMPT, length, sampling, rng)
        drafted.append(sum(output.stats.drafted_at))
        return tuple(output.tokens)

    got = enumerate_outputs(run)
    want = sequence_distribution(target, PROMPT, length, sampling)
    worst = max(abs(got.get(seq, 0.0) - p) for seq, p in want.items())
    assert abs(sum(got.values()) - 1) < 1e-9 and worst < 1e-6, f"max |P_decoder - P_target| = {worst:.2e}"
    assert all(drafted), "every run drafted"


@pytest.mark.parametrize("kind", KINDS)
def test_head_drafters_greedy_equals_target_greedy_on_toy(kind):
    target = ToyLM(seed=6)
    want = SpeculativeDecoder(target).generate(PROMPT, 8).tokens
    output = SpeculativeDecoder(target, toy_drafter(kind), draft_length=FixedLength(3)).generate(PROMPT, 8)
    assert output.tokens == want and sum(output.stats.drafted_at) > 0


def proposals(kind, length=4):
    """Every draft `kind`'s drafter proposes while decoding the toy target."""
    drafter, seen = toy_drafter(kind), []
    original = drafter.propose

    def propose(*args):
        seen.append(original(*args))
        return seen[-1]

    drafter.propose = propose
    SpeculativeDecoder(ToyLM(seed=5), drafter, draft_length=FixedLength(3)).generate(PROMPT, length)
    return drafter, seen


@pytest.mark.parametrize("kind", ["eagle3", "fr-spec", "redrafter-d2t"])
def test_a_draft_vocabulary_bounds_every_drafted_token(kind):
    drafter, seen = proposals(kind)
    assert sum(len(draft.tokens) for draft in seen) > 0
    assert {token for draft in seen for token in draft.tokens} == {0, 2}  # both, mapped to target ids
    vocabulary = drafter.heads.to_target(torch.arange(2)) if kind == "redrafter-d2t" else drafter.vocabulary
    assert vocabulary.tolist() in ([0, 2], [2, 0])


def test_hydra_ranks_each_branch_after_its_own_tokens():
    """Node (i, j) is the j-th candidate of head 2 given (h, E(pending), E(node i's token)): branches
    with different first tokens get their own candidates (Medusa's would share them)."""
    drafter = toy_drafter("hydra")
    hidden = ToyLM(seed=5).hidden(ToyLM.LAYERS, tuple(PROMPT[:-1]))
    drafter.state = hidden  # as `start` sets it: the state whose logits chose the pending PROMPT[-1]
    draft = drafter.propose(PROMPT, 2, Sampling(), Randomness(0))
    heads, embed = drafter.heads, drafter.embed_weight

    def ranked(k, tokens):
        logits = heads.logits(k, heads.features(k, hidden, embed[tokens]), drafter.lm_head_weight)
        return logits.argsort(descending=True).tolist()

    first = ranked(0, [PROMPT[-1]])
    assert draft.tokens[:2] == first[:2] and draft.parents == [-1, -1, 0, 0, 1]
    assert draft.tokens[2:4] == ranked(1, [PROMPT[-1], first[0]])[:2]
    assert draft.tokens[4] == ranked(1, [PROMPT[-1], first[1]])[0]


def test_redrafter_beam_search_ranks_whole_beams_and_merges_their_prefixes():
    """A width holding every sequence keeps them all, ranked by the sum of the head's
    log-probabilities along the beam (its RNN state advanced by each token, from the pending one):
    the recurrence and the scores, computed here from the weights. A narrower search's tree holds
    each prefix of its beams exactly once (dynamic tree attention)."""
    drafter = toy_drafter("redrafter")
    hidden = ToyLM(seed=5).hidden(ToyLM.LAYERS, tuple(PROMPT[:-1]))
    drafter.state = hidden
    weights, embed = drafter.heads.state_dict(), drafter.embed_weight
    linear, silu = torch.nn.functional.linear, torch.nn.functional.silu

    def score(beam):
        state, total = torch.zeros(VOCAB, dtype=torch.float64), 0.0
        for previous, token in zip([PROMPT[-1], *beam], beam):
            state = silu(linear(state, weights["rnn_u.weight"], weights["rnn_u.bias"]) + linear(embed[previous], weights["rnn_w.weight"]))
            x = torch.cat([hidden, state])
            x = x + silu(linear(x, weights["lm_head.0.linear.weight"], weights["lm_head.0.linear.bias"]))
            total += linear(x, weights["lm_head.1.weight"]).log_softmax(-1)[token].item()
        return total

    drafter.width = VOCAB ** 3
    every = [(a, b, c) for a in range(VOCAB) for b in range(VOCAB) for c in range(VOCAB)]
    assert [tuple(beam) for beam in drafter.beam_search(PROMPT[-1], 3).tolist()] == sorted(every, key=score, reverse=True)

    drafter.width = 4
    beams = {tuple(beam) for beam in drafter.beam_search(PROMPT[-1], 3).tolist()}
    draft = drafter.propose(PROMPT, 3, Sampling(), Randomness(0))
    paths = []
    for node, parent in enumerate(draft.parents):
        assert parent < node
        paths.append((paths[parent] if parent >= 0 else ()) + (draft.tokens[node],))
    assert len(beams) == 4 and sorted(paths) == sorted({beam[:k] for beam in beams for k in (1, 2, 3)})


@pytest.mark.parametrize("kind", ["eagle2", "eagle3", "fr-spec"])
def test_dynamic_tree_is_a_tree_of_the_best_nodes(kind):
    for draft in proposals(kind)[1]:
        assert 0 < len(draft.tokens) <= 4 and all(parent < node for node, parent in enumerate(draft.parents))
        siblings = {}
        for token, parent in zip(draft.tokens, draft.parents):
            assert token not in siblings.setdefault(parent, set())  # distinct candidates per parent
            siblings[parent].add(token)


def test_typical_acceptance_keeps_exactly_the_plausible_longest_path():
    verifier = TypicalAcceptance(epsilon=0.09, delta=0.3)
    logits = torch.tensor([[4.0, 3.9, -5.0, -5.0],   # row 0: tokens 0, 1 plausible
                           [-5.0, -5.0, 5.0, -5.0],  # after node 0 (token 0): token 2
                           [-5.0, 4.0, 4.0, 4.0],    # after node 1 (token 1): 1, 2, 3 plausible
                           [0.0, 0.0, 0.0, 0.0],     # after node 2
                           [0.0, 0.0, 0.0, 0.0],     # after node 3
                           [5.0, -5.0, -5.0, -5.0]])  # after node 4
    # Nodes: 0 = token 0, 1 = token 1 (root children); 2 = token 3 after 0 (implausible there);
    # 3 = token 2 after 1; 4 = token 3 after 3... (parent 3)
    draft = Draft(tokens=[0, 1, 3, 2, 3], parents=[-1, -1, 0, 1, 3])
    sampling = Sampling(1.0)
    p = sampling.probs(logits)
    accepted, token = verifier.verify(draft, logits, sampling, Randomness(0), 10)
    assert accepted == [1, 3, 4]  # the longest path whose every token clears min(eps, delta * exp(-H))
    thresholds = verifier.thresholds(p)
    assert all(p[draft.parents[n] + 1, draft.tokens[n]] > thresholds[draft.parents[n] + 1] for n in accepted)
    assert p[5, token] > thresholds[5]  # the next token is never an implausible one
    assert verifier.relaxed


def test_typical_acceptance_is_greedy_match_when_greedy():
    logits = torch.tensor([[1.0, 2.0, 0.0], [3.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    accepted, token = TypicalAcceptance().verify(Draft.chain([1, 0]), logits, Sampling(), Randomness(0), 0)
    assert accepted == [0, 1] and token == 2


def test_the_deciding_verifier_says_whether_acceptance_is_relaxed():
    # `specatlas run` labels a relaxed run from this: Medusa's sampling, blockwise's top-k.
    decoder = SpeculativeDecoder(ToyLM(seed=5), sampling_verifier=TypicalAcceptance(), greedy_verifier=TopKAcceptance(2))
    assert decoder.verifier(Sampling(1.0)).relaxed and decoder.verifier(Sampling()).relaxed
    assert not SpeculativeDecoder(ToyLM(seed=5)).verifier(Sampling(1.0)).relaxed
    assert not SpeculativeDecoder(ToyLM(seed=5)).verifier(Sampling()).relaxed


def test_top_k_acceptance_keeps_drafts_in_the_targets_top_k():
    logits = torch.tensor([[3.0, 2.0, 1.0, 0.0], [0.0, 1.0, 3.0, 2.0], [0.0, 0.0, 0.0, 5.0], [1.0, 0.0, 0.0, 0.0]])
    draft = Draft.chain([1, 3, 0])  # 1: 2nd best at row 0; 3: 2nd best at row 1; 0: not in row 2's top 2
    assert TopKAcceptance(2).verify(draft, logits, Sampling(), Randomness(0), 0) == ([0, 1], 3)
    assert TopKAcceptance(1).verify(draft, logits, Sampling(), Randomness(0), 0) == ([], 0)


# --------------------------------------------------------------------------------------------
# The embedded model


@pytest.mark.model
@pytest.mark.full
@pytest.mark.parametrize("method", ["medusa", "hydra", "eagle", "eagle2", "eagle3", "fr_spec", "redrafter"])
def test_greedy_identity_on_the_embedded_model_with_any_head(embedded, tmp_path, method):
    """Lossless whatever the head's quality: random heads saved in the published layout."""
    from specatlas.impls.methods import heads as methods_heads
    from specatlas.impls.families import FAMILIES
    from specatlas.impls.engine.models import encode_chat, eos_ids

    model = embedded.model
    family = {"eagle2": "eagle", "fr_spec": "eagle"}.get(method, method)
    config = LayerConfig.from_dict(model.config.to_dict())
    head = {"medusa": lambda: MedusaHeads(config.hidden_size, 4), "hydra": lambda: HydraHeads(config.hidden_size, 4),
            "eagle": lambda: EagleHead(config),
            "eagle3": lambda: Eagle3Head(config, config.hidden_size, model.config.vocab_size, 4096),
            "redrafter": lambda: FAMILIES["redrafter"].head(config.hidden_size, model.config.vocab_size,
                                                            torch.arange(0, model.config.vocab_size, 12))}[family]()
    generator = torch.Generator().manual_seed(0)
    for parameter in head.parameters():
        parameter.data = torch.randn(parameter.shape, generator=generator) * 0.02
    FAMILIES[family].save(head, tmp_path, model, "smollm2-135m-instruct")
    if method == "fr_spec":  # every fourth token id stands in for the frequency ranking
        torch.save(list(range(0, model.config.vocab_size, 4)), tmp_path / f"freq_{model.config.vocab_size // 4}.pt")
    decoder = getattr(methods_heads, method)(model, policy=DraftLengthPolicy.fixed(3), drafter_checkpoint=tmp_path)
    baseline = SpeculativeDecoder(model)
    stop = eos_ids(model, embedded.tokenizer)
    for prompt in ["List three colours.", "Write a haiku about rain."]:
        ids = encode_chat(embedded.tokenizer, prompt)
        output = decoder.generate(ids, 32, stop=stop)
        assert output.tokens == baseline.generate(ids, 32, stop=stop).tokens, f"{method} diverged on {prompt!r}"
        assert sum(output.stats.drafted_at) > 0


@pytest.mark.model
@pytest.mark.full
def test_medusa_with_its_shipped_heads_is_greedy_identical(embedded):
    """Medusa is registered as not lossless (typical acceptance when sampling); greedy it is exact.
    The lossless head methods are covered by test_embedded_model.py with their shipped heads."""
    from specatlas.impls.registry import METHODS
    from specatlas.impls.engine.models import encode_chat, eos_ids

    from .test_embedded_model import NEW_TOKENS, PROMPTS

    model, stop = embedded.model, eos_ids(embedded.model, embedded.tokenizer)
    decoder, baseline = METHODS["cai2024medusa"].build(model), SpeculativeDecoder(model)
    for prompt in PROMPTS:
        ids = encode_chat(embedded.tokenizer, prompt)
        output = decoder.generate(ids, NEW_TOKENS, stop=stop)
        assert output.tokens == baseline.generate(ids, NEW_TOKENS, stop=stop).tokens, prompt
        assert output.stats.mean_accepted > 1
