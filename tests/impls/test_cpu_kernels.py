"""Packed oneDNN linears compute what the default kernel does, and decoding through them stays
lossless (greedy output of every drafter equal to the baseline's on a real transformer)."""

import pytest
import torch

from specatlas.impls import cpu_kernels
from specatlas.impls.decoding import SpeculativeDecoder
from specatlas.impls.draft_length import FixedLength
from specatlas.impls.drafting import PromptLookup
from specatlas.impls.recycling import PAPER_TREE, TokenRecycling

from .toy import tiny_llama

pytestmark = pytest.mark.skipif(not cpu_kernels.available(), reason="this torch build has no oneDNN linear ops")


def float32_llama(seed: int):
    return tiny_llama(seed, vocab=64).to(torch.float32)


def test_packed_linears_agree_with_the_default_kernel_at_every_row_count():
    model = float32_llama(0)
    ids = torch.randint(0, 64, (1, 40))  # both kernels: 1-3 and 33+ rows default, 4-32 packed
    expected = [model(input_ids=ids[:, :rows]).logits for rows in range(1, 41)]
    assert cpu_kernels.pack_linears(model) == cpu_kernels.packed_layers(model) == 2 * 7 + 1
    assert cpu_kernels.pack_linears(model) == 0  # packing twice packs nothing more
    for rows, logits in zip(range(1, 41), expected):
        assert torch.allclose(model(input_ids=ids[:, :rows]).logits, logits, rtol=1e-4, atol=1e-5), rows


def test_only_float32_cpu_linears_are_packed():
    assert cpu_kernels.pack_linears(tiny_llama(0)) == 0  # float64


def test_decoding_through_packed_linears_stays_token_identical_to_the_baseline():
    model = float32_llama(1)
    cpu_kernels.pack_linears(model)
    baseline = SpeculativeDecoder(model)
    drafters = {"prompt lookup": PromptLookup(), "token recycling": TokenRecycling(PAPER_TREE)}
    for name, drafter in drafters.items():
        decoder = SpeculativeDecoder(model, drafter, draft_length=FixedLength(6))
        for prompt in ([1, 2, 3, 1, 2], [5, 9, 5, 9, 5, 9, 5], list(range(20))):
            assert decoder.generate(prompt, 24).tokens == baseline.generate(prompt, 24).tokens, name


def test_default_kernels_suspends_packing_inside_only():
    model = float32_llama(2)
    ids = torch.randint(0, 64, (1, 8))
    stock = model(input_ids=ids).logits
    cpu_kernels.pack_linears(model)
    # A packed head of zeros tells which path ran (the head has no bias).
    model.lm_head.packed_weight = torch.ops.mkldnn._reorder_linear_weight(torch.zeros_like(model.lm_head.weight), None)
    with cpu_kernels.default_kernels():
        assert torch.equal(model(input_ids=ids).logits, stock)
    assert not model(input_ids=ids).logits.any()
