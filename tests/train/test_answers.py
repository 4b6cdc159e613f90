"""Batched answer generation (continuous batching over one KV slab) and the shard files."""

from __future__ import annotations

import hashlib
import random

import numpy as np
import pytest
import torch
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from specatlas.impls.families.answers import GROUPED, Conversation, ShardError, generate, read_shard, write_shard
from tests.impls.toy import tiny_llama


def plain_greedy(model, prompt: list[int], tokens: int, stop: set[int]) -> list[int]:
    out = []
    with torch.no_grad():
        ids = torch.tensor([prompt])
        for _ in range(tokens):
            nxt = int(model(ids).logits[0, -1].argmax())
            out.append(nxt)
            if nxt in stop:
                break
            ids = torch.cat([ids, torch.tensor([[nxt]])], 1)
    return out


def test_every_answer_equals_plain_greedy_decoding_through_refills_and_compaction():
    # float64 and 30 prompts of 1-12 tokens through 4 rows: slots are refilled many times, and with
    # max_prompt 12 the slab (2 * 12 + 20 + 1 columns) is compacted repeatedly. The stop token is
    # one that ends some answers early, not all.
    model = tiny_llama(seed=3, layers=2, vocab=32)
    rng = random.Random(0)
    prompts = [[rng.randrange(1, 32) for _ in range(rng.randint(1, 12))] for _ in range(30)]
    free = [plain_greedy(model, prompt, 20, set()) for prompt in prompts]
    stop = {min(range(32), key=lambda t: abs(sum(t in answer[2:] for answer in free) - 15))}
    answers = {a.index: a for a in generate(model, prompts, 20, stop, rows=4, max_prompt=12)}
    assert sorted(answers) == list(range(30))
    for i, prompt in enumerate(prompts):
        expected = plain_greedy(model, prompt, 20, stop)
        assert answers[i].tokens == expected, i
        assert answers[i].finished == (expected[-1] in stop)
    assert any(a.finished for a in answers.values()) and not all(a.finished for a in answers.values())


def test_sampling_is_seeded():
    model = tiny_llama(seed=3, layers=2, vocab=32)
    prompts = [[1, 2, 3]] * 6

    def run(seed):
        return sorted((a.index, a.tokens) for a in generate(model, prompts, 8, set(), rows=3, temperature=1.0, seed=seed))

    assert run(1) == run(1) != run(2)


def test_the_grouped_attention_is_registered_only_while_a_generation_runs():
    """Nothing outlives a generation: its attention's name leaves transformers' process-wide table
    and the model attends as before."""
    model = tiny_llama(seed=3, layers=2, vocab=32)
    before = model.config._attn_implementation
    answers = generate(model, [[1, 2, 3]], 4, set(), rows=1)
    next(answers)
    assert GROUPED in ALL_ATTENTION_FUNCTIONS and model.config._attn_implementation == GROUPED
    list(answers)
    assert GROUPED not in ALL_ATTENTION_FUNCTIONS and model.config._attn_implementation == before


def test_a_shard_round_trips_and_a_damaged_one_is_refused_in_one_line(tmp_path):
    conversations = [Conversation("sharegpt:abc_0", "0" * 64, [], [5, 6, 7], True),
                     Conversation("project:train:3", "1" * 64, [1, 2], [60000, 2], False)]
    path = tmp_path / "answers-00000.npz"
    write_shard(path, conversations, vocab=65536)
    assert read_shard(path, 65536) == conversations
    assert np.load(path)["answers"].dtype == np.uint16

    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(ShardError, match="answers-00000.npz cannot be read") as error:
        read_shard(path, 65536)
    assert "\n" not in str(error.value)


def test_a_shard_with_an_object_array_is_refused_without_unpickling(tmp_path):
    path = tmp_path / "answers-00001.npz"
    np.savez(path, refs=np.array([{"x": 1}], dtype=object), prompt_sha=np.array(["a"]), prompts=np.zeros(0),
             prompt_offsets=np.zeros(2), answers=np.zeros(0), answer_offsets=np.zeros(2), finished=np.array([True]))
    with pytest.raises(ShardError, match="cannot be read"):
        read_shard(path, 65536)


def test_a_zip_bomb_shard_is_refused_by_its_stated_size_before_unpacking(tmp_path):
    import zipfile

    from specatlas.impls.families.answers import MAX_SHARD_BYTES

    path = tmp_path / "answers-00002.npz"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        with archive.open("answers.npy", "w", force_zip64=True) as member:
            zeros = bytes(1 << 20)
            for _ in range(MAX_SHARD_BYTES // len(zeros) + 1):
                member.write(zeros)
    assert path.stat().st_size < 1 << 20
    with pytest.raises(ShardError, match=f"unpacks to {MAX_SHARD_BYTES + (1 << 20):,} bytes; at most"):
        read_shard(path, 65536)


def test_token_ids_outside_the_vocabulary_and_a_changed_shard_are_refused(tmp_path):
    conversations = [Conversation("project:train:3", "1" * 64, [1, 2], [70, 2], False)]
    path = tmp_path / "answers-00000.npz"
    digest = hashlib.sha256(write_shard(path, conversations, vocab=100)).hexdigest()
    assert read_shard(path, 100, digest) == conversations
    with pytest.raises(ShardError, match="the answer of project:train:3 holds token id 70, outside the vocabulary of 64"):
        read_shard(path, 64)
    with pytest.raises(ShardError, match="does not match the hash in its manifest"):
        read_shard(path, 100, "0" * 64)
