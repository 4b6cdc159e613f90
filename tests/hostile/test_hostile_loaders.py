"""Hostile files the loaders read without a command line (issue 30), as tables of cases: draft
checkpoints (sizes, offsets, weights), training checkpoints and cached target states (damaged,
truncated, wrong dtype or shape, placed files), and `--model` folders (oversized or lying
config.json, damaged tokenizer files). Each is refused in one line that names the file, or healed:
a damaged cache entry is named, ignored and rebuilt. Nothing allocates what a small file asks for."""

import json
import os
import resource
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from specatlas.impls.families.checkpoints import CheckpointError, load
from specatlas.impls.engine.errors import ModelLoadError
from specatlas.impls.engine.models import load_model
from specatlas.impls.families import training
from specatlas.impls.families.answers import Conversation
from tests.impls.test_checkpoints import (H, HYDRA_CONFIG, V, eagle1_weights, eagle3_weights, hydra_weights,
                                          llama_config, medusa_weights, write)
from tests.impls.toy import tiny_llama


@pytest.fixture(scope="module")
def target():
    return tiny_llama(0, layers=6).float()


@pytest.fixture(autouse=True)
def bounded_memory():
    """Whatever a case asks for, this process may grow by 2 GiB at most: an allocation a config
    asked for fails the test instead of the machine."""
    before = resource.getrlimit(resource.RLIMIT_AS)
    with open("/proc/self/statm") as f:
        used = int(f.read().split()[0]) * resource.getpagesize()
    resource.setrlimit(resource.RLIMIT_AS, (used + (2 << 30), before[1]))
    yield
    resource.setrlimit(resource.RLIMIT_AS, before)


def one_line(text: str) -> None:
    assert text.strip() and "\n" not in text.strip(), text


# Draft checkpoints -------------------------------------------------------------------------------

def e3(**config):
    return llama_config(draft_vocab_size=8, target_hidden_size=H) | config


def d2t_at(index: int, offset: int) -> dict:
    weights = eagle3_weights()
    weights["d2t"] = weights["d2t"].clone()
    weights["d2t"][index] = offset
    return weights


def vllm(weights: dict) -> dict:
    """vLLM's renames of an EAGLE-3 checkpoint: layers.0., draft_id_to_target_id, no t2d."""
    out = {("layers.0." + k[len("midlayer."):] if k.startswith("midlayer.") else k): v
           for k, v in weights.items() if k != "t2d"}
    out["draft_id_to_target_id"] = out.pop("d2t")
    return {"model." + k: v for k, v in out.items()}


def medusa(**config):
    return {"medusa_num_heads": 3, "medusa_num_layers": 1} | config


def replaced(weights: dict, **values) -> dict:
    return weights | {key.replace("__", "."): value for key, value in values.items()}


# (name, config, weights, what the one-line refusal says)
CHECKPOINTS = [
    ("eagle3-d2t-past-the-vocabulary", e3(), d2t_at(7, 100), "d2t maps draft ids outside the target's vocabulary"),
    ("eagle3-d2t-negative-target", e3(), d2t_at(7, -20), "d2t maps draft ids outside"),
    ("eagle3-d2t-two-drafts-one-target", e3(), d2t_at(7, -3), "onto the same target id twice"),
    ("eagle3-d2t-fractional", e3(), replaced(eagle3_weights(), d2t=eagle3_weights()["d2t"].float() + 0.5),
     "d2t must be 8 whole-number offsets"),
    ("eagle3-d2t-wrong-length", e3(), replaced(eagle3_weights(), d2t=torch.zeros(5, dtype=torch.long)),
     "d2t must be 8 whole-number offsets"),
    ("eagle3-t2d-disagrees-with-d2t", e3(), replaced(eagle3_weights(), t2d=torch.zeros(V, dtype=torch.bool)),
     "t2d does not mark the 8 target ids"),
    ("vllm-eagle3-d2t-past-the-vocabulary", llama_config(draft_vocab_size=8), vllm(d2t_at(7, 100)), "d2t maps"),
    ("vllm-eagle3-vocabulary-of-10-billion", llama_config(draft_vocab_size=8) | {"vocab_size": 10**10},
     vllm(eagle3_weights()), "trained for a vocabulary of 10000000000"),
    ("vllm-eagle3-vocabulary-as-text", llama_config(draft_vocab_size=8) | {"vocab_size": "16"},
     vllm(eagle3_weights()), "trained for a vocabulary of '16'"),
    ("eagle3-vocabulary-of-a-billion-without-draft-size",
     {k: v for k, v in e3().items() if k != "draft_vocab_size"} | {"vocab_size": 10**9}, eagle3_weights(),
     "trained for a vocabulary of 1000000000"),
    ("eagle3-hidden-size-a-million", e3(hidden_size=10**6), eagle3_weights(), "hidden size 1000000, the target 32"),
    ("eagle3-target-hidden-size-as-text", e3(target_hidden_size="32"), eagle3_weights(), "target hidden size '32'"),
    ("eagle3-aux-layer-past-the-target", e3(eagle_aux_hidden_state_layer_ids=[1, 3, 99]), eagle3_weights(),
     "is not 3 target states from 0 to 6"),
    ("eagle3-aux-layer-negative", e3(eagle_aux_hidden_state_layer_ids=[-1, 3, 4]), eagle3_weights(), "from 0 to 6"),
    ("eagle3-aux-layers-as-text", e3(eagle_aux_hidden_state_layer_ids="abc"), eagle3_weights(), "'abc'"),
    ("eagle3-two-aux-layers", e3(eagle_aux_hidden_state_layer_ids=[1, 2]), eagle3_weights(), "is not 3 target states"),
    ("eagle3-nan-weights", e3(), replaced(eagle3_weights(), fc__weight=torch.full((H, 3 * H), float("nan"))),
     "fc.weight holds NaN or infinite values"),
    ("eagle3-infinite-norm", e3(), replaced(eagle3_weights(), norm__weight=torch.full((H,), float("inf"))),
     "norm.weight holds NaN or infinite values"),
    ("eagle3-integer-weights", e3(), replaced(eagle3_weights(), fc__weight=torch.ones(H, 3 * H, dtype=torch.long)),
     "fc.weight holds torch.int64, expected floating-point numbers"),
    ("eagle3-nan-epsilon", e3(rms_norm_eps=float("nan")), eagle3_weights(), "rms_norm_eps = nan"),
    ("eagle3-negative-rope-base", e3(rope_theta=-1), eagle3_weights(), "rope_theta = -1"),
    ("eagle3-rope-base-as-text", e3(rope_theta="x"), eagle3_weights(), "rope_theta = x"),
    ("eagle3-hidden-size-boolean", e3(hidden_size=True), eagle3_weights(), "hidden_size = True"),
    ("eagle1-epsilon-of-two", llama_config(rms_norm_eps=2.0), eagle1_weights(), "rms_norm_eps = 2.0"),
    ("eagle1-extra-key", llama_config(), eagle1_weights() | {"evil": torch.ones(1)}, "unexpected keys: evil"),
    ("medusa-nan-weights", medusa(), {k: v * float("nan") for k, v in medusa_weights().items()},
     "holds NaN or infinite values"),
    ("medusa-integer-weights", medusa(), {k: v.long() for k, v in medusa_weights().items()},
     "expected floating-point numbers"),
    ("medusa-fewer-heads-than-config", medusa(medusa_num_heads=5), medusa_weights(), "missing keys: 3.0.linear.bias"),
    ("hydra-infinite-weights", HYDRA_CONFIG, {k: v * float("inf") for k, v in hydra_weights().items()},
     "holds NaN or infinite values"),
    ("config-is-a-list", [1, 2], medusa_weights(), "not a JSON object"),
]


@pytest.mark.parametrize("name, config, weights, message", CHECKPOINTS, ids=[c[0] for c in CHECKPOINTS])
def test_a_hostile_draft_checkpoint_is_refused_in_one_line(tmp_path, target, name, config, weights, message):
    folder = write(tmp_path / "head", config, weights, "model.safetensors")
    with pytest.raises(CheckpointError) as caught:
        load(folder, target)
    one_line(str(caught.value))
    assert message in str(caught.value) and str(folder) in str(caught.value)


@pytest.mark.parametrize("link", ["config.json", "model.safetensors"])
def test_a_checkpoint_file_linked_to_a_device_is_refused(tmp_path, target, link):
    folder = write(tmp_path / "head", medusa(), medusa_weights(), "model.safetensors")
    (folder / link).unlink()
    os.symlink("/dev/zero", folder / link)
    with pytest.raises(CheckpointError) as caught:
        load(folder, target)
    one_line(str(caught.value))
    assert str(folder) in str(caught.value)


# Training checkpoints ---------------------------------------------------------------------------

def module_and_optimizer():
    module = torch.nn.Linear(2, 2)
    return module, torch.optim.AdamW(module.parameters())


def trained_checkpoint(path: Path, steps: int = 3) -> dict:
    """What `train_loop` saves after `steps` steps: the plain data a later run resumes from."""
    module, optimizer = module_and_optimizer()
    run = training.Run("medusa", 0, steps, path, {})
    training.train_loop(module, optimizer, lambda step, g: torch.randn(4, 2, generator=g),
                        lambda x: module(x).pow(2).mean(), run, 1.0)
    return torch.load(path, weights_only=True)


def saved_with(**changes):
    """A written checkpoint with its progress fields or module tensors changed."""
    def make(path: Path) -> None:
        saved = trained_checkpoint(path)
        for key, value in changes.items():
            (saved["module"] if key in ("weight", "bias") else saved["progress"])[key] = value
        training.atomic_save(saved, path)
    return make


def truncated(path: Path) -> None:
    trained_checkpoint(path)
    os.truncate(path, path.stat().st_size // 2)


TRAINING_CHECKPOINTS = [
    ("truncated", truncated),
    ("empty", lambda path: path.write_bytes(b"")),
    ("a-folder", lambda path: path.mkdir()),
    ("a-pipe", lambda path: os.mkfifo(path)),
    ("linked-to-dev-zero", lambda path: os.symlink("/dev/zero", path)),
    ("dangling-link", lambda path: os.symlink(path.parent / "nowhere", path)),
    ("step-as-text", saved_with(step="3")),
    ("negative-step", saved_with(step=-5)),
    ("step-past-the-schedule", saved_with(step=10**9)),
    ("nan-loss", saved_with(losses=[float("nan")])),
    ("unknown-stop", saved_with(stopped_by="rm -rf")),
    ("infinite-seconds", saved_with(seconds=float("inf"))),
    ("nan-weights", saved_with(weight=torch.full((2, 2), float("nan")))),
    ("integer-weights", saved_with(weight=torch.ones(2, 2, dtype=torch.long))),
    ("wrong-shape", saved_with(weight=torch.ones(3, 2))),
    ("progress-foreign-field", saved_with(__class__="x")),
]


@pytest.mark.parametrize("name, plant", TRAINING_CHECKPOINTS, ids=[c[0] for c in TRAINING_CHECKPOINTS])
def test_a_damaged_training_checkpoint_is_named_ignored_and_replaced(tmp_path, capsys, name, plant):
    checkpoint = tmp_path / "medusa-0123.ckpt"
    plant(checkpoint)
    capsys.readouterr()
    module, optimizer = module_and_optimizer()
    run = training.Run("medusa", 0, 3, checkpoint, {})
    state = training.train_loop(module, optimizer, lambda step, g: torch.randn(4, 2, generator=g),
                                lambda x: module(x).pow(2).mean(), run, 1.0)
    err = capsys.readouterr().err
    one_line(err)
    assert "ignoring the training checkpoint" in err and str(checkpoint) in err
    assert state.step == 3 and state.stopped_by == "steps"  # trained from the start, to the end
    assert training.resume(checkpoint, *module_and_optimizer(), 3).step == 3  # the new checkpoint replaced it


# Cached target states ---------------------------------------------------------------------------

def shard():
    conversations = [Conversation("t:1", "0" * 64, [1, 2, 3], [4, 5, 6, 7], True),
                     Conversation("t:2", "1" * 64, [2, 3], [8, 9, 1], True)]
    return [("ab" * 32, conversations)]


class Loaded:
    def __init__(self, model):
        self.model = model


def cached_with(change):
    """The cached states file `features` wrote, then changed by `change(dict)` (or replaced when
    `change` returns bytes)."""
    def make(path: Path, fresh: dict) -> None:
        stored = dict(fresh)
        data = change(stored)
        path.write_bytes(data if isinstance(data, bytes) else _saved(stored))
    return make


def _saved(tensors: dict) -> bytes:
    from safetensors.torch import save

    return save(tensors)


def _set(key, value):
    return cached_with(lambda d: d.__setitem__(key, value(d[key]) if callable(value) else value))


FEATURE_CACHES = [
    ("truncated", cached_with(lambda d: _saved(d)[:100])),
    ("missing-hidden-layer", cached_with(lambda d: d.pop("hidden.2"))),
    ("hidden-one-column-short", _set("hidden.2", lambda h: h[:, :-1].contiguous())),
    ("hidden-float32", _set("hidden.2", lambda h: h.float())),
    ("hidden-nan", _set("hidden.2", lambda h: torch.full_like(h, float("nan")))),
    ("greedy-past-the-vocabulary", _set("greedy", lambda g: g + 10**12)),
    ("greedy-negative", _set("greedy", lambda g: g - 100)),
    ("greedy-float", _set("greedy", lambda g: g.float())),
    ("greedy-one-row-short", _set("greedy", lambda g: g[:-1].contiguous())),
    ("not-safetensors", cached_with(lambda d: b"PK\x03\x04 a zip with a pickle in it")),
    ("a-folder", lambda path, fresh: (path.mkdir(), (path / "x").write_text("x"))),
    ("a-pipe", lambda path, fresh: os.mkfifo(path)),
]


@pytest.fixture(scope="module")
def states(tmp_path_factory):
    """A 2-layer target, the features computed for `shard()` and the cache file they were saved in."""
    loaded, folder = Loaded(tiny_llama(0, layers=2).float()), tmp_path_factory.mktemp("fresh")
    fresh = training.features(loaded, shard(), (2,), folder)
    (cached,) = folder.iterdir()
    return loaded, fresh, cached


@pytest.mark.parametrize("name, plant", FEATURE_CACHES, ids=[c[0] for c in FEATURE_CACHES])
def test_a_damaged_cache_of_target_states_is_named_and_computed_again(tmp_path, capsys, states, name, plant):
    loaded, fresh, cached = states
    path = tmp_path / "cache" / cached.name
    path.parent.mkdir()
    plant(path, load_file(cached))
    capsys.readouterr()
    healed = training.features(loaded, shard(), (2,), tmp_path / "cache")
    err = capsys.readouterr().err
    one_line(err)
    assert f"recomputing {path}" in err
    assert all(torch.equal(a, b) for a, b in zip(healed.greedy, fresh.greedy))
    assert all(torch.equal(a, b) for a, b in zip(healed.hidden[2], fresh.hidden[2]))
    assert path.is_file() and load_file(path)["greedy"].dtype == torch.int64  # rebuilt in place
    if name == "a-folder":  # set aside, not deleted: it was not the cache's to delete
        (aside,) = [p for p in path.parent.iterdir() if p.name.startswith(f".{path.name}-damaged-")]
        assert (aside / "x").read_text() == "x"


# --model folders -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def intact_folder(tmp_path_factory) -> Path:
    """A complete local model folder: a 2-layer tiny Llama with a 16-word tokenizer."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    folder = tmp_path_factory.mktemp("intact") / "model"
    tiny_llama(0, layers=2).save_pretrained(folder)
    words = Tokenizer(models.WordLevel({f"w{i}": i for i in range(16)}, unk_token="w0"))
    words.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=words, unk_token="w0", eos_token="w1").save_pretrained(folder)
    return folder


@pytest.fixture
def model_folder(intact_folder, tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("SPECATLAS_PACKED_LINEARS", "0")  # no kernel timing for a 2-layer model
    return Path(shutil.copytree(intact_folder, tmp_path / "model"))


def config_with(**changes):
    def change(folder: Path) -> None:
        config = json.loads((folder / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps(config | changes))
    return change


def file_text(name: str, text: str):
    return lambda folder: (folder / name).write_text(text)


INDEX = "model.safetensors.index.json"
SHARDS = ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors")

MODEL_FOLDERS = [
    ("300-layers", config_with(num_hidden_layers=300), "300 layers"),
    ("vocabulary-of-a-billion", config_with(vocab_size=10**9), "[1000000000, 32]"),
    ("hidden-size-a-million", config_with(hidden_size=10**6), "[16, 1000000]"),
    ("nan-vocabulary", file_text("config.json", '{"model_type": "llama", "vocab_size": NaN}'), "does not match"),
    ("giant-config", file_text("config.json", '{"pad": "' + "x" * (5 << 20) + '"}'), "at most 4,194,304"),
    ("config-a-list", file_text("config.json", "[]"), "config.json is not a JSON object"),
    ("config-nested-deep", file_text("config.json", "[" * 100_000 + "]" * 100_000), "nested too deeply"),
    ("tokenizer-config-damaged", file_text("tokenizer_config.json", "{oops"), "tokenizer_config.json not valid JSON"),
    ("tokenizer-config-a-list", file_text("tokenizer_config.json", "[1]"), "tokenizer_config.json is not a JSON object"),
    ("tokenizer-json-damaged", file_text("tokenizer.json", "{oops"), "cannot load model"),
    ("weights-truncated", lambda folder: os.truncate(folder / "model.safetensors", 100), "truncated model.safetensors"),
    ("weights-cut-short", lambda folder: os.truncate(folder / "model.safetensors", 4000), "(4,000 bytes of"),
    ("weights-missing", lambda folder: (folder / "model.safetensors").unlink(), "no file named model.safetensors"),
    ("weights-named-by-config", config_with(transformers_weights="other.safetensors"), "transformers_weights"),
    # Sharded weights: the index and every shard are bounded and kept inside the folder.
    ("sharded-300-layers", lambda f: (sharded(f), config_with(num_hidden_layers=300)(f)), "300 layers"),
    ("index-10000-shards", lambda f: index(f, {f"t{i}": f"shard-{i}.safetensors" for i in range(10_000)}),
     "naming 10,000 shards; at most 1,024"),
    ("index-giant", lambda f: (sharded(f), os.truncate(f / INDEX, (64 << 20) + 1)), "at most 67,108,864"),
    ("index-a-list", lambda f: (sharded(f), (f / INDEX).write_text("[]")), "without a weight_map"),
    ("index-map-of-numbers", lambda f: index(f, {"model.embed_tokens.weight": 1}), "without a weight_map"),
    ("index-shard-dot-dot", lambda f: index(f, {"model.embed_tokens.weight": "../model/model.safetensors"}),
     "outside the folder ('../model/model.safetensors')"),
    ("index-shard-absolute", lambda f: index(f, {"model.embed_tokens.weight": str(f / "model.safetensors")}),
     "outside the folder"),
    ("index-shard-is-the-folder", lambda f: index(f, {"model.embed_tokens.weight": ".."}), "outside the folder ('..')"),
    ("shard-links-outside", lambda f: (sharded(f), relink(f / SHARDS[0], f.parent / "elsewhere.safetensors")),
     "links outside the folder"),
    ("shard-links-to-a-device", lambda f: (sharded(f), relink(f / SHARDS[0], Path("/dev/zero"))), "links outside"),
    ("shard-missing", lambda f: (sharded(f), (f / SHARDS[1]).unlink()), f"has no regular file {SHARDS[1]}"),
    ("shard-truncated", lambda f: (sharded(f), os.truncate(f / SHARDS[1], 300)), f"truncated {SHARDS[1]}"),
    ("index-places-a-tensor-wrongly", lambda f: (sharded(f), index(f, json.loads((f / INDEX).read_text())["weight_map"]
                                                                    | {"model.norm.weight": SHARDS[0]})),
     f"placing 'model.norm.weight' in {SHARDS[0]}"),
    # Pickled weights are never read: unpickling can run code.
    ("bin-only", lambda f: pickled(f, "pytorch_model.bin"), "pickled PyTorch weights (pytorch_model.bin)"),
    ("bin-shards-only", lambda f: pickled(f, "pytorch_model-00001-of-00002.bin"), "convert them to safetensors"),
    ("bin-index-only", lambda f: pickled(f, "pytorch_model.bin.index.json"), "pytorch_model.bin.index.json"),
]


def sharded(folder: Path) -> None:
    """The folder's weights split in two shards with their index, as save_pretrained shards them."""
    tensors = load_file(folder / "model.safetensors")
    (folder / "model.safetensors").unlink()
    keys = sorted(tensors)
    halves = {SHARDS[0]: keys[: len(keys) // 2], SHARDS[1]: keys[len(keys) // 2 :]}
    for shard, names in halves.items():
        save_file({k: tensors[k] for k in names}, str(folder / shard), metadata={"format": "pt"})
    index(folder, {k: shard for shard, names in halves.items() for k in names})


def index(folder: Path, weight_map: dict) -> None:
    (folder / INDEX).write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    (folder / "model.safetensors").unlink(missing_ok=True)


def relink(path: Path, target: Path) -> None:
    if not target.exists():
        shutil.copy(path, target)
    path.unlink()
    path.symlink_to(target)


def pickled(folder: Path, name: str) -> None:
    """Pickled weights in place of the safetensors file (a plain tensor: the check must not open it)."""
    torch.save({"model.embed_tokens.weight": torch.zeros(1)}, folder / name)
    (folder / "model.safetensors").unlink()


@pytest.mark.parametrize("name, damage, message", MODEL_FOLDERS, ids=[c[0] for c in MODEL_FOLDERS])
def test_a_damaged_or_lying_model_folder_is_refused_in_one_line(model_folder, name, damage, message):
    folder = model_folder
    damage(folder)
    with pytest.raises(ModelLoadError) as caught:
        load_model(str(folder), torch.device("cpu"), torch.float32)
    one_line(str(caught.value))
    assert message in str(caught.value) and str(folder) in str(caught.value)


@pytest.mark.parametrize("layout", ["one-file", "sharded"])
def test_the_intact_model_folder_loads(model_folder, layout):
    """The folder the cases above damage is a good one, whole or sharded: each refusal is the damage's."""
    if layout == "sharded":
        sharded(model_folder)
    loaded = load_model(str(model_folder), torch.device("cpu"), torch.float32)
    assert loaded.model.config.num_hidden_layers == 2
    assert torch.equal(loaded.model.model.norm.weight, tiny_llama(0, layers=2).model.norm.weight)
