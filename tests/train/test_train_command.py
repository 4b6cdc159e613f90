"""`specatlas train` end to end on a tiny target: several families on one pass of the target."""

from __future__ import annotations

import json

from specatlas import data_shards, train
from specatlas.cli import main
from specatlas.impls.engine.models import LoadedModel
from tests.impls.toy import tiny_llama
from tests.train.test_train_data_load import make_folder


def test_several_families_train_one_after_another_on_one_pass_of_the_target(tmp_path, monkeypatch, capsys):
    """EAGLE-3 (layers 2, 3, 4 of 6) and Kangaroo (2 and 6) in one command: the target runs over the
    data once (its last layer sees each conversation once), each head gets its own folder, and each
    card prints the one-family command that remakes it, data pinned."""
    make_folder(tmp_path / "data", shards=3, per_shard=3, answer=10)
    target = tiny_llama(3, layers=6, vocab=16).float()
    monkeypatch.setattr(train, "load_model", lambda *args, **kwargs: LoadedModel(
        target, range(target.config.vocab_size), "tiny"))  # a tokenizer's length is all loading reads
    monkeypatch.setattr(data_shards, "default_folder", lambda name: tmp_path / "data")
    monkeypatch.setattr(train, "default_output", lambda family, name: tmp_path / f"{family.name}-head")
    monkeypatch.setenv("SPECATLAS_CACHE", str(tmp_path / "cache"))
    rows = []
    handle = target.model.layers[5].register_forward_hook(lambda module, args, output: rows.append(output.shape[0]))
    try:
        assert main(["train", "eagle3", "kangaroo", "--steps", "2"]) == 0
    finally:
        handle.remove()
    assert sum(rows) == 9  # 9 conversations, each through the last layer once
    for family in ("eagle3", "kangaroo"):
        card = json.loads((tmp_path / f"{family}-head" / "training.json").read_text())
        assert card["command"] == f"specatlas train {family} --tokens 60 --steps 2"  # 2 training shards of 30
    capsys.readouterr()
    assert main(["train", "eagle3", "kangaroo", "--output", str(tmp_path / "one")]) == 2
    assert main(["train", "eagle3", "li2025eagle"]) == 2
    err = capsys.readouterr().err
    assert "--output is one head's folder" in err and "named twice" in err and len(err.strip().splitlines()) == 2


def test_a_run_the_time_budget_ended_says_so_and_how_to_finish_it(tmp_path, capsys):
    """A multi-family run hides a budget stop among its lines: the command says which family stopped
    where, and that a larger budget finishes it; a finished run, or FR-Spec's ranking written beside
    a stopped EAGLE card, says nothing."""
    import json

    from specatlas.impls.families import FAMILIES
    from specatlas.train import budget_stop

    card = {"family": "eagle", "stopped_by": "budget", "steps": 6604, "planned_steps": 8058}
    (tmp_path / "training.json").write_text(json.dumps(card))
    budget_stop(FAMILIES["eagle"], tmp_path, 45.0)
    assert capsys.readouterr().err == ("specatlas train: the --budget-minutes 45 budget stopped eagle at step 6,604 of "
                                       "8,058; the same command with a larger --budget-minutes resumes it there and "
                                       "finishes the schedule\n")
    budget_stop(FAMILIES["fr-spec"], tmp_path, 45.0)
    (tmp_path / "training.json").write_text(json.dumps(card | {"stopped_by": "steps", "steps": 8058}))
    budget_stop(FAMILIES["eagle"], tmp_path, 45.0)
    (tmp_path / "training.json").unlink()  # `train fr-spec --output NEW`: the ranking alone, no card
    budget_stop(FAMILIES["fr-spec"], tmp_path, 45.0)
    assert capsys.readouterr().err == ""


def test_a_retrained_head_replaces_the_shipped_one_only_when_better(tmp_path, monkeypatch, capsys):
    """Every committed retrain stays in git: a shipped head is replaced only by one whose held-out
    acceptance beats its card's, or with --replace-anyway; a folder outside the shipped heads as before."""
    from specatlas.impls.engine import head_folders

    make_folder(tmp_path / "data", shards=3, per_shard=3, answer=10)
    target = tiny_llama(3, layers=6, vocab=16).float()
    monkeypatch.setattr(train, "load_model", lambda *args, **kwargs: LoadedModel(
        target, range(target.config.vocab_size), "tiny"))
    monkeypatch.setattr(data_shards, "default_folder", lambda name: tmp_path / "data")
    monkeypatch.setattr(head_folders, "SHIPPED_HEADS", tmp_path / "shipped")
    monkeypatch.setattr(train, "default_output", lambda family, name: tmp_path / "shipped" / f"{family.name}-head")
    monkeypatch.setenv("SPECATLAS_CACHE", str(tmp_path / "cache"))
    head = tmp_path / "shipped" / "medusa-head"
    assert main(["train", "medusa", "--steps", "2"]) == 0  # no head shipped yet
    measured = json.loads((head / "training.json").read_text())["held_out"]["mean_accepted_tokens_chain"]

    def ship(mean: float) -> bytes:
        card = json.loads((head / "training.json").read_text())
        card["held_out"]["mean_accepted_tokens_chain"] = mean
        (head / "training.json").write_text(json.dumps(card))
        return (head / "medusa_lm_head.safetensors").read_bytes()

    for shipped in (measured, measured + 1):  # as good, or better: kept
        weights = ship(shipped)
        capsys.readouterr()
        assert main(["train", "medusa", "--steps", "2"]) == 2
        err = capsys.readouterr().err
        line = err.strip().splitlines()[-1]  # after the progress lines
        assert "Traceback" not in err and line.startswith("specatlas train: ") and f"{head}: kept the shipped" in line
        assert f"no better than its card's {shipped}" in line and "--replace-anyway" in line
        assert (head / "medusa_lm_head.safetensors").read_bytes() == weights
        assert json.loads((head / "training.json").read_text())["held_out"]["mean_accepted_tokens_chain"] == shipped
    assert main(["train", "medusa", "--steps", "2", "--replace-anyway"]) == 0
    assert json.loads((head / "training.json").read_text())["held_out"]["mean_accepted_tokens_chain"] == measured
    ship(measured - 0.5)  # a worse shipped head is replaced
    assert main(["train", "medusa", "--steps", "2"]) == 0
    assert json.loads((head / "training.json").read_text())["held_out"]["mean_accepted_tokens_chain"] == measured
    # Outside the shipped heads the card is not compared.
    other = tmp_path / "mine"
    assert main(["train", "medusa", "--steps", "2", "--output", str(other)]) == 0
    ship_other = json.loads((other / "training.json").read_text())
    ship_other["held_out"]["mean_accepted_tokens_chain"] = 99
    (other / "training.json").write_text(json.dumps(ship_other))
    assert main(["train", "medusa", "--steps", "2", "--output", str(other)]) == 0
