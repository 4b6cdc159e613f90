"""The acceptance-vs-data curve's measurement: a head's paper method on held-out prompts."""

from __future__ import annotations

import pytest

from specatlas.impls.engine.models import LoadedModel
from specatlas.impls.families import FAMILIES
from specatlas.train_curve import paper_method_acceptance
from tests.impls.tiny_world import TinyWorld


@pytest.mark.parametrize("family", ["eagle", "eagle3", "medusa"])
def test_a_heads_paper_method_is_measured_and_checked_against_plain_decoding(tmp_path, family):
    world = TinyWorld(tmp_path)
    loaded = LoadedModel(world.target, None, "tiny")
    result = paper_method_acceptance(FAMILIES[family], loaded, world.heads[family], [[3, 5, 7], [9, 2, 4, 4]], 12)
    assert result["identical_to_plain"] and result["prompts"] == 2
    assert result["method"] == FAMILIES[family].paper
    assert 1.0 <= result["mean_accepted_tokens"] and result["steps"] >= 24 / 6  # at most 6 tokens a step here
