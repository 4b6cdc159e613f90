"""`specatlas train PAPER-ID`: train a draft head for a target model on the target's own answers.

    specatlas train medusa                      # Medusa-2-style heads for the embedded model
    specatlas train eagle --budget-minutes 40   # the EAGLE-1/2 head
    specatlas train kangaroo                    # Kangaroo's adapter on the target's exit after layer 2
    specatlas train distillspec                 # DistillSpec: the target's first 2 layers, distilled (the default drafter)
    specatlas train hydra                       # Hydra's sequentially dependent heads
    specatlas train redrafter                   # ReDrafter's recurrent draft head
    specatlas train eagle3                      # the EAGLE-3 head (training-time test)
    specatlas train fr-spec                     # FR-Spec's token ranking, beside the EAGLE head (seconds)
    specatlas train eagle3 --tokens 512000      # on the first shards holding 512k answer tokens
    specatlas train eagle3 --epochs 2           # as many steps as draw the training data twice
    specatlas train eagle eagle3 kangaroo       # one after another, on one pass of the target over the data

The trainable families are `specatlas.impls.families.FAMILIES`, named by paper id or alias (each
family's `paper` and `aliases`).

Data: the target's greedy answers built by `specatlas train-data` (shipped for the embedded
model); the target's hidden states over them are computed once and cached under the user cache
dir, where training checkpoints too, so an interrupted run resumes where it stopped. The result is a float16 checkpoint in the
published layout of the head's family (loadable with `specatlas.impls.families.checkpoints.load`) plus a
model card (README.md) with the data, steps, time, loss and held-out acceptance.
"""

from __future__ import annotations

import argparse
import difflib
import json
import shlex
import sys
from pathlib import Path

import torch
from tqdm import tqdm

from specatlas import data_shards
from specatlas.bench.provenance import checkout_state
from specatlas.cli import (MAX_EPOCHS, MAX_MINUTES, MAX_SEED, MAX_STEPS, MAX_TOKENS, CommandError, add_trust_remote_code,
                           disk_error, epochs_given, number)
from specatlas.fsutil import WriteError, output_dir
from specatlas.head_training import resolve, train_one
from specatlas.impls.families import training
from specatlas.impls.families.checkpoints import SHIPPED_HEADS, shipped_head_folder
from specatlas.impls.families import FAMILIES, Family
from specatlas.impls.families.base import HEAD_MARKER, earlier_head
from specatlas.impls.engine.models import EMBEDDED, ModelLoadError, load_model, machine_kernels, pick_device


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("method", metavar="PAPER_ID", nargs="+",
                        help=f"paper id or alias: {', '.join(family.paper for family in FAMILIES.values())}; several "
                             "train one after another on one pass of the target over the data")
    parser.add_argument("--model", help="local HF folder or hub id (default: the embedded SmolLM2-135M-Instruct)")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda, ...")
    parser.add_argument("--output", type=Path, help="folder for the trained checkpoint, new, empty or an earlier "
                                                     "output (default: the shipped heads folder for the embedded "
                                                     "model, else ./<family>-head)")
    parser.add_argument("--budget-minutes", type=number(float, 0, MAX_MINUTES, above=True), default=45.0, help="stop training after this long (the schedule is in steps; a budget stop is recorded and a rerun resumes)")
    parser.add_argument("--steps", type=number(int, 1, MAX_STEPS), help="training steps (default: the family's; the budget may stop earlier)")
    parser.add_argument("--epochs", type=number(float, 0, MAX_EPOCHS, above=True),
                        help="instead of --steps: the steps that draw the training data this many times (each step "
                             "draws the family's batch at random), resolved from the data before training and "
                             "recorded in the model card with them")
    parser.add_argument("--stop-at", type=number(int, 1, MAX_STEPS), metavar="STEP",
                        help="end at this step of the schedule, --steps or --epochs (a model card's command uses it to remake a "
                             "run the budget stopped)")
    parser.add_argument("--data", type=Path, help="a `specatlas train-data` folder (default: the shipped data for the "
                                                   "embedded model, else ./train-data-<model>)")
    parser.add_argument("--tokens", type=number(int, 1, MAX_TOKENS), help="train on the first data shards holding this many answer tokens "
                                                   "(default: all, recorded in the model card's command as the count)")
    parser.add_argument("--seed", type=number(int, 0, MAX_SEED), default=0)
    parser.add_argument("--replace-anyway", action="store_true",
                        help="write over the shipped head even when the retrained one's held-out acceptance is no better "
                             "than its model card's (without it such a head is refused, the shipped one kept)")
    add_trust_remote_code(parser)


def default_output(family: Family, model_name: str) -> Path:
    if model_name == EMBEDDED:
        return shipped_head_folder(family.folder or family.name)
    return Path.cwd() / f"{family.folder or family.name}-head"


def execute(args: argparse.Namespace) -> int:
    trainers = {name: resolved(name) for name in args.method}
    if len({trainer.name for trainer in trainers.values()}) < len(args.method):
        raise CommandError(f"a family is named twice in {' '.join(args.method)}")
    epochs = epochs_given(args)
    for trainer in trainers.values():
        if epochs is not None and not trainer.default_steps:
            raise CommandError(f"{trainer.name} counts its data once and has no schedule: --epochs does not apply")
        if epochs is None and args.stop_at is not None and args.stop_at > (args.steps or trainer.default_steps):
            raise CommandError(f"--stop-at {args.stop_at} is past {trainer.name}'s schedule of "
                               f"{args.steps or trainer.default_steps} steps")
    if args.output and len(trainers) > 1:
        raise CommandError("--output is one head's folder: give it with one family (the others go to their default folders)")

    def checked(output: Path, trainer: Family) -> Path:
        try:
            return output_dir(output, f"the {trainer.name} head", HEAD_MARKER, allowed=SHIPPED_HEADS, legacy=earlier_head)
        except WriteError as exc:
            raise CommandError(str(exc)) from None

    output = args.output and checked(args.output, next(iter(trainers.values())))  # a given folder before the model loads
    code = checkout_state()  # now: a multi-hour run may outlive the checkout's state
    try:
        loaded = load_model(args.model, pick_device(args.device), torch.float32, args.trust_remote_code,
                            machine_kernels())
    except ModelLoadError as exc:
        raise CommandError(str(exc), status=1)
    try:  # one training job per target at a time: they share its cached states and checkpoints
        with training.training_lock(loaded.name):
            return train_all(args, loaded, trainers, output, checked, epochs, code)
    except WriteError as exc:
        raise CommandError(str(exc), status=1) from None
    except OSError as exc:  # a full disk: checkpoints, heads and curves are replaced whole, never cut short
        raise CommandError(disk_error(exc), status=1) from None


def train_all(args, loaded, trainers: dict, output: Path | None, checked, epochs, code) -> int:
    """`train` from the model load on, under the training lock."""
    outputs = {name: output or checked(default_output(trainer, loaded.name), trainer) for name, trainer in trainers.items()}
    data = args.data or data_shards.default_folder(loaded.name)
    # "All the data" changes meaning when `specatlas train-data` appends shards: the run, and the
    # command its card prints, name the answer tokens that select today's shards.
    args.tokens = args.tokens or data_shards.training_tokens(data)
    if len(trainers) > 1:  # one pass of the target caches every layer the families read (each would run its own)
        shards, _ = data_shards.load(data, loaded.tokenizer, args.tokens)
        layers = tuple({layer for trainer in trainers.values() for layer in trainer.layers(loaded.model) or ()})
        for shard in tqdm(shards, desc="target states", unit="shard"):  # one at a time: only the cache keeps them
            training.features(loaded, [shard], layers, training.features_folder(loaded.name))
    for name, trainer in trainers.items():
        try:  # the head folder is checked again when saved: something else may have written there since
            result = train_one(trainer, loaded, data, args.tokens, outputs[name], args.budget_minutes, args.steps,
                               args.seed, card_command(args, name), args.stop_at, epochs, code, args.replace_anyway)
        except WriteError as exc:
            raise CommandError(str(exc)) from None
        print(f"specatlas train: wrote {outputs[name]} ({result})", file=sys.stderr)
        budget_stop(trainer, outputs[name], args.budget_minutes)
    return 0


def budget_stop(trainer: Family, output: Path, budget_minutes: float) -> None:
    """Say so when the time budget, not the schedule, ended `trainer`'s run written to `output`: its
    head is the schedule's prefix, and only a larger budget (the run resumes) finishes it."""
    if not trainer.default_steps:  # no schedule to stop (FR-Spec counts once, beside EAGLE's card or none)
        return
    card = json.loads((output / "training.json").read_text(encoding="utf-8"))
    if card.get("stopped_by") == "budget":
        print(f"specatlas train: the --budget-minutes {budget_minutes:g} budget stopped {trainer.name} at step "
              f"{card['steps']:,} of {card['planned_steps']:,}; the same command with a larger --budget-minutes "
              "resumes it there and finishes the schedule", file=sys.stderr)


def resolved(name: str) -> Family:
    """`resolve`, or the one-line error naming the closest trainable families."""
    trainer = resolve(name)
    if trainer is None:
        names = [name for family in FAMILIES.values() for name in (family.paper, *family.aliases)]
        close = difflib.get_close_matches(name.lower(), names, n=3, cutoff=0.5)
        hint = f"; closest: {', '.join(close)}" if close else ""
        raise CommandError(f"no trainable head for {name!r}{hint}; trainable: "
                           f"{', '.join(family.paper for family in FAMILIES.values())}")
    return trainer


def card_command(args: argparse.Namespace, method: str) -> str:
    """The command a model card prints for the head of `method` (one of the families trained),
    less the schedule (`training.reproducing` adds --steps and --stop-at as the run went): what
    shapes the weights, never --output (the card's command writes the folder it sits in) nor
    --budget-minutes (it only stops a run), nor the other families trained beside it."""
    parts = ["specatlas", "train", method]
    for flag, value in (("--model", args.model), ("--device", None if args.device == "auto" else args.device),
                        ("--data", args.data), ("--tokens", args.tokens), ("--seed", args.seed or None)):
        if value is not None:
            parts += [flag, shlex.quote(str(value))]
    return " ".join(parts + ["--trust-remote-code"] * bool(args.trust_remote_code))
