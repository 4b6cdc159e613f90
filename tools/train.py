"""`specatlas train PAPER-ID`: train a draft head for a target model on the target's own answers.

    specatlas train medusa                      # Medusa-2-style heads for the embedded model
    specatlas train eagle --budget-minutes 40   # the EAGLE-1/2 head
    specatlas train kangaroo                    # Kangaroo's adapter on the target's exit after layer 2
    specatlas train distillspec                 # DistillSpec: the target's first 2 layers, distilled (the default drafter)
    specatlas train hydra                       # Hydra's sequentially dependent heads
    specatlas train eagle3                      # the EAGLE-3 head (training-time test)
    specatlas train fr-spec                     # FR-Spec's token ranking, beside the EAGLE head (seconds)
    specatlas train medusa --data-only          # only build (or finish building) the cached data

The trainable families are `specatlas.impls.families.FAMILIES`, named by paper id or alias (each
family's `paper` and `aliases`).

Data (the target's greedy answers to this project's prompt corpus, specatlas/prompts/train.jsonl, and
its hidden states) is built once and cached under the user cache dir; training checkpoints there
too, so an interrupted run resumes where it stopped. The result is a float16 checkpoint in the
published layout of the head's family (loadable with `specatlas.impls.engine.checkpoints.load`) plus a
model card (README.md) with the data, steps, time, loss and held-out acceptance.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from pathlib import Path

import torch
from tqdm import tqdm

from specatlas.cli import CommandError, add_trust_remote_code
from specatlas.fsutil import WriteError, output_dir
from specatlas.impls.families import training
from specatlas.impls.engine.checkpoints import SHIPPED_HEADS, shipped_head_folder
from specatlas.impls.families import FAMILIES, Family
from specatlas.impls.engine.models import EMBEDDED, ModelLoadError, load_model, pick_device
from specatlas.train_prompts import PROMPTS


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("method", metavar="PAPER_ID", help=f"paper id or alias: {', '.join(family.paper for family in FAMILIES.values())}")
    parser.add_argument("--model", help="local HF folder or hub id (default: the embedded SmolLM2-135M-Instruct)")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda, ...")
    parser.add_argument("--output", type=Path, help="folder for the trained checkpoint, new, empty or an earlier "
                                                     "output (default: the shipped heads folder for the embedded "
                                                     "model, else ./<family>-head)")
    parser.add_argument("--budget-minutes", type=float, default=45.0, help="stop training after this long (the schedule is in steps; a budget stop is recorded and a rerun resumes)")
    parser.add_argument("--steps", type=int, help="training steps (default: the family's; the budget may stop earlier)")
    parser.add_argument("--max-new-tokens", type=int, default=320, help="answer length cap when generating data")
    parser.add_argument("--batch-size", type=int, default=16, help="prompts answered together when generating data")
    parser.add_argument("--prompts", type=int, help="use only the N shortest prompts of the corpus (default: all)")
    parser.add_argument("--data-only", action="store_true", help="build the cached data, do not train")
    parser.add_argument("--seed", type=int, default=0)
    add_trust_remote_code(parser)
    parser.add_argument("--worker", default="0/1", help="I/N: build only the data of prompts with id %% N == I "
                                                     "(run N processes to build it in parallel; implies --data-only)")


# In every folder `specatlas train` writes: a later run may write there again (fsutil.output_dir).
TRAIN_MARKER = ".specatlas-train"


def resolve(name: str) -> Family | None:
    """The family `specatlas train NAME` trains: NAME is its paper id or an alias."""
    key = name.strip().lower()
    return next((family for family in FAMILIES.values() if key == family.paper or key in family.aliases), None)


def default_output(family: Family, model_name: str) -> Path:
    if model_name == EMBEDDED:
        return shipped_head_folder(family.folder or family.name)
    return Path.cwd() / f"{family.folder or family.name}-head"


def execute(args: argparse.Namespace) -> int:
    trainer = resolve(args.method)
    if trainer is None:
        names = [name for family in FAMILIES.values() for name in (family.paper, *family.aliases)]
        close = difflib.get_close_matches(args.method.lower(), names, n=3, cutoff=0.5)
        hint = f"; closest: {', '.join(close)}" if close else ""
        raise CommandError(f"no trainable head for {args.method!r}{hint}; trainable: "
                           f"{', '.join(family.paper for family in FAMILIES.values())}")
    if not 0 < args.budget_minutes < float("inf") or args.max_new_tokens < 1 or args.batch_size < 1 \
            or (args.prompts or 1) < 1 or (args.steps is not None and args.steps < 1):
        raise CommandError("--budget-minutes (finite), --steps, --max-new-tokens, --batch-size and --prompts must be "
                           "positive")
    worker = args.worker.split("/")
    if len(worker) != 2 or not all(part.isdigit() for part in worker) or not int(worker[0]) < int(worker[1]):
        raise CommandError(f"--worker must be I/N with 0 <= I < N, got {args.worker!r}")

    torch.manual_seed(args.seed)
    family = trainer.name

    def checked(output: Path) -> Path:
        try:
            return output_dir(output, f"the {family} head", TRAIN_MARKER, allowed=SHIPPED_HEADS,
                              legacy=lambda folder: (folder / "training.json").is_file())
        except WriteError as exc:
            raise CommandError(str(exc)) from None

    output = args.output and checked(args.output)  # a given folder before the model loads, the default after
    try:
        loaded = load_model(args.model, pick_device(args.device), torch.float32, args.trust_remote_code)
    except ModelLoadError as exc:
        raise CommandError(str(exc), status=1)
    output = output or checked(default_output(trainer, loaded.name))
    folder = training.data_dir(loaded.name, PROMPTS, args.max_new_tokens)
    print(f"specatlas train: {trainer.paper} ({family}) for {loaded.name}; data in {folder}", file=sys.stderr)
    index, workers = map(int, args.worker.split("/"))
    ids = training.shortest(PROMPTS, args.prompts)
    training.generate(loaded, PROMPTS, folder, args.max_new_tokens, args.batch_size, tqdm, (index, workers), ids)
    if args.data_only or workers > 1:
        return 0
    try:
        features = training.read_data(folder, ids, trainer.layers(loaded.model))
    except training.DataError as exc:
        raise CommandError(str(exc), status=1)
    print(f"specatlas train: data: {len(ids)} conversations, {sum(map(len, features.tokens))} tokens",
          file=sys.stderr)
    command = " ".join(["specatlas", "train", args.method] + _without_output(sys.argv[sys.argv.index(args.method) + 1 :])
                       if args.method in sys.argv else ["specatlas", "train", args.method])
    result = trainer.train(loaded, features, folder, output, args.budget_minutes, args.steps,
                           args.seed, command, tqdm)
    (output / TRAIN_MARKER).write_text("written by specatlas train, which may write here again\n", encoding="utf-8")
    print(f"specatlas train: wrote {output} ({result})", file=sys.stderr)
    return 0


def _without_output(argv: list[str]) -> list[str]:
    """The command line without --output: the model card's command writes the folder it sits in."""
    kept, skip = [], False
    for arg in argv:
        if skip or arg == "--output" or arg.startswith("--output="):
            skip = arg == "--output"
            continue
        kept.append(arg)
    return kept

