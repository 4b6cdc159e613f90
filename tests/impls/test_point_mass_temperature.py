"""A temperature so small that logits / T overflows (1e-40, a denormal) asks for a point mass on the
most likely token: each way of sampling gives exactly the greedy text, and the run says why."""

from __future__ import annotations

import pytest
import torch

from specatlas.impls.engine.draft_length import DraftLengthPolicy
from specatlas.impls.engine.sampling import POINT_MASS_BELOW, Randomness, Sampling
from specatlas.impls.registry import METHODS

from .test_every_method import NEW_TOKENS, PROMPTS, baseline  # noqa: F401 - a fixture

TINY = [1e-40, 5e-324, 1e-35]
# One method per way of sampling: plain decoding, a draft model's chain (rejection sampling), a
# token tree from a draft model (SpecInfer), drafts without a model (prompt lookup), a trained
# head's tree (EAGLE) and block verification. The greedy rule itself is tested on every method in
# test_every_method.py.
SAMPLERS = ["baseline", "leviathan2023fast", "miao2024specinfer", "saxena2023prompt", "li2024eagle", "sun2025block"]


@pytest.mark.parametrize("temperature", TINY)
def test_a_point_mass_temperature_is_greedy_and_says_so(temperature):
    sampling = Sampling(temperature, top_p=0.9, top_k=5)
    assert sampling.greedy and sampling == Sampling(0.0, 0.9, 5)
    assert sampling.describe() == "greedy" and f"{temperature:g}" in sampling.notice()
    logits = torch.tensor([[1.0, 3.0, -2.0, 3.0 - 1e-6], [0.5, -0.5, 0.0, 0.25]])
    assert sampling.probs(logits).tolist() == [[0, 1, 0, 0], [1, 0, 0, 0]]


def test_a_small_but_safe_temperature_still_samples():
    sampling = Sampling(POINT_MASS_BELOW)
    assert not sampling.greedy and sampling.notice() is None
    assert torch.isfinite(sampling.probs(torch.tensor([[30.0, -30.0, 29.0]]))).all()


@pytest.mark.parametrize("temperature", [float("nan"), float("inf"), -1e-40])
def test_an_unusable_temperature_is_refused(temperature):
    with pytest.raises(ValueError, match="temperature"):
        Sampling(temperature)


@pytest.mark.parametrize("method", SAMPLERS)
def test_each_way_of_sampling_decodes_a_point_mass_temperature_greedily(world, baseline, method):  # noqa: F811
    spec = METHODS[method]
    decoder = world.build(spec, DraftLengthPolicy.fixed(3))
    for prompt, want in zip(PROMPTS, baseline):
        output = decoder.generate(prompt, NEW_TOKENS, Sampling(1e-40), Randomness(7))
        assert output.tokens == want, f"{spec.id} at temperature 1e-40 is not the greedy text on {prompt}"
