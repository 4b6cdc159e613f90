"""The prompt corpora are data (tools/prompts/*.jsonl), and moving them there changed no prompt
and no order: the hashes were taken from the Python lists they replaced. Training data is cached
under a key of the corpus, and the shipped heads' model cards describe data made from it."""

import hashlib
import json

from specatlas.datastore import INSTRUCTIONS
from specatlas.train_prompts import PROMPTS


def digest(prompts: list[str]) -> str:
    return hashlib.sha256(json.dumps(prompts).encode()).hexdigest()


def test_training_prompts_are_the_ones_the_shipped_heads_were_trained_on():
    assert len(PROMPTS) == 263
    assert digest(PROMPTS) == "7e945692d8c592ad3468c438906e704a0cf455ea4135035500f393b10859abbd"


def test_datastore_instructions_are_unchanged():
    assert len(INSTRUCTIONS) == 64
    assert digest(INSTRUCTIONS) == "80bf386e48be9cf54e95c84feb18ebcec995a5d7b44315f0d8cfdc9a8c92466b"
