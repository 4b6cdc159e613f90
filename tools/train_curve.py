"""`specatlas train-curve FAMILY`: held-out acceptance against training data size.

    specatlas train-curve eagle3                                  # 32k, 128k, 512k and 2M answer tokens
    specatlas train-curve medusa --tokens 32000,128000 --steps 2000
    specatlas train-curve eagle3 --epochs 2                       # every size drawn twice: steps grow with data

For each size the family is trained with one config (the same schedule, seed and settings; only the
data grows, a prefix of the `specatlas train-data` shards) into the user cache, never over the
shipped head, and measured on the data's held-out shard, the same text for every size: the top-1
chain's acceptance from the model card, and the family's paper method (its paper tree or draft
length) run greedily on held-out prompts with that head: mean accepted tokens per step, the
output checked identical to plain decoding. The schedule is either fixed steps (`--steps`, the
default: a larger data set is drawn fewer times, so its curve mixes data with epochs) or epochs
(`--epochs`: every size drawn as often, its steps resolved per size). Results go to
results/training/<model>-<family>-{steps<S>|epochs<E>}-seed<N>-acceptance-vs-data.json (one file per
config, its "schedule" saying which), one entry per size with its steps and epochs drawn, written as
each finishes (a rerun skips the sizes done); the site charts it on the training page.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from specatlas.cli import (MAX_EPOCHS, MAX_MINUTES, MAX_NEW_TOKENS, MAX_SEED, MAX_STEPS, MAX_TOKENS, CommandError,
                           disk_error, epochs_given, number)
from specatlas.fsutil import WriteError, update_json, writable_dir
from specatlas.paths import training_results_dir

SIZES = (32_000, 128_000, 512_000, 2_000_000)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("method", metavar="PAPER_ID", help="a trainable family, by paper id or alias")
    parser.add_argument("--tokens", default=",".join(map(str, SIZES)), help="answer-token sizes, comma-separated")
    parser.add_argument("--steps", type=number(int, 1, MAX_STEPS), help="training steps at every size (default: the family's)")
    parser.add_argument("--epochs", type=number(float, 0, MAX_EPOCHS, above=True),
                        help="instead of fixed steps: every size drawn this many times (its steps grow with its data)")
    parser.add_argument("--budget-minutes", type=number(float, 0, MAX_MINUTES, above=True), default=600.0,
                        help="time budget of each run")
    parser.add_argument("--prompts", type=number(int, 1, 100_000), default=16, help="held-out prompts the paper method decodes")
    parser.add_argument("--max-new-tokens", type=number(int, 1, MAX_NEW_TOKENS), default=96)
    parser.add_argument("--seed", type=number(int, 0, MAX_SEED), default=0)


def execute(args: argparse.Namespace) -> int:
    import torch

    from specatlas import data_shards
    from specatlas.impls.engine.models import EMBEDDED, ModelLoadError, cache_root, load_model, machine_kernels
    from specatlas.bench.provenance import checkout_state
    from specatlas.head_training import plain_outputs, train_one

    family, sizes = _family_and_sizes(args)
    epochs = epochs_given(args)
    schedule = {"schedule": "epochs", "epochs": epochs} if epochs is not None else \
        {"schedule": "fixed-steps", "steps": args.steps or family.default_steps}
    # One file per config (schedule, seed): a curve's points differ only in the data.
    label = f"epochs{epochs}" if epochs is not None else f"steps{schedule['steps']}"
    path = training_results_dir() / f"{EMBEDDED}-{family.name}-{label}-seed{args.seed}-acceptance-vs-data.json"
    curve = read_curve(path, family.name, EMBEDDED, schedule)  # before the model loads: a damaged file stops nothing long
    try:
        writable_dir(path.parent, "the results folder")  # and so does a folder that takes no file
    except WriteError as exc:
        raise CommandError(str(exc)) from None
    code = checkout_state()  # now: the run may outlive the checkout's state
    try:
        loaded = load_model(None, torch.device("cpu"), torch.float32, kernels=machine_kernels())
    except ModelLoadError as exc:
        raise CommandError(str(exc), status=1)
    from specatlas.impls.families.training import training_lock

    try:  # one training job per target at a time: they share its cached states and checkpoints
        with training_lock(loaded.name):
            data = data_shards.default_folder(loaded.name)
            # A point trained under other family settings (the code changed since) is measured again, so
            # every point of a curve comes from the one config the file is named for.
            done = {p["requested_tokens"] for p in curve["points"] if p.get("config", {}).get("settings") == family.settings()}
            prompts = plain = None  # the same held-out text and plain outputs for every size: made once, when first needed
            for size in sizes:
                if size in done:
                    print(f"specatlas train-curve: {size} tokens already measured", file=sys.stderr)
                    continue
                output = cache_root() / "train-curve" / loaded.name / f"{family.name}-{size}"
                command = f"specatlas train {family.paper} --tokens {size} --seed {args.seed}"  # the card adds the schedule
                train_one(family, loaded, data, size, output, args.budget_minutes, args.steps, args.seed, command, epochs=epochs,
                          code=code)
                card = json.loads((output / "training.json").read_text(encoding="utf-8"))
                if plain is None:
                    prompts, _ = data_shards.held_out_prompts(data, loaded.tokenizer, args.prompts)
                    plain = plain_outputs(loaded.model, prompts, args.max_new_tokens)
                point = {"requested_tokens": size, **_card_facts(card),
                         "paper_method": paper_method_acceptance(family, loaded, output, prompts, plain, args.max_new_tokens)}
                curve = update_json(path, lambda saved, point=point: with_point(
                    (saved if _is_curve(saved, family.name) else curve) | schedule, point))
                print(f"specatlas train-curve: {size} tokens -> {json.dumps(point['paper_method'])}", file=sys.stderr)
    except WriteError as exc:
        raise CommandError(str(exc), status=1) from None
    except OSError as exc:  # a full disk: checkpoints, heads and curves are replaced whole, never cut short
        raise CommandError(disk_error(exc), status=1) from None
    return 0


def _family_and_sizes(args: argparse.Namespace):
    """(the head family, the training data sizes in tokens, ascending) the arguments ask for, or a CommandError."""
    from specatlas.head_training import resolve
    from specatlas.impls.registry import resolve as method

    family = resolve(args.method)
    if family is None or getattr(method(family.paper), "trained_head", None) != family.name:
        raise CommandError(f"{args.method!r} is not a head family whose paper method runs here with its head "
                           "(eagle, eagle3, medusa, hydra, kangaroo)")
    try:
        sizes = sorted({int(part) for part in args.tokens.split(",")})
    except ValueError:
        raise CommandError(f"--tokens must be comma-separated whole numbers, got {args.tokens!r}") from None
    if not sizes or not 1 <= min(sizes) <= max(sizes) <= MAX_TOKENS:
        raise CommandError(f"--tokens must be positive and at most {MAX_TOKENS:,}")
    return family, sizes


def _card_facts(card: dict) -> dict:
    """What a curve point copies from the trained head's card: how it trained and its held-out chain acceptance."""
    keys = ("train_answer_tokens", "train_conversations", "steps", "epochs_seen", "stopped_by", "final_loss", "config")
    return {**{key: card[key] for key in keys}, "code": card.get("code"), "chain": card["held_out"]}


def with_point(curve: dict, point: dict) -> dict:
    """`curve` with `point` in place of any earlier point of its size, points by size. Applied to the
    file as it is when written (update_json), so a run measuring other sizes at once keeps its points."""
    points = [p for p in curve["points"] if p["requested_tokens"] != point["requested_tokens"]] + [point]
    return curve | {"points": sorted(points, key=lambda p: p["requested_tokens"])}


def _is_curve(curve, family: str) -> bool:
    return (isinstance(curve, dict) and curve.get("family") == family and isinstance(curve.get("points"), list)
            and all(isinstance(p, dict) and type(p.get("requested_tokens")) is int for p in curve["points"]))


def read_curve(path: Path, family: str, model: str, schedule: dict) -> dict:
    """The curve file at `path`, labelled with its `schedule` (a file from before the label is fixed-steps, as its name says)."""
    from specatlas.head_training import read_checked

    empty = {"family": family, "model": model, "what": "held-out acceptance by training data size "
             "(`specatlas train-curve`)"} | schedule | {"points": []}
    return read_checked(path, empty, lambda curve: _is_curve(curve, family),
                        "not this family's acceptance-vs-data curve (family, points with requested_tokens)") | schedule


def paper_method_acceptance(family, loaded, checkpoint: Path, prompts: list[list[int]], plain: list[list[int]],
                            max_new_tokens: int) -> dict:
    """The family's paper method with this head, greedy on `prompts` against their `plain` outputs
    (`heads.accepted_on`)."""
    from specatlas.head_training import accepted_on, build
    from specatlas.impls.registry import resolve

    spec = resolve(family.paper)
    decoder, _ = build(spec, loaded.model, heads={family.name: checkpoint})
    return {"method": spec.id, "prompts": len(prompts), "max_new_tokens": max_new_tokens} | accepted_on(
        decoder, prompts, plain, max_new_tokens)
