"""The training pipeline end to end on a tiny random Llama: data, features, training, resume, checkpoint."""

import json

import pytest
import torch

from specatlas import data_shards
from specatlas.impls.families import answers, training
from specatlas.impls.families.answers import Conversation, text_sha
from specatlas.impls.families.checkpoints import load
from specatlas.impls.engine.weight_storage import stored
from specatlas.impls.families import FAMILIES
from specatlas.impls.families.distillspec import DraftLayers
from specatlas.impls.engine.models import LoadedModel
from specatlas.impls.methods.core import default_draft_model
from tests.impls.toy import tiny_llama


class Tokenizer:
    """Enough of a tokenizer for `generate`: no chat template, ids from characters."""

    chat_template = None
    pad_token_id, eos_token_id = 0, 15

    def __call__(self, text):
        return type("Encoded", (), {"input_ids": [1 + ord(ch) % 13 for ch in text]})()


@pytest.fixture(scope="module")
def loaded():
    model = tiny_llama(3, layers=6).float()
    model.generation_config.eos_token_id = 15
    return LoadedModel(model, Tokenizer(), "tiny")


PROMPTS = ["abc", "hello there", "what is up", "a longer prompt here", "xyz", "more text to answer", "q", "zz top"]


def tiny_shards(loaded, max_new_tokens: int = 12) -> list[tuple[str, list[Conversation]]]:
    """The tiny target's greedy answers to PROMPTS, as `specatlas train-data` stores them: two shards."""
    prompts = [loaded.tokenizer(p).input_ids for p in PROMPTS]
    found = sorted(answers.generate(loaded.model, prompts, max_new_tokens, {15}, rows=3), key=lambda a: a.index)
    conversations = [Conversation(f"project:train:{a.index}", text_sha(PROMPTS[a.index]), prompts[a.index], a.tokens,
                                  a.finished) for a in found]
    return [("a" * 64, conversations[:5]), ("b" * 64, conversations[5:])]


def test_features_are_an_unpadded_forwards_states_and_greedy_tokens_cached_per_shard(tmp_path, loaded, capsys):
    shards = tiny_shards(loaded)
    layers = (2, 3, 6)
    features = training.features(loaded, shards, layers, tmp_path, batch_tokens=40)  # several batches per shard
    conversations = [c for _, shard in shards for c in shard]
    assert len(features.tokens) == len(PROMPTS)
    for i, c in enumerate(conversations):
        assert features.tokens[i].tolist() == c.prompt + c.answer[:-1] and features.prompt_lengths[i] == len(c.prompt)
        forward = loaded.model(input_ids=features.tokens[i][None], output_hidden_states=True)
        for layer in layers:
            torch.testing.assert_close(features.hidden[layer][i].float(), forward.hidden_states[layer][0],
                                       atol=2e-3, rtol=1e-2)
        assert features.greedy[i].tolist() == forward.logits[0].argmax(-1).tolist()
        # The answers are the target's greedy continuation: each answer token is the greedy token before it.
        assert features.greedy[i][len(c.prompt) - 1 :].tolist() == c.answer[: len(features.tokens[i]) - len(c.prompt) + 1]
    stamps = {path: path.stat().st_mtime_ns for path in tmp_path.glob("*.safetensors")}
    assert len(stamps) == 2 * len(layers)  # per shard and layer
    again = training.features(loaded, shards, layers, tmp_path)  # read back, not recomputed
    assert stamps == {path: path.stat().st_mtime_ns for path in tmp_path.glob("*.safetensors")}
    assert all(torch.equal(x, y) for x, y in zip(again.hidden[6], features.hidden[6]))
    # Another layer, the greedy tokens cached: only the first layers run, and its states are the full forward's.
    calls = []
    handle = loaded.model.model.layers[4].register_forward_hook(lambda *args: calls.append(1))
    try:
        shallow = training.features(loaded, shards, (1, 3), tmp_path)
    finally:
        handle.remove()
    assert not calls and len(list(tmp_path.glob("*.safetensors"))) == 2 * (len(layers) + 1)
    for i in range(len(PROMPTS)):
        forward = loaded.model(input_ids=features.tokens[i][None], output_hidden_states=True)
        torch.testing.assert_close(shallow.hidden[1][i].float(), forward.hidden_states[1][0], atol=2e-3, rtol=1e-2)
        assert torch.equal(shallow.hidden[3][i], features.hidden[3][i]) and torch.equal(shallow.greedy[i], features.greedy[i])
    # No layer (FR-Spec's ranking): the greedy tokens of a layer's file, no forward and no file written.
    handle = loaded.model.model.layers[0].register_forward_hook(lambda *args: calls.append(1))
    try:
        greedy_only = training.features(loaded, shards, (), tmp_path)
    finally:
        handle.remove()
    assert not calls and len(list(tmp_path.glob("*.safetensors"))) == 2 * (len(layers) + 1)
    assert all(torch.equal(x, y) for x, y in zip(greedy_only.greedy, features.greedy))
    damaged = sorted(stamps)[0]
    damaged.write_bytes(damaged.read_bytes()[:50])
    repaired = training.features(loaded, shards, layers, tmp_path)
    assert "recomputing" in capsys.readouterr().err
    assert all(torch.equal(x, y) for x, y in zip(repaired.greedy, features.greedy))


def test_features_of_every_shard_are_the_states_of_their_layer_after_slices_and_full_forwards(tmp_path, loaded):
    """Shard after shard through a shallow slice (the greedy tokens cached), then the full model:
    every cached state is the one a fresh copy of the target computes at that index. With
    transformers' own capture, each slice that asked for hidden states hooked the shared layers once
    more: index 3 of the slices, and index 2 of the full model after them, were earlier layers' states."""
    shards = tiny_shards(loaded)
    training.features(loaded, shards, (6,), tmp_path / "cached")  # layer 6 and the greedy tokens, by the full model
    shallow = training.features(loaded, shards, (3, 6), tmp_path / "cached")  # layer 3: through a 4-layer slice per shard
    full = training.features(loaded, shards, (2, 6), tmp_path / "full")
    fresh = tiny_llama(3, layers=6).float()  # nothing has captured through this one's layers
    for i, tokens in enumerate(full.tokens):
        states = fresh(input_ids=tokens[None], output_hidden_states=True).hidden_states
        for features, layer in ((shallow, 3), (full, 2), (full, 6)):
            torch.testing.assert_close(features.hidden[layer][i].float(), states[layer][0], atol=2e-3, rtol=1e-2)


HEADS = ["medusa", "hydra", "eagle", "eagle3", "kangaroo", "distillspec", "pass", "specdecpp", "redrafter", "pard", "pard2",
         "dflash", "dflash-cpu"]  # every family but FR-Spec (not a head)
LOADED_AS = {"dflash-cpu": "dflash"}  # a variant's checkpoints that its paper's family loads


def train(loaded, tmp_path, family, monkeypatch, cache, output, steps=6, seed=0, stop_after_steps=None, stop=None,
          epochs=None, code=None):
    """`specatlas train <family>` on the tiny model; `stop_after_steps`: a time budget that runs out
    after that many steps (a fake clock that advances one minute per step); `stop`: `--stop-at`;
    `epochs`: what `steps` was resolved from."""
    trainer = FAMILIES[family]
    monkeypatch.setattr(trainer, "off_policy_warmup", 2, raising=False)  # DistillSpec: on-policy batches from step 2
    if family == "pard2":  # its block of 16 outruns the tiny answers: no whole block would be evaluated
        monkeypatch.setattr(trainer, "block", 8)
    features = training.features(loaded, tiny_shards(loaded), trainer.layers(loaded.model), cache)
    budget = 1e9
    if stop_after_steps is not None:
        ticks = iter(range(10**6))
        calls_per_step = 2  # the loop's budget check and its save check read the clock once each
        monkeypatch.setattr(training, "clock", lambda: next(ticks) * 60 / calls_per_step)
        budget = stop_after_steps + 0.5
    draft_model = default_draft_model(loaded.model, None)[:2] if trainer.uses_draft_model else None  # (model, label)
    summary = trainer.train(loaded, features, cache, output, budget, steps, seed, "specatlas train x", None, draft_model,
                            stop, epochs, code)
    monkeypatch.setattr(training, "clock", training.time.monotonic)
    return summary, json.loads((output / "training.json").read_text())


@pytest.mark.parametrize("family", HEADS)
def test_a_resumed_run_equals_an_uninterrupted_one_bit_for_bit(tmp_path, loaded, family, monkeypatch):
    """Stopped by its time budget after 2 of 6 steps and run again, training ends exactly where an
    uninterrupted run ends: weights, loss curve and card; and the checkpoint loads in its layout."""
    cache = tmp_path / "data"
    _, whole = train(loaded, tmp_path, family, monkeypatch, cache, tmp_path / "whole")
    assert whole["steps"] == whole["planned_steps"] == 6 and whole["stopped_by"] == "steps"
    assert whole["held_out"]["positions"] > 0 and whole["config"]["seed"] == 0
    assert (tmp_path / "whole" / "README.md").read_text().count("specatlas train x") == 1
    for leftover in cache.glob("*.ckpt"):  # the uninterrupted run's own checkpoint would be resumed
        leftover.unlink()
    _, stopped = train(loaded, tmp_path, family, monkeypatch, cache, tmp_path / "resumed", stop_after_steps=2)
    assert stopped["steps"] == 2 and stopped["stopped_by"] == "budget"
    _, resumed = train(loaded, tmp_path, family, monkeypatch, cache, tmp_path / "resumed")
    assert resumed["steps"] == 6 and resumed["loss_curve"] == whole["loss_curve"] and resumed["config"] == whole["config"]
    want, got = (load(tmp_path / name, loaded.model, "tiny") for name in ("whole", "resumed"))
    assert want.family == got.family == LOADED_AS.get(family, family)
    for key, value in want.head.state_dict().items():
        assert torch.equal(value, got.head.state_dict()[key]), key


@pytest.mark.parametrize("code, row", [
    ({"commit": "ab" * 20, "dirty": False}, f"| Code | commit {'ab' * 20} (clean; the shipped heads folder aside) |"),
    ({"commit": "ab" * 20, "dirty": True}, "(with uncommitted changes; the shipped heads folder aside) |"),
    ({"commit": None, "dirty": None}, "| Code | unknown (no git checkout, or git could not tell) |"),
])
def test_the_model_card_names_the_checkout_that_trained_it(tmp_path, loaded, monkeypatch, code, row):
    """The card's command remakes the weights with the code of the commit it names."""
    _, card = train(loaded, tmp_path, "kangaroo", monkeypatch, tmp_path / "data", tmp_path / "out", steps=2, code=code)
    assert card["code"] == code and row in (tmp_path / "out" / "README.md").read_text()
    _, unnamed = train(loaded, tmp_path, "kangaroo", monkeypatch, tmp_path / "data", tmp_path / "other", steps=2)
    assert "code" not in unnamed and "| Code |" not in (tmp_path / "other" / "README.md").read_text()


def test_a_budget_stopped_runs_card_command_remakes_its_weights_exactly(tmp_path, loaded, monkeypatch):
    """The card of a run the budget stopped at step 2 of 6 prints --steps 6 --stop-at 2 and no budget;
    that run, from nothing, ends on the same weights. --steps 2 alone would not: its cosine schedule
    reaches zero at step 2."""
    cache = tmp_path / "data"
    _, stopped = train(loaded, tmp_path, "medusa", monkeypatch, cache, tmp_path / "stopped", stop_after_steps=2)
    assert stopped["stopped_by"] == "budget" and stopped["command"] == "specatlas train x --steps 6 --stop-at 2"
    assert "```\nspecatlas train x --steps 6 --stop-at 2\n```" in (tmp_path / "stopped" / "README.md").read_text()
    for leftover in cache.glob("*.ckpt"):  # a new machine: nothing to resume
        leftover.unlink()
    _, again = train(loaded, tmp_path, "medusa", monkeypatch, cache, tmp_path / "again", stop=2)
    assert (again["steps"], again["stopped_by"], again["command"]) == (2, "stop", stopped["command"])
    assert "2 steps of 6 planned (stopped there by --stop-at)" in (tmp_path / "again" / "README.md").read_text()
    _, short = train(loaded, tmp_path, "medusa", monkeypatch, cache, tmp_path / "short", steps=2)
    assert short["command"] == "specatlas train x --steps 2"
    heads = {name: load(tmp_path / name, loaded.model, "tiny").head.state_dict() for name in ("stopped", "again", "short")}
    assert all(torch.equal(value, heads["again"][key]) for key, value in heads["stopped"].items())
    assert not all(torch.equal(value, heads["short"][key]) for key, value in heads["stopped"].items())


def test_the_card_command_keeps_what_shapes_the_weights_and_parses_back():
    import shlex

    from specatlas.cli import build_parser, main
    from specatlas.train import card_command

    argv = ["train", "specdecpp", "--budget-minutes", "10", "--steps", "1000", "--tokens", "250000", "--output", "out",
            "--data", "my data", "--seed", "3"]
    command = training.reproducing(card_command(build_parser(argv).parse_args(argv), "specdecpp"),
                                   training.Progress(step=532, planned=1000, stopped_by="budget"))
    assert command == "specatlas train specdecpp --data 'my data' --tokens 250000 --seed 3 --steps 1000 --stop-at 532"
    again = build_parser(shlex.split(command)[1:]).parse_args(shlex.split(command)[1:])
    assert (again.steps, again.stop_at, again.tokens, str(again.data), again.seed, again.output) == \
        (1000, 532, 250000, "my data", 3, None)
    assert main(["train", "medusa", "--steps", "5", "--stop-at", "6"]) == 2


def test_shipped_cards_of_stopped_runs_print_the_command_that_remakes_them():
    """Every shipped head trained on a step schedule (its card records `planned_steps`): the card's
    command parses as `specatlas train`, runs its schedule, stops where the run stopped, and trains on
    the shards the card names, however many `specatlas train-data` has built since."""
    import shlex

    from specatlas.cli import build_parser
    from specatlas.paths import repo_root

    cards = [json.loads(path.read_text()) for path in (repo_root() / "reference_impls/trained_heads").glob("*/training.json")]
    scheduled = [card for card in cards if "planned_steps" in card]
    assert len(scheduled) == len(cards) >= 9  # every shipped head is on a step schedule
    assert {card["family"] for card in scheduled if card["steps"] < card["planned_steps"]} >= {"pass"}  # a --stop-at card
    for card in scheduled:
        argv = shlex.split(card["command"])[1:]
        args = build_parser(argv).parse_args(argv)
        stop = card["steps"] if card["steps"] < card["planned_steps"] else None
        schedule = (None, card["config"]["epochs"]) if "epochs" in card["config"] else (card["planned_steps"], None)
        assert (args.steps, args.epochs, args.stop_at, args.seed) == (*schedule, stop, card["config"]["seed"]), card["family"]
        assert "--budget-minutes" not in argv
        # the data is pinned: the card's --tokens selects the shards it names (their combined hash)
        chosen = data_shards.selected(data_shards.default_folder(card["base_model"]), args.tokens)
        assert data_shards.describe(data_shards.default_folder(card["base_model"]), [(e["sha256"], []) for e in chosen],
                                   data_shards.HELD_OUT_SHARDS) == card["data_source"], card["family"]


def test_epochs_resolve_to_the_steps_that_draw_the_training_data_that_often(tmp_path, loaded):
    """Each family's epoch is counted in what its step draws: whole conversations (EAGLE 4, EAGLE-3 1,
    Kangaroo, DistillSpec, SpecDec++, PARD and PARD-2 2), positions after the shared prompt (Medusa, Hydra,
    ReDrafter: 256), answer positions (PaSS: 48); steps = ceil(epochs x data / per step)."""
    import math

    features = training.features(loaded, tiny_shards(loaded), (), tmp_path)
    train_ids, _ = training.split(features, 0)
    assert len(train_ids) == 7  # 8 conversations, one held out
    start = training.shared_prompt_prefix(features)
    rows = sum(len(features.tokens[c]) - start for c in train_ids)
    answers = sum(len(features.tokens[c]) - features.prompt_lengths[c] for c in train_ids)
    conversations, positions = "conversations", "positions"
    drawn = {"eagle": (7, 4, conversations), "eagle3": (7, 1, conversations), "kangaroo": (7, 2, conversations),
             "distillspec": (7, 2, conversations), "specdecpp": (7, 2, conversations), "pard": (7, 2, conversations),
             "pard2": (7, 2, conversations), "dflash": (7, 2, conversations), "dflash-cpu": (7, 2, conversations),
             "medusa": (rows, 256, positions),
             "hydra": (rows, 256, positions), "redrafter": (rows, 256, positions), "pass": (answers, 48, "answer positions")}
    assert set(drawn) == set(HEADS) and rows > answers > 7
    for family, (examples, per_step, unit) in drawn.items():
        assert FAMILIES[family].epoch(features, train_ids) == (examples, per_step, unit)
        for epochs in (0.1, 1, 2.5, 40):
            assert FAMILIES[family].epoch_steps(features, epochs, 0) == max(1, math.ceil(epochs * examples / per_step))
    assert FAMILIES["eagle3"].epoch_steps(features, 2, 0) == 14 and FAMILIES["eagle"].epoch_steps(features, 2, 0) == 4
    assert FAMILIES["eagle3"].epoch_steps(features, 0.3, 0) == 3  # 0.3 x 7 = 2.1: rounded up, never 2 or 4


def test_an_epoch_run_records_its_epochs_and_resolved_steps_and_its_command_says_epochs(tmp_path, loaded, monkeypatch):
    from specatlas.cli import build_parser

    cache = tmp_path / "data"
    _, card = train(loaded, tmp_path, "eagle3", monkeypatch, cache, tmp_path / "epochs", steps=14, epochs=2)
    assert card["config"]["epochs"] == 2 and card["config"]["steps"] == card["steps"] == card["planned_steps"] == 14
    assert card["epochs_seen"] == {"epochs": 2.0, "unit": "conversations", "per_epoch": 7, "per_step": 1}
    assert card["command"] == "specatlas train x --epochs 2"
    assert build_parser(["train", "eagle3", "--epochs", "2"]).parse_args(["train", "eagle3", "--epochs", "2"]).epochs == 2
    assert "14 steps (seed 0); --epochs 2: 2.0 epochs drawn (1 of the 7 training conversations a step, at random)" in \
        (tmp_path / "epochs" / "README.md").read_text()
    _, steps = train(loaded, tmp_path, "eagle3", monkeypatch, cache, tmp_path / "steps", steps=14)
    assert "epochs" not in steps["config"] and steps["command"] == "specatlas train x --steps 14"  # --steps keys unchanged
    assert steps["epochs_seen"]["epochs"] == 2.0  # what a --steps run drew is recorded too
    assert len(list(cache.glob("eagle3-*.ckpt"))) == 2  # keyed by the whole config, epochs included


def test_epochs_with_steps_or_a_family_without_a_schedule_is_one_line(capsys):
    from specatlas.cli import main

    assert main(["train", "eagle3", "--steps", "5", "--epochs", "2"]) == 2
    assert main(["train-curve", "eagle3", "--steps", "5", "--epochs", "2"]) == 2
    assert main(["train", "fr-spec", "--epochs", "2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["specatlas train: --epochs and --steps both set the schedule: give one",
                   "specatlas train-curve: --epochs and --steps both set the schedule: give one",
                   "specatlas train: fr-spec counts its data once and has no schedule: --epochs does not apply"]


def test_another_seed_or_schedule_never_resumes_a_run(tmp_path, loaded, monkeypatch):
    cache = tmp_path / "data"
    train(loaded, tmp_path, "medusa", monkeypatch, cache, tmp_path / "a", stop_after_steps=2)
    assert len(list(cache.glob("medusa-*.ckpt"))) == 1
    _, other_seed = train(loaded, tmp_path, "medusa", monkeypatch, cache, tmp_path / "b", seed=1, stop_after_steps=3)
    _, other_steps = train(loaded, tmp_path, "medusa", monkeypatch, cache, tmp_path / "c", steps=7, stop_after_steps=3)
    assert other_seed["steps"] == other_steps["steps"] == 3  # each started from step 0, not from the first run's 2
    assert len(list(cache.glob("medusa-*.ckpt"))) == 3


def test_a_change_to_a_familys_training_code_never_resumes_its_checkpoint(tmp_path, loaded, monkeypatch):
    """The config cannot tell a changed loss: the checkpoint key also hashes the code that trains."""
    import sys

    cache = tmp_path / "data"
    train(loaded, tmp_path, "medusa", monkeypatch, cache, tmp_path / "a", stop_after_steps=2)
    module = sys.modules[type(FAMILIES["medusa"]).__module__]
    changed = tmp_path / "medusa.py"
    changed.write_bytes(open(module.__file__, "rb").read() + b"# a changed loss\n")
    monkeypatch.setattr(module, "__file__", str(changed))
    _, again = train(loaded, tmp_path, "medusa", monkeypatch, cache, tmp_path / "b", stop_after_steps=3)
    assert again["steps"] == 3 and len(list(cache.glob("medusa-*.ckpt"))) == 2  # from step 0, beside the other


def test_loss_vocabulary_scores_the_frequent_tokens_and_every_label():
    torch.manual_seed(0)
    weight, features = torch.randn(50, 8), torch.randn(6, 8)
    labels = torch.tensor([3, 7, 7, 41, -100, 3])  # 41 is not among the frequent tokens
    everything = training.LossVocabulary(torch.arange(50), weight)
    assert torch.allclose(everything.cross_entropy(features, labels),
                          torch.nn.functional.cross_entropy(features @ weight.T, labels, ignore_index=-100))
    frequent = torch.tensor([7, 3, 0, 1])
    subset = training.LossVocabulary(frequent, weight).cross_entropy(features, labels)
    ids = torch.tensor([7, 3, 0, 1, 41])
    local = {7: 0, 3: 1, 41: 4}
    kept = labels != -100
    expected = torch.nn.functional.cross_entropy(features[kept] @ weight[ids].T,
                                                 torch.tensor([local[int(x)] for x in labels[kept]]))
    assert torch.allclose(subset, expected)


def test_the_share_of_drafts_outside_the_loss_vocabulary_is_counted_by_draft_position(tmp_path, loaded, monkeypatch):
    vocabulary = training.LossVocabulary(torch.tensor([7, 3, 0]), torch.randn(50, 8))
    drafts = [torch.tensor([[7, 41], [3, 3]]), torch.tensor([[9, 0], [0, 12]])]  # [positions, heads] per conversation
    assert training.outside_share(drafts, vocabulary) == {"drafts_outside_loss_vocabulary_by_position": [0.25, 0.5]}
    empty = torch.zeros(0, 2, dtype=torch.long)  # no held-out position with every label: no NaN in the card
    assert training.outside_share([empty], vocabulary) == {"drafts_outside_loss_vocabulary_by_position": None}
    for family in ("medusa", "hydra"):  # the heads that draft over the whole vocabulary report it on their card
        _, card = train(loaded, tmp_path, family, monkeypatch, tmp_path / "data", tmp_path / family, steps=2)
        shares = card["held_out"]["drafts_outside_loss_vocabulary_by_position"]
        assert len(shares) == FAMILIES[family].num_heads and all(0 <= x <= 1 for x in shares)
        assert "| Held-out top-1 drafts outside the loss vocabulary" in (tmp_path / family / "README.md").read_text()


def test_frequency_ranking_counts_the_targets_answer_choices():
    features = training.Features([torch.zeros(5), torch.zeros(4)], [2, 1], {}, [torch.tensor([9, 4, 4, 2, 2]),
                                                                               torch.tensor([2, 2, 1, 4])])
    # Answers start at position prompt_length - 1: [4, 4, 2, 2] and [2, 2, 1, 4].
    assert training.frequency_ranked(features, [0, 1], 10).tolist() == [2, 4, 1]


def test_distilled_drafter_round_trips_through_its_shipped_format(tmp_path, loaded):
    """Saved and loaded back: the same weights (rounded once to the stored precision) and the same drafts."""

    torch.manual_seed(0)
    model = loaded.model
    student = DraftLayers.from_target(model, 2, torch.tensor([5, 3, 15, 1, 2]))
    for parameter in student.parameters():
        parameter.data += 0.05 * torch.randn_like(parameter)  # as if trained
    stored(student)
    FAMILIES["distillspec"].save(student, tmp_path, model, "tiny", {"num_hidden_layers": 2, "draft_vocab_size": 5})
    loaded_back = load(tmp_path, model, "tiny")
    assert loaded_back.family == "distillspec"
    assert all(torch.equal(loaded_back.head.state_dict()[key], value) for key, value in student.state_dict().items())
    tokens = torch.tensor([[1, 2, 3, 4, 5, 6]])
    want, got = student.drafter(model)(input_ids=tokens).logits, loaded_back.head.drafter(model)(input_ids=tokens).logits
    assert torch.equal(want, got)
    assert torch.isinf(got[..., [0, 4, 6]]).all() and torch.isfinite(got[..., [5, 3, 15, 1, 2]]).all()


def test_the_shipped_distilled_drafter_is_the_embedded_models_default_draft_model(tmp_path, monkeypatch):
    from specatlas.impls.families import checkpoints
    from specatlas.impls.methods import core as methods
    from specatlas.impls.engine.decoding import SpeculativeDecoder
    from specatlas.impls.engine.models import EMBEDDED

    model = tiny_llama(5, layers=4)
    FAMILIES["distillspec"].save(DraftLayers.from_target(model, 2, torch.arange(12)), tmp_path / f"{EMBEDDED}-distillspec",
                                 model, EMBEDDED, {"num_hidden_layers": 2, "draft_vocab_size": 12})
    monkeypatch.setattr(checkpoints, "SHIPPED_HEADS", tmp_path)
    sliced = methods.speculative_sampling(model)  # another target
    assert sliced.drafter.describe().startswith("shallow slice") and sliced.weights == {}
    monkeypatch.setattr(model.config, "_name_or_path", f"/cache/specatlas/models/{EMBEDDED}")
    decoder = methods.speculative_sampling(model)
    assert decoder.drafter.describe().startswith("DistillSpec drafter (2 distilled layers of the target, its head over 12 tokens")
    assert decoder.weights == {f"{EMBEDDED}-distillspec": tmp_path / f"{EMBEDDED}-distillspec" / "model.safetensors"}
    for prompt in ([1], [3, 3, 0, 7], [2, 14, 9, 9, 2]):
        assert decoder.generate(prompt, 10).tokens == SpeculativeDecoder(model).generate(prompt, 10).tokens


def test_fr_spec_ranking_is_the_training_answers_most_frequent_tokens_with_eos(tmp_path, loaded):
    from specatlas.impls.methods.heads import frequent_tokens
    from specatlas.train import default_output

    features = training.features(loaded, tiny_shards(loaded), (), tmp_path)
    summary = FAMILIES["fr-spec"].train(loaded, features, tmp_path, tmp_path / "eagle", 1.0, None, 0, "x", None)
    size = loaded.model.config.vocab_size // 4  # FR-Spec's quarter of the vocabulary
    assert f"freq_{size}.pt" in summary and default_output(FAMILIES["fr-spec"], "tiny").name == "eagle-head"
    ranked, ranking = frequent_tokens(tmp_path / "eagle", size, False)
    assert ranking == {str(tmp_path / "eagle" / f"freq_{size}.pt"): tmp_path / "eagle" / f"freq_{size}.pt"}
    ranked = ranked.tolist()
    train_ids, _ = training.split(features)
    expected = training.frequency_ranked(features, train_ids, 16).tolist()[:size]
    assert 15 in ranked and len(ranked) == len(set(ranked)) <= size  # the end-of-sequence token always
    assert ranked[: size - 1] == expected[: size - 1]


def test_training_time_test_computes_what_drafting_a_chain_computes():
    """Step k of the unrolled head at row t equals drafting k tokens after row t with a head cache
    (rows 0..t fed the target's states, then one row per drafted token): the training mask and
    positions are the ones the drafter uses."""
    from specatlas.impls.families.eagle3 import Eagle3Head, training_time_test
    from specatlas.impls.families.blocks import HeadCache, LayerConfig

    torch.manual_seed(0)
    config = LayerConfig(hidden_size=8, intermediate_size=16, num_attention_heads=2, num_key_value_heads=1,
                         head_dim=4, rms_norm_eps=1e-6, rope_theta=10000.0)
    head, embed = Eagle3Head(config, 8, 12, 6).eval(), torch.randn(12, 8)
    rows, steps, deep = 6, 3, torch.tensor([1, 4, 5])
    tokens, states = torch.randint(12, (1, rows + steps - 1)), torch.randn(1, rows, 24)
    with torch.no_grad():
        unrolled = [out for _, out in training_time_test(head, tokens, states, embed, steps)]
        subset = list(training_time_test(head, tokens, states, embed, steps, deep))
        assert [rows.tolist() for rows, _ in subset] == [list(range(rows)), [1, 4, 5], [1, 4, 5]]
        for k in range(1, steps):  # continuing only some rows computes exactly their outputs among all
            torch.testing.assert_close(subset[k][1], unrolled[k][:, deep], atol=1e-5, rtol=1e-4)
        for t in range(rows):
            cache = HeadCache()
            out = head.hidden(embed[tokens[:, : t + 1]], states[:, : t + 1], torch.arange(t + 1)[None], cache)[:, -1:]
            torch.testing.assert_close(out[0, 0], unrolled[0][0, t])
            for k in range(1, steps):
                out = head.hidden(embed[tokens[:, t + k : t + k + 1]], out, torch.tensor([[t + k]]), cache)
                torch.testing.assert_close(out[0, 0], unrolled[k][0, t], atol=1e-5, rtol=1e-4)


def test_a_family_defined_in_one_file_and_one_table_line_trains_saves_loads_and_drafts(tmp_path, loaded, monkeypatch):
    """tests/impls/linear_family.py is a whole family (module, checkpoint layout, model card,
    training, drafter and method builder); registering it is its one line in `FAMILIES`."""
    from specatlas.impls import families
    from specatlas.impls.engine.decoding import SpeculativeDecoder
    from specatlas.impls.engine.draft_length import DraftLengthPolicy
    from specatlas.impls.registry import MethodSpec
    from tests.impls.linear_family import LinearFamily, LinearHead

    monkeypatch.setitem(families.FAMILIES, "linear", LinearFamily())
    _, card = train(loaded, tmp_path, "linear", monkeypatch, tmp_path / "data", tmp_path / "linear")
    assert card["family"] == "linear" and card["steps"] == 6 and card["held_out"]["positions"] > 0
    assert (tmp_path / "linear" / "README.md").read_text().startswith(
        "# linear head for tiny\n\na linear head on the target's final state, trained by `specatlas train`")
    checkpoint = load(tmp_path / "linear", loaded.model, "tiny")
    assert checkpoint.family == "linear" and isinstance(checkpoint.head, LinearHead)
    spec = MethodSpec(id="linear-toy", name="a linear head", lossless=True, builder="tests.impls.linear_family:linear_method",
                      trained_head="linear")
    decoder = spec.build(loaded.model, None, policy=DraftLengthPolicy.paper(), drafter_checkpoint=tmp_path / "linear")
    prompt = [1, 2, 3, 4]
    result = decoder.generate(prompt, 12)
    assert result.tokens == SpeculativeDecoder(loaded.model).generate(prompt, 12).tokens
    assert sum(result.stats.drafted_at) > 0
