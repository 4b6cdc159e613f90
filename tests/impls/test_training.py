"""The training pipeline end to end on a tiny random Llama: data, features, training, resume, checkpoint."""

import json

import pytest
import torch

from specatlas.impls import training
from specatlas.impls.checkpoints import load
from specatlas.impls.models import LoadedModel
from tests.impls.toy import tiny_llama


class Tokenizer:
    """Enough of a tokenizer for `generate`: no chat template, ids from characters."""

    chat_template = None
    pad_token_id, eos_token_id = 0, 15

    def __call__(self, text):
        return type("Encoded", (), {"input_ids": [1 + ord(ch) % 13 for ch in text]})()


@pytest.fixture(scope="module")
def loaded():
    model = tiny_llama(3, layers=6).float()
    model.generation_config.eos_token_id = 15
    return LoadedModel(model, Tokenizer(), "tiny")


PROMPTS = ["abc", "hello there", "what is up", "a longer prompt here", "xyz", "more text to answer", "q", "zz top"]


def test_data_is_the_targets_greedy_answers_and_is_cached(tmp_path, loaded):
    records = training.generate(loaded, PROMPTS, tmp_path, max_new_tokens=12, batch_size=3)
    assert [r["id"] for r in records] == list(range(len(PROMPTS)))
    for record in records[:3]:  # each answer is plain greedy decoding of its prompt
        ids = torch.tensor([record["prompt"]])
        out = loaded.model.generate(input_ids=ids, max_new_tokens=12, do_sample=False, pad_token_id=0)
        expected = out[0, ids.shape[1]:].tolist()
        end = next((i + 1 for i, t in enumerate(expected) if t == 15), len(expected))
        assert record["response"] == expected[:end]
    lines = (tmp_path / "responses.jsonl").read_text().splitlines()
    assert len(lines) == len(PROMPTS)
    assert training.generate(loaded, PROMPTS, tmp_path, 12, 3) == records  # read back, nothing regenerated
    assert len((tmp_path / "responses.jsonl").read_text().splitlines()) == len(PROMPTS)

    features = training.extract(loaded, records, (2, 6), tmp_path)
    record = records[1]
    tokens = torch.tensor([record["prompt"] + record["response"]])
    out = loaded.model(input_ids=tokens, output_hidden_states=True)
    torch.testing.assert_close(features.hidden[6][1].float(), out.hidden_states[6][0], atol=2e-3, rtol=1e-2)
    assert features.greedy[1].tolist() == out.logits[0].argmax(-1).tolist()
    assert (tmp_path / "features-2-6.pt").exists()


@pytest.mark.parametrize("family", ["medusa", "eagle"])
def test_training_resumes_and_writes_a_loadable_published_checkpoint(tmp_path, loaded, family):
    records = training.generate(loaded, PROMPTS, tmp_path, max_new_tokens=12, batch_size=4)
    trainer = training.FAMILIES[family]
    features = training.extract(loaded, records, trainer.layers(loaded.model), tmp_path)
    output = tmp_path / "out"
    summary = trainer.train(loaded, features, tmp_path, output, 5.0, 6, 0, "specatlas train x", None)
    assert "6 steps" in summary
    card = json.loads((output / "training.json").read_text())
    assert card["steps"] == 6 and card["held_out"]["positions"] > 0
    assert (output / "README.md").read_text().count("specatlas train x") == 1
    # Resuming with a larger step budget continues from step 6, not from scratch.
    trainer.train(loaded, features, tmp_path, output, 5.0, 9, 0, "specatlas train x", None)
    assert json.loads((output / "training.json").read_text())["steps"] == 9
    ckpt = load(output, loaded.model, "tiny")
    assert ckpt.family == family
