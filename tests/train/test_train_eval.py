"""`specatlas train-eval`: the heads' methods at their papers' settings on the held-out prompts."""

from __future__ import annotations

import functools
import json

import pytest

from specatlas import train_data, train_eval
from specatlas.cli import main
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
    monkeypatch.setattr(models, "load_model", lambda *args, **kwargs: LoadedModel(world.target, None, "tiny"))
    monkeypatch.setattr(train_data, "default_folder", lambda name: tmp_path / "data")
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


@pytest.mark.parametrize("args, message", [
    (["nonesuch"], "no method 'nonesuch'"),
    (["pld"], "saxena2023prompt runs no trained head or drafter"),
])
def test_a_method_without_a_trained_drafter_is_refused_in_one_line(tiny, capsys, args, message):
    assert main(["train-eval", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_a_damaged_results_file_is_refused_in_one_line_before_the_model_loads(tiny, capsys, monkeypatch):
    _, path = tiny
    path.write_text('{"methods": [1, 2]}')
    monkeypatch.setattr(models, "load_model", lambda *args, **kwargs: pytest.fail("loaded the model"))
    assert main(["train-eval", "eagle2"]) == 2
    err = capsys.readouterr().err
    assert "not a held-out acceptance file" in err and err.count("\n") == 1
    assert path.read_text() == '{"methods": [1, 2]}'  # left as it was
