"""A draft head's training and its held-out measurement: the steps `specatlas train` and
`specatlas train-eval` take once, and `specatlas train-curve` takes for each training data size.
Heavy imports (torch, the families) wait until a step runs, so a command's bad input is answered first."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from specatlas.cli import MAX_STEPS, CommandError

if TYPE_CHECKING:
    from specatlas.impls.families import Family


def resolve(name: str) -> Family | None:
    """The family `specatlas train NAME` trains: NAME is its paper id or an alias."""
    from specatlas.impls.families import FAMILIES

    key = name.strip().lower()
    return next((family for family in FAMILIES.values() if key == family.paper or key in family.aliases), None)


def train_one(trainer: Family, loaded, data: Path, tokens: int | None, output: Path, budget_minutes: float,
              steps: int | None, seed: int, command: str, stop: int | None = None, epochs: float | None = None,
              code: dict | None = None, replace_anyway: bool = False) -> str:
    """Train `trainer`'s module on the data in `data` (its first `tokens` answer tokens) and save it
    to `output`; `epochs` (instead of `steps`) resolves to steps on that data. `code`: the checkout
    the command started in (`provenance.checkout_state`), for the model card. A shipped head is
    replaced only by a better one, unless `replace_anyway` (`head_folders.keep_better`)."""
    from tqdm import tqdm

    from specatlas import data_shards
    from specatlas.impls.families import training
    from specatlas.impls.methods.core import default_draft_model

    print(f"specatlas train: {trainer.paper} ({trainer.name}) for {loaded.name}; data in {data}", file=sys.stderr)
    shards, held_out = data_shards.load(data, loaded.tokenizer, tokens)
    folder = training.features_folder(loaded.name)
    features = training.features(loaded, shards, trainer.layers(loaded.model), folder, tqdm)
    features.source = data_shards.describe(data, shards, held_out)
    features.held_out = list(range(sum(len(conversations) for _, conversations in shards[:held_out])))
    answer_tokens = sum(len(t) - p for t, p in zip(features.tokens, features.prompt_lengths))
    print(f"specatlas train: data: {len(features.tokens)} conversations ({len(features.held_out)} held out), "
          f"{answer_tokens} answer tokens, {sum(map(len, features.tokens))} tokens", file=sys.stderr)
    if epochs is not None:
        steps = trainer.epoch_steps(features, epochs, seed)
        examples, per_step, unit = trainer.epoch(features, training.split(features, seed)[0])
        print(f"specatlas train: {epochs} epochs = {steps} steps ({examples} training {unit}, {per_step} a step)",
              file=sys.stderr)
        if steps > MAX_STEPS:
            raise CommandError(f"--epochs {epochs} is {steps:,} steps on this data, more than {MAX_STEPS:,}")
        if stop is not None and stop > steps:
            raise CommandError(f"--stop-at {stop} is past the schedule's {steps} steps (--epochs {epochs})")
    draft_model = default_draft_model(loaded.model, None)[:2] if trainer.uses_draft_model else None  # (model, label)
    return trainer.train(loaded, features, folder, output, budget_minutes, steps, seed, command, tqdm, draft_model, stop,
                         epochs, code, replace_anyway)


def build(spec, target, draft_model=None, heads: dict[str, Path] | None = None):
    """`spec` at its paper's settings on `target` with the shipped heads (or `heads`' folders, by
    family, and `draft_model`), and the sha256 of every weight file it loaded (by checkpoint name),
    which say whether an earlier measurement still holds."""
    from specatlas.bench.provenance import loaded_weights
    from specatlas.impls.engine.draft_length import DraftLengthPolicy
    from specatlas.impls.engine.models import ModelLoadError

    try:
        given = {"drafter_checkpoint": str(heads[spec.trained_head])} if heads and spec.trained_head else {}
        decoder = spec.build(target, draft_model if spec.uses_draft_model else None, policy=DraftLengthPolicy.paper(),
                             **given)
    except ModelLoadError as exc:
        raise CommandError(f"{spec.id}: {exc}", status=1) from None
    # No trained file behind a draft-model method's default drafter: it fell back to a slice of the target.
    if spec.uses_draft_model and draft_model is None and not decoder.weights:
        raise CommandError(f"{spec.id}: no distilled drafter is shipped for this model (`specatlas train distillspec`); "
                           "its default drafter would be an untrained slice of the target", status=1)
    return decoder, loaded_weights(decoder.weights)


def plain_outputs(target, prompts: list[list[int]], max_new_tokens: int) -> list[list[int]]:
    from specatlas.impls.engine.decoding import SpeculativeDecoder

    plain = SpeculativeDecoder(target)
    return [plain.generate(prompt, max_new_tokens).tokens for prompt in prompts]


def accepted_on(decoder, prompts: list[list[int]], plain: list[list[int]], max_new_tokens: int) -> dict:
    """`decoder` run greedily on `prompts`: mean accepted tokens per step over all steps (each step's
    accepted drafts plus its bonus token), the steps by accepted length, and whether every output
    equals plain decoding's (`plain`, the same prompts' outputs)."""
    accepted, identical = [], True
    for prompt, expected in zip(prompts, plain, strict=True):
        out = decoder.generate(prompt, max_new_tokens)
        accepted += out.stats.accepted_lengths
        identical &= out.tokens == expected
    spread = {str(length): accepted.count(length) for length in sorted(set(accepted))}
    mean = round(sum(accepted) / len(accepted), 3) if accepted else None  # no step: every answer came from the prefill
    return {"steps": len(accepted), "mean_accepted_tokens": mean, "steps_by_accepted_length": spread,
            "identical_to_plain": identical}


def read_checked(path: Path, empty: dict, valid, what: str) -> dict:
    """The JSON file at `path`, `empty` when missing; unreadable or not `valid`, a one-line error
    naming the file and saying `what` it should be."""
    if not path.exists():
        return empty
    from specatlas.fsutil import ReadError, read_json

    try:
        data = read_json(path, 4 << 20)
    except ReadError as exc:
        raise CommandError(f"{path}: {exc}") from None
    if not valid(data):
        raise CommandError(f"{path}: {what}")
    return data


ENTRY_KEYS = ("paper_settings", "prompts", "max_new_tokens", "steps", "mean_accepted_tokens", "steps_by_accepted_length",
              "identical_to_plain", "weights")  # what the training page shows


def is_results(results) -> bool:
    """A held-out acceptance file: its methods' entries each with what the training page shows."""
    return (isinstance(results, dict) and isinstance(results.get("methods"), dict)
            and all(isinstance(entry, dict) and all(key in entry for key in ENTRY_KEYS)
                    and isinstance(entry["steps_by_accepted_length"], dict) and isinstance(entry["weights"], dict)
                    for entry in results["methods"].values()))
