"""LLMA, REST, SAM-Decoding and SuffixDecoding are lossless: exact output distributions on the toy model, greedy
output identical to the baseline on a real transformer. (On the embedded model, every registered
lossless method is checked by test_embedded_model.py.)"""

import json
import random

import pytest

from specatlas.cli import main
from specatlas.impls.engine.decoding import SpeculativeDecoder
from specatlas.impls.engine.draft_length import FixedLength
from specatlas.impls.drafters.model_free.retrieval import Datastore, ReferenceCopy, SuffixAutomatonDraft
from specatlas.impls.drafters.model_free.suffix_tree import SuffixDecoding
from specatlas.impls.engine.sampling import Randomness, Sampling

from .test_exact_distribution import PROMPT, SAMPLINGS
from .test_parallel_drafters import hot_recycling
from .test_retrieval_index import rest_tree
from .toy import VOCAB, ToyLM, enumerate_outputs, sequence_distribution, tiny_llama

METHODS = ["yang2023inference", "he2024rest", "hu2025sam", "hu2025sam + token recycling", "oliaro2025suffixdecoding"]


def drafters(vocab: int):
    rng = random.Random(vocab)
    store = Datastore([rng.randrange(vocab) for _ in range(200)])
    return {
        "yang2023inference": ReferenceCopy(),
        "he2024rest": rest_tree(store, lambda depth: 3 * depth),
        "hu2025sam": SuffixAutomatonDraft(store, bias=0),
        "hu2025sam + token recycling": SuffixAutomatonDraft(store, bias=0, auxiliary=hot_recycling(vocab), threshold=2),
        "oliaro2025suffixdecoding": SuffixDecoding(),
    }


@pytest.mark.parametrize("sampling", SAMPLINGS, ids=lambda s: f"T{s.temperature}-p{s.top_p}")
@pytest.mark.parametrize("method", METHODS)
def test_output_distribution_equals_target(method, sampling):
    target, length = ToyLM(seed=1), 3
    def run(rng):  # a fresh decoder for every enumerated run
        decoder = SpeculativeDecoder(target, drafters(VOCAB)[method], draft_length=FixedLength(2))
        return tuple(decoder.generate(PROMPT, length, sampling, rng).tokens)

    got = enumerate_outputs(run)
    want = sequence_distribution(target, PROMPT, length, sampling)
    worst = max(abs(got.get(seq, 0.0) - p) for seq, p in want.items())
    assert abs(sum(got.values()) - 1) < 1e-9 and worst < 1e-6, f"max |P_decoder - P_target| = {worst:.2e}"


def test_rest_drafts_trees_on_the_toy_model():
    """Guards the test above against REST degenerating to chains."""
    draft = drafters(VOCAB)["he2024rest"].propose(PROMPT, 2, Sampling(1.0), Randomness(0))
    assert draft.parents.count(-1) >= 2 and draft.depth == 2


@pytest.mark.parametrize("method", METHODS)
def test_greedy_output_equals_baseline(method):
    target = tiny_llama(seed=1)
    baseline = SpeculativeDecoder(target)
    decoder = SpeculativeDecoder(target, drafters(16)[method], draft_length=FixedLength(4))
    for prompt in ([1], [3, 3, 0], [2, 1, 2, 1, 2], [0, 1, 2, 3, 0, 1, 5, 7, 9, 0, 1]):
        assert decoder.generate(prompt, 16).tokens == baseline.generate(prompt, 16).tokens


@pytest.mark.model
@pytest.mark.parametrize("name", ["yang2023inference", "llma", "he2024rest", "rest", "hu2025sam", "sam-decoding",
                                  "oliaro2025suffixdecoding", "suffix-decoding"])
def test_specatlas_run_by_id_and_alias(name, capsys):
    assert main(["run", name, "--prompt", "Name three colors.", "--max-new-tokens", "6",
                 "--draft-length", "3", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["new_tokens"] == 6
