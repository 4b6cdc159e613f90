"""No file the project reads runs as code (issue 30): a pickle whose unpickling writes a marker
file is planted in every cache and checkpoint location read with torch.load or np.load, and a
model folder whose config names its own code (auto_map) is refused without --trust-remote-code,
never asking on standard input. The marker is never written; the user gets one line or a rebuild."""

import builtins
import json
import pickle
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from corpus import make_root, preload, run_cli

from specatlas.impls.drafters.self_drafting import layer_skip as self_speculative
from specatlas.impls.families import checkpoints
from specatlas.impls.engine import models
from specatlas.impls.engine.weight_storage import stored
from specatlas.impls.engine.errors import ModelLoadError
from specatlas.impls.families import training
from specatlas.impls.methods import heads as methods_heads
from specatlas.impls.methods import retrieval as methods_retrieval
from tests.impls.toy import tiny_llama

MARKER_NAME = "code-ran"


class Payload:
    """Unpickling this calls open(marker, "w"): the file's existence proves code ran."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return open, (str(self.marker), "w")


@pytest.fixture
def marker(tmp_path):
    path = tmp_path / MARKER_NAME
    yield path
    assert not path.exists(), "a planted pickle ran code"


def plant(path: Path, marker: Path, legacy: bool = False) -> Path:
    """A file at `path` that runs code when unpickled: torch's zip format, or a bare pickle."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if legacy:
        path.write_bytes(pickle.dumps({"module": Payload(marker)}))
    else:
        torch.save({"module": Payload(marker), "progress": Payload(marker)}, path)
    return path


def one_line(text: str) -> None:
    assert text.strip() and "\n" not in text.strip(), text


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")  # torch's note on the bare pickle's protocol
@pytest.mark.parametrize("legacy", [False, True], ids=["torch-zip", "bare-pickle"])
def test_a_planted_training_checkpoint_is_ignored_and_training_starts_over(tmp_path, marker, capsys, legacy):
    module = torch.nn.Linear(2, 2)
    optimizer = torch.optim.AdamW(module.parameters())
    checkpoint = plant(tmp_path / "medusa.ckpt", marker, legacy)
    assert training.resume(checkpoint, module, optimizer).step == 0
    err = capsys.readouterr().err
    one_line(err)
    assert "ignoring the training checkpoint" in err and str(checkpoint) in err


def test_the_training_checkpoint_the_project_writes_resumes_with_weights_only(tmp_path):
    module = torch.nn.Linear(2, 2)
    optimizer = torch.optim.AdamW(module.parameters())
    checkpoint = tmp_path / "medusa.ckpt"
    run = training.Run("medusa", 0, 3, checkpoint, {})
    state = training.train_loop(module, optimizer, lambda step, generator: torch.randn(4, 2, generator=generator),
                                lambda x: module(x).pow(2).mean(), run, 1.0)
    torch.load(checkpoint, weights_only=True)  # plain data only
    fresh = torch.nn.Linear(2, 2)
    resumed = training.resume(checkpoint, fresh, torch.optim.AdamW(fresh.parameters()))
    assert resumed.step == state.step == 3 and resumed.losses == state.losses
    # The checkpoint keeps full precision (a longer schedule resumes from it); the trained module is as it ships.
    assert torch.equal(stored(fresh).weight, module.weight)


def test_a_planted_training_data_shard_is_refused_in_one_line_without_unpickling(tmp_path, marker):
    from specatlas.impls.families.answers import ShardError, read_shard

    plant(tmp_path / "answers-00000.npz", marker)
    with pytest.raises(ShardError) as caught:
        read_shard(tmp_path / "answers-00000.npz", 100)
    one_line(str(caught.value))
    assert "answers-00000.npz" in str(caught.value)


@pytest.mark.parametrize("name", checkpoints.WEIGHT_FILES[2:])  # the pickle-based ones; safetensors hold no code
def test_planted_draft_checkpoint_weights_are_refused_in_one_line(tmp_path, marker, name):
    folder = tmp_path / "head"
    plant(folder / name, marker)
    (folder / "config.json").write_text(json.dumps({"medusa_num_heads": 2}))
    with pytest.raises(checkpoints.CheckpointError) as caught:
        checkpoints.load(folder, tiny_llama(3, layers=2))
    one_line(str(caught.value))
    assert name in str(caught.value)


def test_a_planted_fr_spec_ranking_is_refused_in_one_line(tmp_path, marker):
    plant(tmp_path / "freq_12.pt", marker)
    with pytest.raises(ModelLoadError) as caught:
        methods_heads.frequent_tokens(tmp_path, 12, is_shipped=False)
    one_line(str(caught.value))
    assert "freq_12.pt" in str(caught.value)


def test_a_datastore_with_a_pickled_array_is_refused_in_one_line(tmp_path, marker):
    path = tmp_path / "store.npz"
    np.savez(path, tokens=np.array([Payload(marker)], dtype=object), suffixes=np.arange(1),
             meta=np.array(json.dumps({"vocab_size": 3})))
    with pytest.raises(ModelLoadError) as caught:
        methods_retrieval.datastore_for(SimpleNamespace(config=SimpleNamespace(vocab_size=3)), path)
    one_line(str(caught.value))
    assert "store.npz" in str(caught.value)


def test_a_pickled_datastore_at_datastore_builds_output_is_inspected_without_unpickling(tmp_path, marker):
    """`datastore build --output` looks inside an existing file to see whether it wrote it."""
    from specatlas import datastore

    path = tmp_path / "ds.npz"
    np.savez(path, tokens=np.array([Payload(marker)], dtype=object), suffixes=np.arange(1), meta=np.array("{}"))
    datastore._earlier_output(path)  # names only: the object array is never loaded


def test_a_planted_draft_and_verify_search_is_searched_again(tmp_path, marker, monkeypatch, capsys):
    monkeypatch.setenv("SPECATLAS_CACHE", str(tmp_path / "cache"))
    model = tiny_llama(3, layers=6)
    monkeypatch.setattr(self_speculative, "calibration_prompts", lambda model, count: [[1, 2, 3]])
    monkeypatch.setattr(self_speculative, "search_skipped", lambda model, prompts, iterations: ([2, 4], 1.5))
    self_speculative.skipped_layers(model)  # writes the cache file, whose name is the model's identity
    (cached,) = (tmp_path / "cache" / "draft-and-verify").iterdir()
    for planted in (pickle.dumps(Payload(marker)), b'{"skipped": [0, 1, 2, 3, 4, 5, 99]}', b'{"skipped": "rm"}'):
        cached.write_bytes(planted)
        assert self_speculative.skipped_layers(model) == [2, 4]
        assert "ignoring the unreadable search result" in capsys.readouterr().err
        assert json.loads(cached.read_text())["skipped"] == [2, 4]


def test_a_model_cache_that_names_code_is_converted_again(tmp_path):
    folder = tmp_path / models.EMBEDDED
    folder.mkdir()
    for name in (*models._CACHE_FILES, "tokenizer.json"):
        (folder / name).write_text("{}")
    (folder / "config.json").write_text(json.dumps({"model_type": "llama", "auto_map": {"AutoModelForCausalLM": "x.Y"}}))
    header = json.dumps({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}).encode()
    (folder / "model.safetensors").write_bytes(len(header).to_bytes(8, "little") + header + b"\0" * 4)
    assert "auto_map" in models.cache_problem(folder)


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")
@pytest.mark.parametrize("name, legacy", [("pytorch_model.bin", False), ("pytorch_model.bin", True),
                                          ("pytorch_model-00001-of-00002.bin", False)])
def test_a_model_folder_with_planted_pickled_weights_is_refused_without_reading_them(tmp_path, marker, name, legacy):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "llama", "vocab_size": 16, "hidden_size": 8,
                                                    "num_hidden_layers": 1, "num_attention_heads": 2,
                                                    "intermediate_size": 16}))
    plant(folder / name, marker, legacy)
    with pytest.raises(ModelLoadError) as caught:
        models.load_model(str(folder), torch.device("cpu"), torch.float32)
    one_line(str(caught.value))
    assert str(folder) in str(caught.value) and "safetensors" in str(caught.value)


# A model folder with its own code ---------------------------------------------------------------

def remote_code_folder(tmp_path: Path, marker: Path, where: str = "config.json") -> Path:
    """A model folder whose `where` names code (auto_map) that writes the marker when imported."""
    folder = tmp_path / "model"
    folder.mkdir()
    # No model_type: without our refusal, transformers would ask whether to run evil.py.
    config = {"vocab_size": 16, "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2,
              "intermediate_size": 16}
    tokenizer = {"tokenizer_class": "PreTrainedTokenizerFast"}
    code = {"AutoConfig": "evil.EvilConfig", "AutoModelForCausalLM": "evil.EvilModel",
            "AutoTokenizer": ["evil.EvilTokenizer", None]}
    (config if where == "config.json" else tokenizer)["auto_map"] = code
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer))
    (folder / "evil.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    return folder


@pytest.mark.parametrize("where", ["config.json", "tokenizer_config.json"])
def test_a_model_folder_with_auto_map_is_refused_without_asking(tmp_path, marker, monkeypatch, where):
    folder = remote_code_folder(tmp_path, marker, where)

    def never(*args, **kwargs):
        raise AssertionError("something asked on standard input")

    monkeypatch.setattr(builtins, "input", never)
    monkeypatch.setattr(sys, "stdin", SimpleNamespace(read=never, readline=never, fileno=never))
    with pytest.raises(ModelLoadError) as caught:
        models.load_model(str(folder), torch.device("cpu"), torch.float32)
    message = str(caught.value)
    one_line(message)
    assert str(folder) in message and "--trust-remote-code" in message and where in message


@pytest.mark.parametrize("command", [["run", "pld", "--prompt", "hi"], ["bench", "baseline"],
                                     ["train", "medusa", "--output", "{tmp}/out"],
                                     ["datastore", "build", "{tmp}/corpus.txt", "--output", "{tmp}/ds.npz"]],
                         ids=lambda argv: argv[0])
def test_every_command_refuses_the_folder_in_one_line_with_a_yes_on_stdin(tmp_path, marker, command):
    preload()
    root = make_root(tmp_path)
    folder = remote_code_folder(tmp_path, marker)
    (tmp_path / "corpus.txt").write_text("text\n")
    (tmp_path / "yes").write_text("y\n" * 10)  # what a piped `yes` would answer transformers' question
    argv = [a.replace("{tmp}", str(tmp_path)) for a in command] + ["--model", str(folder)]
    code, out, err = run_cli(argv, root, tmp_path, 60, stdin=tmp_path / "yes")
    assert code not in (0, None) and "Traceback" not in out + err, out + err
    refusal = [line for line in err.splitlines() if "--trust-remote-code" in line]
    assert len(refusal) == 1 and str(folder) in refusal[0], err


def test_a_hub_model_with_its_own_code_is_refused_and_transformers_is_told_not_to_run_it(monkeypatch):
    import transformers

    calls = []

    def from_pretrained(source, **kwargs):
        calls.append(kwargs.get("trust_remote_code", "not passed"))
        raise ValueError("The repository org/custom contains custom code which must be executed to correctly load "
                         "the model. Please pass the argument `trust_remote_code=True` to allow custom code to be run.")

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", from_pretrained)
    with pytest.raises(ModelLoadError) as caught:
        models.load_model("org/custom", torch.device("cpu"), torch.float32)
    one_line(str(caught.value))
    assert "--trust-remote-code" in str(caught.value) and calls == [False]


@pytest.mark.parametrize("key, value", [("medusa_num_heads", 10**6), ("medusa_num_heads", "4"), ("draft_vocab_size", 10**9),
                                        ("intermediate_size", 10**8), ("num_hidden_layers", -1)])
def test_a_draft_checkpoints_sizes_are_bounded_before_anything_is_built(tmp_path, key, value):
    """A small config.json asking for a huge module is refused in one line, before allocating it."""
    from specatlas.impls.families.checkpoints import CheckpointError, load

    target = tiny_llama(0)
    folder = tmp_path / "head"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"medusa_num_heads": 4, "medusa_num_layers": 1, key: value}))
    with pytest.raises(CheckpointError, match=f"{key} = .* is not a size from 1 to"):
        load(folder, target)


def test_a_huge_checkpoint_config_is_refused_before_reading(tmp_path):
    from specatlas.impls.families.checkpoints import CheckpointError, load

    folder = tmp_path / "head"
    folder.mkdir()
    (folder / "config.json").write_text('{"pad": "' + "x" * (2 << 20) + '"}')
    with pytest.raises(CheckpointError, match="config.json"):
        load(folder, tiny_llama(0))
