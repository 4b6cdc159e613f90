"""Reading a `specatlas train-data` folder for training: held-out shards, prefixes by tokens, damage."""

from __future__ import annotations

import json

import pytest

from specatlas import data_shards
from specatlas.cli import CommandError
from specatlas.impls.families.answers import Conversation, text_sha, write_shard


TOKENIZER = range(100)  # load reads only a tokenizer's length (its vocabulary) for project prompts


def make_folder(folder, shards: int = 4, per_shard: int = 3, answer: int = 10):
    folder.mkdir()
    entries = []
    for k in range(shards):
        conversations = [Conversation(f"project:train:{k}-{i}", text_sha(f"p{k}-{i}"), [1, 2, 3], [5] * answer, True)
                         for i in range(per_shard)]
        name = f"answers-{k:05d}.npz"
        entries.append(data_shards.shard_entry(name, conversations, write_shard(folder / name, conversations, 100)))
    (folder / "manifest.json").write_text(json.dumps({"magpie": [], "answers": entries}))
    return entries


def test_the_first_shard_is_held_out_and_tokens_choose_a_prefix_of_the_rest(tmp_path):
    entries = make_folder(tmp_path / "data")
    shards, held_out = data_shards.load(tmp_path / "data", tokenizer=TOKENIZER)
    assert held_out == 1 and [key for key, _ in shards] == [e["sha256"] for e in entries]
    shards, _ = data_shards.load(tmp_path / "data", tokenizer=TOKENIZER, tokens=31)  # 30 tokens per shard: two shards
    assert [key for key, _ in shards] == [e["sha256"] for e in entries[:3]]
    shards, _ = data_shards.load(tmp_path / "data", tokenizer=TOKENIZER, tokens=1)
    assert len(shards) == 2  # the held-out shard and one to train on


def test_all_the_data_is_pinned_as_a_token_count_that_selects_the_same_shards_after_more_are_built(tmp_path):
    """`specatlas train` without --tokens trains on every shard and its card names their answer
    tokens: once `train-data` has appended a shard, that count still selects the same ones."""
    entries = make_folder(tmp_path / "data")
    tokens = data_shards.training_tokens(tmp_path / "data")
    assert tokens == 90  # 3 training shards of 30 answer tokens; the held-out shard is not counted
    assert data_shards.selected(tmp_path / "data", tokens) == data_shards.selected(tmp_path / "data") == entries
    grown = make_folder(tmp_path / "grown", shards=5)
    assert data_shards.selected(tmp_path / "grown", tokens) == grown[:4] != data_shards.selected(tmp_path / "grown")


def test_a_changed_shard_or_too_little_data_is_refused_in_one_line(tmp_path):
    make_folder(tmp_path / "data")
    shard = tmp_path / "data" / "answers-00002.npz"
    shard.write_bytes(shard.read_bytes() + b"x")
    with pytest.raises(CommandError, match="answers-00002.npz does not match the hash in its manifest") as error:
        data_shards.load(tmp_path / "data", tokenizer=TOKENIZER)
    assert "\n" not in str(error.value)
    make_folder(tmp_path / "small", shards=1)
    with pytest.raises(CommandError, match="not enough training data"):
        data_shards.load(tmp_path / "small", tokenizer=TOKENIZER)


def test_a_third_party_prompt_missing_from_its_source_is_refused_in_one_line(tmp_path, monkeypatch):
    from specatlas import prompt_pool

    folder = tmp_path / "data"
    make_folder(folder, shards=2)
    conversations = [Conversation("sharegpt:gone_0", text_sha("a prompt"), [], [5, 6], True)]
    entry = data_shards.shard_entry("answers-00002.npz", conversations,
                                   write_shard(folder / "answers-00002.npz", conversations, 100))
    manifest = json.loads((folder / "manifest.json").read_text())
    (folder / "manifest.json").write_text(json.dumps(manifest | {"answers": manifest["answers"] + [entry]}))
    monkeypatch.setattr(prompt_pool, "sharegpt", lambda: [prompt_pool.PoolPrompt("sharegpt:gone_0", "another text")])
    with pytest.raises(CommandError, match="the prompt sharegpt:gone_0 is not in the installed sharegpt data"):
        data_shards.load(folder, tokenizer=TOKENIZER)


def test_a_shard_with_token_ids_outside_the_vocabulary_is_named(tmp_path):
    make_folder(tmp_path / "data")
    with pytest.raises(CommandError, match=r"answers-00000.npz: the prompt of project:train:0-0 holds token id 3, "
                                           r"outside the vocabulary of 3"):
        data_shards.load(tmp_path / "data", tokenizer=range(3))
