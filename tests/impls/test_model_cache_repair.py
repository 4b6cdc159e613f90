"""A broken model cache is detected cheaply, named, and repaired by converting again; a broken
local model folder is reported with its own path and reason. No real model is loaded here."""

import json

import pytest
import torch
from safetensors.torch import save_file

from specatlas.impls.engine import models
from specatlas.impls.engine.models import ModelLoadError, cache_problem, install_cache


CONFIG = {"num_hidden_layers": 2, "vocab_size": 8, "hidden_size": 4}


def complete(folder):
    """A cache folder as the conversion writes it, in miniature: 2 layers, vocabulary 8, hidden 4."""
    folder.mkdir(parents=True)
    save_file({"model.embed_tokens.weight": torch.zeros(8, 4), "model.layers.0.mlp.weight": torch.zeros(4, 4),
               "model.layers.1.mlp.weight": torch.arange(64, dtype=torch.float32).reshape(16, 4)},
              str(folder / "model.safetensors"))
    for name in ("config.json", "generation_config.json", "tokenizer_config.json", "tokenizer.json"):
        (folder / name).write_text(json.dumps(CONFIG if name == "config.json" else {"name": name}))
    models.write_manifest(folder)
    return folder


def truncate(path, keep):
    path.write_bytes(path.read_bytes()[:keep])


def test_a_broken_cache_is_replaced_not_renamed_onto(tmp_path):
    target = complete(tmp_path / "smollm2-135m-instruct")
    (target / "model.safetensors").unlink()  # the state that failed with ENOTEMPTY forever
    staging = complete(tmp_path / ".staging")
    install_cache(staging, target)
    assert cache_problem(target) is None and not staging.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["smollm2-135m-instruct"]


def test_a_good_cache_installed_by_another_process_is_kept(tmp_path):
    target = complete(tmp_path / "smollm2-135m-instruct")
    before = (target / "model.safetensors").read_bytes()
    staging = complete(tmp_path / ".staging")
    (staging / "config.json").write_text(json.dumps({"other": True}))
    install_cache(staging, target)
    assert (target / "model.safetensors").read_bytes() == before
    assert json.loads((target / "config.json").read_text()) == CONFIG


def test_embedded_model_dir_converts_again_and_says_where(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SPECATLAS_CACHE", str(tmp_path))
    target = complete(tmp_path / "models" / models.EMBEDDED)
    truncate(target / "model.safetensors", 300)
    calls = []

    def convert(folder, gguf_name, destination):
        calls.append(destination)
        install_cache(complete(tmp_path / "models" / ".staging"), destination)

    monkeypatch.setattr(models, "_convert_gguf", convert)
    monkeypatch.setattr(models.importlib.util, "find_spec", lambda name: type("S", (), {
        "submodule_search_locations": [str(_gguf_folder(tmp_path))]})())
    assert models.embedded_model_dir() == target
    assert calls == [target] and cache_problem(target) is None
    err = capsys.readouterr().err
    assert f"the model cache {target} has a truncated model.safetensors" in err and "converting" in err
    assert err.count("\n") == 1
    models.embedded_model_dir()  # repaired: no second conversion
    assert calls == [target]


def _gguf_folder(tmp_path):
    folder = tmp_path / "wheel"
    folder.mkdir(exist_ok=True)
    (folder / "model.gguf").write_bytes(b"GGUF")
    return folder


def test_an_unwritable_cache_is_one_line_naming_it(tmp_path):
    blocker = tmp_path / "models"
    blocker.write_text("a file where the cache folder should be")
    staging = complete(tmp_path / ".staging")
    with pytest.raises(ModelLoadError, match="cannot write the model cache .*SPECATLAS_CACHE"):
        install_cache(staging, blocker / models.EMBEDDED)


def test_a_corrupted_local_config_is_reported_as_such_with_its_path(tmp_path):
    folder = tmp_path / "my-model"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "llama", ')  # cut short
    with pytest.raises(ModelLoadError) as caught:
        models.load_model(str(folder), device=torch.device("cpu"), dtype=torch.float32)
    message = str(caught.value)
    assert str(folder) in message and "hub" not in message and "\n" not in message


def test_tied_embeddings_saved_as_the_lm_head_only_are_a_complete_cache(tmp_path):
    folder = complete(tmp_path / "smollm2-135m-instruct")
    save_file({"lm_head.weight": torch.zeros(8, 4), "model.layers.0.w": torch.zeros(1), "model.layers.1.w": torch.zeros(1)},
              str(folder / "model.safetensors"))
    models.write_manifest(folder)  # as the conversion of such a model writes it
    assert cache_problem(folder) is None


def _edit_json(name, **changes):
    def edit(folder):
        path = folder / name
        path.write_text(json.dumps(json.loads(path.read_text()) | changes))
    return edit


def _zero_weights(folder):
    path = folder / "model.safetensors"
    data = bytearray(path.read_bytes())
    data[-64:] = bytes(64)  # the last tensor's values zeroed, the header and size unchanged
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage, reason", [
    (_edit_json("config.json", hidden_act="relu"), "has a config.json of 81 bytes where the conversion wrote 59"),
    (_edit_json("config.json", rope_theta=1.0), "has a config.json of "),
    (_edit_json("config.json", tie_word_embeddings=False), "has a config.json of "),
    (_edit_json("config.json", max_position_embeddings=16), "has a config.json of "),
    (lambda f: (f / "generation_config.json").write_text((f / "generation_config.json").read_text().replace("name", "nome")),
     "has a generation_config.json that differs from what the conversion wrote"),
    (_zero_weights, "has a model.safetensors that differs from what the conversion wrote"),
    (lambda f: truncate(f / "tokenizer.json", 5), "has a tokenizer.json of 5 bytes where the conversion wrote"),
    (lambda f: (f / "chat_template.jinja").write_text("{% for m in messages %}{% endfor %}"),
     "has chat_template.jinja, which the conversion did not write"),
    (lambda f: (f / "manifest.json").unlink(), "has no manifest.json"),
    (lambda f: (f / "manifest.json").write_text("[" * 100_000 + "]" * 100_000), "has an unreadable manifest.json (not valid JSON: nested too deeply)"),
    (lambda f: (f / "manifest.json").write_text('{"files": {"config.json": {"bytes": 1}}}'), "has an unreadable manifest.json"),
    # a config that does not describe the weights, whatever the manifest says
    (lambda f: (f / "model.safetensors").unlink(), "has no model.safetensors"),
    (lambda f: truncate(f / "model.safetensors", 200), "has a truncated model.safetensors"),
    (lambda f: truncate(f / "model.safetensors", 4), "has a truncated model.safetensors (no valid header)"),
    (lambda f: (f / "model.safetensors").write_bytes(b"\xff" * 64), "model.safetensors"),
    (lambda f: (f / "config.json").write_text("{not json"), "has an unreadable config.json"),
    (lambda f: (f / "tokenizer.json").unlink(), "has no tokenizer.json"),
    (lambda f: (f / "config.json").write_text(json.dumps(CONFIG | {"num_hidden_layers": 300})),
     "has a config.json that does not match its weights (300 layers"),
    (lambda f: (f / "config.json").write_text(json.dumps(CONFIG | {"hidden_size": 4096})),
     "does not match its weights (2 layers, vocabulary x hidden [8, 4096]"),
    (lambda f: (f / "config.json").write_text("[1, 2]"), "has a config.json that is not a JSON object"),
])
def test_a_damaged_cache_is_named_precisely(tmp_path, damage, reason):
    folder = complete(tmp_path / "smollm2-135m-instruct")
    assert cache_problem(folder) is None
    damage(folder)
    assert reason in cache_problem(folder)


def test_a_deep_or_huge_cached_config_is_named_without_reading_it(tmp_path):
    folder = complete(tmp_path / "smollm2-135m-instruct")
    (folder / "generation_config.json").write_text("[" * 100_000 + "]" * 100_000)
    assert "has an unreadable generation_config.json (not valid JSON: nested too deeply)" in cache_problem(folder)
    with (folder / "config.json").open("r+b") as f:
        f.truncate(3 << 30)  # sparse: no disk used, 3 GB if read
    assert "has an unreadable config.json (is 3,221,225,472 bytes" in cache_problem(folder)


def test_the_verified_digest_wins_over_a_poisoned_digest_cache(tmp_path, monkeypatch):
    from specatlas.bench.provenance import file_digests

    monkeypatch.setenv("SPECATLAS_CACHE", str(tmp_path))
    folder = complete(tmp_path / "models" / models.EMBEDDED)
    weights = folder / "model.safetensors"
    assert cache_problem(folder) is None
    real = models.file_sha256(weights)
    assert models.verified_sha256(weights) == real
    info = weights.stat()
    key = f"{weights.resolve()}:{info.st_ino}:{info.st_size}:{info.st_mtime_ns}:{info.st_ctime_ns}"
    (tmp_path / "weights-sha256.json").write_text(json.dumps({key: "0" * 64}))
    assert file_digests([weights]) == [real]


def test_a_damaged_digest_cache_is_named_and_recomputed(tmp_path, monkeypatch, capsys):
    from specatlas.bench.provenance import file_digests

    monkeypatch.setenv("SPECATLAS_CACHE", str(tmp_path))
    weights = tmp_path / "w.safetensors"
    weights.write_bytes(b"weights")
    (tmp_path / "weights-sha256.json").write_text("[" * 100_000 + "]" * 100_000)
    assert file_digests([weights]) == [models.file_sha256(weights)]
    err = capsys.readouterr().err
    assert "ignoring the damaged digest cache" in err and err.count("\n") == 1
    assert isinstance(json.loads((tmp_path / "weights-sha256.json").read_text()), dict)  # healed
