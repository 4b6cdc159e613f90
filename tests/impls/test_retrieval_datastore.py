"""`specatlas datastore build --training-data` on tiny shards, and `--datastore` of `run` and `bench`
on a tiny random Llama: what the datastore holds (no held-out shard, no benchmark 8-gram), where it
goes, and how a run and a result row name it."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from specatlas import contamination, data_shards
from specatlas.bench.result_files import load
from specatlas.cli import main
from specatlas.data_shards import chosen_datastore, training_data_store
from specatlas.impls.drafters.model_free.retrieval import Datastore
from specatlas.impls.families.answers import Conversation, text_sha, write_shard
from specatlas.impls.methods.retrieval import DEFAULT_DATASTORE, datastore_for

from .test_retrieval_index import rest_tree
from .tiny_world import TOKENIZER_CHARACTERS, VOCAB, model_folder

EOS = "<unused0>"
EOS_ID = 1 + len(TOKENIZER_CHARACTERS)  # the first id after the characters (`model_folder`'s vocabulary)
PLANTED = "the quick brown fox jumps over the lazy dog"  # stands in for a benchmark's text


def ids(text: str) -> list[int]:
    return [1 + TOKENIZER_CHARACTERS.index(c) for c in text]


def text_of(tokens) -> str:
    return "".join(TOKENIZER_CHARACTERS[t - 1] if 0 < t <= len(TOKENIZER_CHARACTERS) else "|" for t in tokens)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """The tiny target as a `--model` folder whose tokenizer has an EOS token (the separator)."""
    from transformers import PreTrainedTokenizerFast

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SPECATLAS_PACKED_LINEARS", "0")
        folder = model_folder(tmp_path_factory.mktemp("model") / "tiny-random-llama")
        tokenizer = PreTrainedTokenizerFast.from_pretrained(folder)
        tokenizer.eos_token = EOS
        tokenizer.save_pretrained(folder)
        yield folder


@pytest.fixture
def place(tmp_path, monkeypatch, model):
    """A working folder holding `specatlas train-data`'s default folder for the tiny model, and a cache."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SPECATLAS_CACHE", str(tmp_path / "cache"))
    return data_shards.default_folder(str(model))


def write_data(folder, answers: list[list[str]]) -> list[dict]:
    """Answer shards, one per list of answers, each conversation's prompt "q<shard>.<i>"; the first shard is held out."""
    folder.mkdir(parents=True)
    entries = []
    for k, texts in enumerate(answers):
        conversations = [Conversation(f"project:test:{k}-{i}", text_sha(f"q{k}.{i}"), ids(f"q{k}.{i} "),
                                      ids(text) + [EOS_ID], True) for i, text in enumerate(texts)]
        name = f"answers-{k:05d}.npz"
        entries.append(data_shards.shard_entry(name, conversations, write_shard(folder / name, conversations, VOCAB)))
    (folder / "manifest.json").write_text(json.dumps({"magpie": [], "answers": entries}))
    return entries


def build(model, *extra) -> int:
    return main(["datastore", "build", "--training-data", "--model", str(model), *extra])


def test_the_training_data_datastore_holds_every_training_conversation_and_no_held_out_one(model, place, capsys):
    entries = write_data(place, [["held out answer"], ["first answer", "second one"], ["third answer"]])
    assert build(model) == 0
    path = training_data_store(str(model), place)
    assert path.parent == place.parent / "cache" / "datastores" and "-training-data-" in path.name
    assert chosen_datastore("training-data", str(model)) == path  # where --datastore training-data looks
    datastore = Datastore.load(path)
    documents = text_of(datastore.array).split("|")[:-1]  # EOS-separated, the answers' own EOS not doubled
    assert documents == ["q1.0 first answer", "q1.1 second one", "q2.0 third answer"]
    meta = datastore.meta
    assert meta["training_data"]["shards"] == ["answers-00001.npz", "answers-00002.npz"]
    assert meta["training_data"]["held_out_shards_left_out"] == ["answers-00000.npz"]
    assert meta["training_data"]["shard_sha256"] == [e["sha256"] for e in entries[1:]]
    assert meta["training_data"]["conversations"] == meta["documents"] == 3
    assert meta["tokens"] == len(datastore) == sum(len(d) + 1 for d in documents)
    assert meta["contamination"]["documents_checked"] == 3 and meta["contamination"]["documents_dropped"] == 0

    # --tokens: the training shards, in order, until they hold that many answer tokens; another file
    assert build(model, "--tokens", "5") == 0
    small = Datastore.load(training_data_store(str(model), place, 5))
    assert small.meta["training_data"]["shards"] == ["answers-00001.npz"] and small.meta["documents"] == 2


def test_a_document_holding_a_benchmark_8_gram_is_left_out_and_counted(model, place, tmp_path, monkeypatch):
    monkeypatch.setattr(contamination, "fingerprints",
                        lambda: (frozenset(), frozenset(contamination.gram_hashes(PLANTED))))
    write_data(place, [["held out"], ["a clean answer", f"so {PLANTED} again"], ["seven words are not eight words long ok"]])
    assert build(model, "--output", str(tmp_path / "ds.npz")) == 0
    datastore = Datastore.load(tmp_path / "ds.npz")
    assert "fox" not in text_of(datastore.array) and "clean answer" in text_of(datastore.array)
    report = datastore.meta["contamination"]
    assert report["documents_checked"] == 3 and report["documents_dropped"] == 1 and report["tokens_dropped"] > 40
    assert report["benchmarks"] == sorted(contamination.BENCHMARKS) and datastore.meta["documents"] == 2


def test_a_missing_training_data_datastore_names_the_command_that_builds_it(model, place, capsys):
    write_data(place, [["held out"], ["an answer"]])
    code = main(["run", "rest", "--model", str(model), "--prompt", "abc", "--datastore", "training-data"])
    err = capsys.readouterr().err.strip()
    assert code == 1 and "\n" not in err
    assert f"build it with `specatlas datastore build --training-data --model {model}`" in err


@pytest.mark.parametrize("content, message", [(None, "no datastore at"), (b"PK\x03\x04 truncated", "cannot be read")])
def test_a_missing_or_damaged_datastore_file_is_one_line(model, tmp_path, capsys, content, message):
    path = tmp_path / "store.npz"
    if content is not None:
        path.write_bytes(content)
    code = main(["run", "sam-decoding", "--model", str(model), "--prompt", "abc", "--datastore", str(path)])
    err = capsys.readouterr().err.strip()
    assert code == 1 and "\n" not in err and message in err and "store.npz" in err


def tiny_datastore(path, model) -> Datastore:
    Datastore.from_documents([ids("abc abc abc abc abd")] * 3, EOS_ID, {"model": str(model), "vocab_size": VOCAB}).save(path)
    return Datastore.load(path)


def test_run_names_the_chosen_datastore_and_its_size(model, tmp_path, capsys):
    size = len(tiny_datastore(tmp_path / "mine.npz", model))
    argv = ["run", "rest", "--model", str(model), "--prompt", "abc abc", "--max-new-tokens", "4", "--json",
            "--datastore", str(tmp_path / "mine.npz")]
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["drafter"] == f"REST retrieval tree (datastore of {size} tokens, mine.npz)"


def test_the_shipped_datastore_is_named_by_its_size_alone_as_before():
    shipped = datastore_for(SimpleNamespace(config=SimpleNamespace(vocab_size=49152)))
    assert shipped.path == DEFAULT_DATASTORE and shipped.label is None
    assert rest_tree(shipped, lambda depth: 8).describe() == f"REST retrieval tree (datastore of {len(shipped)} tokens)"


def test_bench_records_the_chosen_datastore_in_its_config_and_rows(model, tmp_path, monkeypatch):
    monkeypatch.setenv("SPECATLAS_CACHE", str(tmp_path / "cache"))
    size = len(tiny_datastore(tmp_path / "mine.npz", model))
    questions = tmp_path / "questions.jsonl"
    questions.write_text(json.dumps({"question_id": "1", "category": "qa", "turns": ["abc abc abc"]}) + "\n")
    out = tmp_path / "results"
    argv = ["bench", "rest", "sam-decoding", "--model", str(model), "--questions", str(questions), "--max-new-tokens", "4",
            "--draft-length", "paper", "--out", str(out), "--datastore", str(tmp_path / "mine.npz")]
    assert main(argv) == 0
    run = load(next(out.glob("*.json")))
    digest = run.config["datastore"]["sha256"]
    assert run.config["datastore"] == {"file": "mine.npz", "sha256": digest, "tokens": size} and len(digest) == 64
    rows = {m.id: m for m in run.methods}
    assert f"REST retrieval tree (datastore of {size} tokens, mine.npz)" in rows["he2024rest"].setup
    assert f"static index of {size} tokens, mine.npz" in rows["hu2025sam"].setup
    for row in ("he2024rest", "hu2025sam"):  # another datastore is another version of the row's trained files
        assert rows[row].weights == {"datastore mine.npz": digest} and rows[row].error is None
    assert run.provenance["arguments"]["datastore"] == "mine.npz"  # no machine's path


def test_bench_refuses_a_datastore_no_chosen_method_reads(tmp_path, capsys):
    assert main(["bench", "pld", "--datastore", str(tmp_path / "x.npz"), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "no chosen method reads a datastore" in err and "he2024rest" in err
