"""`specatlas train-eval`: the heads' methods at their papers' settings on the held-out prompts."""

from __future__ import annotations

import dataclasses
import functools
import json

import pytest

from specatlas import data_shards, head_training, train_eval
from specatlas.cli import CommandError, main
from specatlas.impls.engine import models
from specatlas.impls.engine.models import LoadedModel
from specatlas.impls.registry import METHODS
from tests.impls.tiny_world import TinyWorld
from tests.train.test_train_data_load import make_folder


def test_by_default_every_method_that_runs_a_trained_head_is_measured_and_sd_for_the_distilled_drafter():
    methods = train_eval.default_methods()
    assert {"li2024eagle2", "li2025eagle", "cai2024medusa", "ankner2024hydra", "zhang2024recurrent",
            "liu2024kangaroo"} <= set(methods) and methods[-1] == "leviathan2023fast"
    assert all(METHODS[m].trained_head for m in methods[:-1]) and METHODS["leviathan2023fast"].paper_draft == (7, 7)


@pytest.fixture
def tiny(tmp_path, monkeypatch):
    """The command on a tiny target: its heads, its draft model, data whose held-out shard has 3 prompts."""
    world = TinyWorld(tmp_path / "world")
    make_folder(tmp_path / "data", shards=3, per_shard=3, answer=10)
    monkeypatch.setattr(models, "load_model", lambda *args, **kwargs: LoadedModel(
        world.target, range(world.target.config.vocab_size), "tiny"))  # a tokenizer's length is all loading reads
    monkeypatch.setattr(data_shards, "default_folder", lambda name: tmp_path / "data")
    monkeypatch.setattr(train_eval, "results_file", lambda model: tmp_path / "results" / "tiny-held-out-acceptance.json")
    monkeypatch.setattr(train_eval, "build", functools.partial(train_eval.build, draft_model=world.draft_model,
                                                               heads=world.heads))
    monkeypatch.setenv("SPECATLAS_CACHE", str(tmp_path / "cache"))
    (tmp_path / "results").mkdir()
    return world, tmp_path / "results" / "tiny-held-out-acceptance.json"


def test_each_method_is_measured_on_the_held_out_prompts_checked_against_plain_decoding_and_kept(tiny, capsys):
    world, path = tiny
    assert main(["train-eval", "eagle2", "medusa", "sd", "--max-new-tokens", "12"]) == 0
    methods = json.loads(path.read_text())["methods"]
    assert sorted(methods) == ["cai2024medusa", "leviathan2023fast", "li2024eagle2"]
    for method, entry in methods.items():
        assert entry["identical_to_plain"] and entry["prompts"] == 3 and entry["max_new_tokens"] == 12
        assert sum(entry["steps_by_accepted_length"].values()) == entry["steps"] >= 3 * 12 / 8
        lengths = {int(length): n for length, n in entry["steps_by_accepted_length"].items()}
        assert entry["mean_accepted_tokens"] == round(sum(k * n for k, n in lengths.items()) / entry["steps"], 3)
        assert entry["paper_settings"] == METHODS[method].paper_settings and entry["code"].keys() == {"commit", "dirty"}
    assert list(methods["li2024eagle2"]["weights"]) == [str(world.heads["eagle"])]  # the head it ran, by its digest
    assert methods["leviathan2023fast"]["weights"] == {}  # a draft model given, no trained weights loaded
    capsys.readouterr()

    # A rerun measures only what changed: the same weights and settings are skipped, other prompts are not.
    assert main(["train-eval", "eagle2", "medusa", "--max-new-tokens", "12"]) == 0
    assert capsys.readouterr().err.count("skipped") == 2 and json.loads(path.read_text())["methods"] == methods
    assert main(["train-eval", "eagle2", "--max-new-tokens", "12", "--prompts", "2"]) == 0
    again = json.loads(path.read_text())["methods"]
    assert again["li2024eagle2"]["prompts"] == 2 and again["cai2024medusa"] == methods["cai2024medusa"]
    head = world.heads["medusa"] / "medusa_lm_head.safetensors"
    head.write_bytes(head.read_bytes())  # same bytes: the digest, not the file's time, decides
    assert main(["train-eval", "medusa", "--max-new-tokens", "12"]) == 0
    assert "skipped" in capsys.readouterr().err
    assert main(["train-eval", "medusa", "--max-new-tokens", "12", "--again"]) == 0
    assert "skipped" not in capsys.readouterr().err
    retrained = bytearray(head.read_bytes())
    retrained[-1] ^= 1  # the last byte of the last tensor: the head still loads, its digest differs
    head.write_bytes(bytes(retrained))
    assert main(["train-eval", "medusa", "--max-new-tokens", "12"]) == 0
    assert "skipped" not in capsys.readouterr().err
    assert json.loads(path.read_text())["methods"]["cai2024medusa"]["weights"] != methods["cai2024medusa"]["weights"]
    monkeypatch_settings = dataclasses.replace(METHODS["li2024eagle2"], settings="another tree", source="")
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(METHODS, "li2024eagle2", monkeypatch_settings)
        assert main(["train-eval", "eagle2", "--max-new-tokens", "12", "--prompts", "2"]) == 0
    assert "skipped" not in capsys.readouterr().err
    assert json.loads(path.read_text())["methods"]["li2024eagle2"]["paper_settings"] == "another tree"


def test_the_results_folder_is_made_and_a_step_less_measurement_records_no_mean(tiny):
    """The results folder is created before the model loads; a measurement without a step (no
    prompt) has no mean, rather than a 0.0 that would read as one."""
    world, path = tiny
    path.parent.rmdir()
    assert main(["train-eval", "eagle2", "--max-new-tokens", "1"]) == 0
    entry = json.loads(path.read_text())["methods"]["li2024eagle2"]
    assert (entry["steps"], entry["mean_accepted_tokens"], entry["steps_by_accepted_length"]) == (3, 1.0, {"1": 3})
    decoder, _ = head_training.build(METHODS["li2024eagle2"], world.target, heads=world.heads)
    assert head_training.accepted_on(decoder, [], [], 8) == {
        "steps": 0, "mean_accepted_tokens": None, "steps_by_accepted_length": {}, "identical_to_plain": True}


def test_fr_specs_ranking_counts_among_the_weights_and_sd_needs_the_distilled_drafter(tmp_path):
    """Retraining FR-Spec's ranking changes what the method runs, so its digest is recorded beside the
    EAGLE head's; speculative decoding without a given or shipped distilled drafter would measure an
    untrained slice of the target, so it is refused in one line."""
    world = TinyWorld(tmp_path)
    _, weights = head_training.build(METHODS["zhao2025fr"], world.target, heads=world.heads)
    ranking = next(world.heads["eagle"].glob("freq_*.pt"))
    assert sorted(weights) == sorted([str(world.heads["eagle"]), str(ranking)])
    with pytest.raises(CommandError, match="no distilled drafter is shipped for this model"):
        head_training.build(METHODS["leviathan2023fast"], world.target)


@pytest.mark.parametrize("args, message", [
    (["nonesuch"], "no method 'nonesuch'"),
    (["pld"], "saxena2023prompt runs no trained head or drafter"),
    (["eagle2", "eagle-2"], "li2024eagle2 is named twice"),
])
def test_a_method_without_a_trained_drafter_is_refused_in_one_line(tiny, capsys, args, message):
    assert main(["train-eval", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_a_method_that_cannot_be_built_stops_in_one_line_and_keeps_what_was_measured(tiny, capsys, monkeypatch):
    world, path = tiny
    assert main(["train-eval", "eagle2", "--max-new-tokens", "8"]) == 0
    measured = json.loads(path.read_text())
    monkeypatch.setitem(world.heads, "medusa", world.folder / "no-such-head")
    assert main(["train-eval", "eagle2", "medusa", "--max-new-tokens", "8"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("specatlas train-eval: cai2024medusa: ") and "Traceback" not in "".join(err)
    assert json.loads(path.read_text()) == measured


def test_a_damaged_results_file_is_refused_in_one_line_before_the_model_loads(tiny, capsys, monkeypatch):
    _, path = tiny
    path.write_text('{"methods": [1, 2]}')
    monkeypatch.setattr(models, "load_model", lambda *args, **kwargs: pytest.fail("loaded the model"))
    assert main(["train-eval", "eagle2"]) == 2
    err = capsys.readouterr().err
    assert "not a held-out acceptance file" in err and err.count("\n") == 1
    assert path.read_text() == '{"methods": [1, 2]}'  # left as it was
