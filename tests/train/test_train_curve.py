"""The acceptance-vs-data curve's measurement: a head's paper method on held-out prompts."""

from __future__ import annotations

import pytest

from specatlas.impls.engine.models import LoadedModel
from specatlas.impls.families import FAMILIES
from specatlas.train_curve import paper_method_acceptance
from specatlas.head_training import plain_outputs
from tests.impls.tiny_world import TinyWorld


@pytest.mark.parametrize("family", ["eagle", "eagle3", "medusa"])
def test_a_heads_paper_method_is_measured_and_checked_against_plain_decoding(tmp_path, family):
    world = TinyWorld(tmp_path)
    loaded = LoadedModel(world.target, range(world.target.config.vocab_size), "tiny")
    prompts = [[3, 5, 7], [9, 2, 4, 4]]
    result = paper_method_acceptance(FAMILIES[family], loaded, world.heads[family], prompts,
                                     plain_outputs(world.target, prompts, 12), 12)
    assert result["identical_to_plain"] and result["prompts"] == 2
    assert result["method"] == FAMILIES[family].paper
    assert 1.0 <= result["mean_accepted_tokens"] and result["steps"] >= 24 / 6  # at most 6 tokens a step here


def test_an_epochs_curve_trains_every_size_as_often_so_its_steps_grow_with_the_data(tmp_path, monkeypatch):
    """`train-curve --epochs 2` on a tiny target and data of 3, 6 and 12 training conversations:
    EAGLE-3 (one conversation a step) trains 6, 12 and 24 steps, each point records its epochs and
    steps, and the file says its schedule; `--steps` writes a fixed-steps file beside it. A rerun
    skips the sizes measured, unless the family's settings changed since."""
    import json

    from specatlas import data_shards, train_curve
    from specatlas.cli import main
    from specatlas.impls.engine import models
    from tests.impls.toy import tiny_llama
    from tests.train.test_train_data_load import make_folder

    make_folder(tmp_path / "data", shards=5, per_shard=3, answer=10)  # 30 answer tokens a shard, the first held out
    target = tiny_llama(3, layers=6, vocab=16).float()
    monkeypatch.setattr(models, "load_model", lambda *args, **kwargs: LoadedModel(
        target, range(target.config.vocab_size), "tiny"))  # a tokenizer's length is all loading reads
    monkeypatch.setattr(data_shards, "default_folder", lambda name: tmp_path / "data")
    monkeypatch.setattr(train_curve, "training_results_dir", lambda: tmp_path / "results")
    monkeypatch.setattr(train_curve, "paper_method_acceptance", lambda *args: {"method": "li2025eagle"})  # tested above
    monkeypatch.setenv("SPECATLAS_CACHE", str(tmp_path / "cache"))
    assert main(["train-curve", "eagle3", "--tokens", "30,60,120", "--epochs", "2"]) == 0
    curve = json.loads((tmp_path / "results" / f"{models.EMBEDDED}-eagle3-epochs2-seed0-acceptance-vs-data.json").read_text())
    assert (curve["schedule"], curve["epochs"]) == ("epochs", 2)
    points = curve["points"]
    assert [p["train_conversations"] for p in points] == [3, 6, 12]
    assert [p["steps"] for p in points] == [p["config"]["steps"] for p in points] == [6, 12, 24]
    assert all(p["config"]["epochs"] == 2 and p["epochs_seen"]["epochs"] == 2.0 for p in points)
    assert main(["train-curve", "eagle3", "--tokens", "30,60", "--steps", "6"]) == 0
    fixed_name = f"{models.EMBEDDED}-eagle3-steps6-seed0-acceptance-vs-data.json"
    fixed = json.loads((tmp_path / "results" / fixed_name).read_text())
    assert (fixed["schedule"], fixed["steps"]) == ("fixed-steps", 6) and "epochs" not in fixed
    assert [p["steps"] for p in fixed["points"]] == [6, 6] and [p["epochs_seen"]["epochs"] for p in fixed["points"]] == [2.0, 1.0]
    assert main(["train-curve", "eagle3", "--tokens", "30,60", "--steps", "6"]) == 0  # measured: skipped
    assert json.loads((tmp_path / "results" / fixed_name).read_text()) == fixed
    monkeypatch.setattr(FAMILIES["eagle3"], "deep_rows", 32)  # the family's training changed: measured again
    assert main(["train-curve", "eagle3", "--tokens", "30", "--steps", "6"]) == 0
    again = json.loads((tmp_path / "results" / fixed_name).read_text())
    assert [p["config"]["settings"]["deep_rows"] for p in again["points"]] == [32, 64]


@pytest.mark.parametrize("damage, message", [
    ("folder-is-a-file", "cannot write to the results folder"),
    ("damaged-curve", "not this family's acceptance-vs-data curve"),
])
def test_a_results_folder_that_takes_no_file_or_a_damaged_curve_stops_it_before_the_model_loads(
        tmp_path, monkeypatch, capsys, damage, message):
    """Either would otherwise surface only after the first size's training, which is an hour at 2M tokens."""
    from specatlas import train_curve
    from specatlas.cli import main
    from specatlas.impls.engine import models

    results = tmp_path / "results"
    if damage == "folder-is-a-file":
        results.write_text("not a folder")
    else:
        results.mkdir()
        (results / f"{models.EMBEDDED}-eagle3-epochs1-seed0-acceptance-vs-data.json").write_text('{"family": "eagle3"}')
    monkeypatch.setattr(train_curve, "training_results_dir", lambda: results)
    monkeypatch.setattr(models, "load_model", lambda *args, **kwargs: pytest.fail("loaded the model"))
    assert main(["train-curve", "eagle3", "--tokens", "30", "--epochs", "1"]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
