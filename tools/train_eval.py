"""`specatlas train-eval [PAPER-ID ...]`: the shipped heads' methods on held-out prompts, at the papers' settings.

    specatlas train-eval                          # every method that runs a shipped head, and SD at γ = 7
    specatlas train-eval eagle2 hydra --prompts 32

A head's model card gives its top-1 chain on held-out text; what a user of the method gets is the
method as its paper runs it (its tree, beam or draft length). This decodes the held-out prompts of
the `specatlas train-data` data (the shard no head trains on) greedily with each method at its
paper's settings and with plain decoding, and records the mean accepted tokens per step (the bonus
token included, as Spec-Bench counts), how the steps' accepted lengths spread, and whether every
output is token-identical to plain decoding. Acceptance, not speed: speed lives in `specatlas bench`.

Methods by default: every registry method that runs a trained head (`trained_head`), and
speculative decoding at its paper's γ = 7 (leviathan2023fast), which measures the distilled
drafter every draft-model method runs by default. Results go to
results/training/<model>-held-out-acceptance.json, one entry per method, written as each finishes;
a rerun measures again only the methods whose weights or settings changed (`--again`: all).
A method that cannot be built (its head not shipped) stops the command in one line; the methods
measured before it stay in the file. The training page shows the table.
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime, timezone
from pathlib import Path

from specatlas.cli import MAX_NEW_TOKENS, CommandError, number
from specatlas.fsutil import WriteError, update_json, writable_dir
from specatlas.head_training import ENTRY_KEYS, accepted_on, build, is_results, plain_outputs, read_checked

# Speculative decoding (Leviathan et al.) at its paper's γ = 7: the draft-model method that measures
# the distilled drafter (the DistillSpec family has no method of its own in the registry).
DRAFT_MODEL_METHOD = "leviathan2023fast"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("method", metavar="PAPER_ID", nargs="*",
                        help="methods by paper id or alias (default: every method that runs a shipped head, and "
                             f"{DRAFT_MODEL_METHOD} for the distilled drafter)")
    parser.add_argument("--prompts", type=number(int, 1, 100_000), default=16, help="held-out prompts decoded")
    parser.add_argument("--max-new-tokens", type=number(int, 1, MAX_NEW_TOKENS), default=96)
    parser.add_argument("--again", action="store_true", help="measure every method again, even where nothing changed")


def default_methods() -> list[str]:
    from specatlas.impls.registry import METHODS

    return [spec.id for spec in METHODS.values() if spec.trained_head] + [DRAFT_MODEL_METHOD]


def execute(args: argparse.Namespace) -> int:
    import torch

    from specatlas import data_shards
    from specatlas.impls.engine.models import EMBEDDED, ModelLoadError, load_model, machine_kernels
    from specatlas.impls.registry import resolve
    from specatlas.bench.provenance import checkout_state

    specs = {}
    for name in args.method or default_methods():
        spec = resolve(name)
        if spec is None:
            raise CommandError(f"no method {name!r} (`specatlas bench --list` lists them)")
        if not (spec.trained_head or spec.uses_draft_model):
            raise CommandError(f"{spec.id} runs no trained head or drafter: nothing of it was trained")
        if spec.id in specs:
            raise CommandError(f"{spec.id} is named twice in {' '.join(args.method)}")
        specs[spec.id] = spec
    path = results_file(EMBEDDED)
    saved = read_results(path)  # before the model loads: a damaged file or a folder that takes none stops nothing long
    try:
        writable_dir(path.parent, "the results folder")
    except WriteError as exc:
        raise CommandError(str(exc)) from None
    code = checkout_state()
    try:
        loaded = load_model(None, torch.device("cpu"), torch.float32, kernels=machine_kernels())
    except ModelLoadError as exc:
        raise CommandError(str(exc), status=1)
    prompts, held_out_shards = data_shards.held_out_prompts(data_shards.default_folder(loaded.name), loaded.tokenizer,
                                                           args.prompts)
    plain = None  # decoded once, when the first method needs measuring
    for spec in specs.values():
        decoder, weights = build(spec, loaded.model)
        settings = {"paper_settings": spec.paper_settings, "prompts": len(prompts), "max_new_tokens": args.max_new_tokens,
                    "held_out_shards": held_out_shards, "weights": weights}
        earlier = saved["methods"].get(spec.id)
        if not args.again and earlier and all(earlier.get(key) == value for key, value in settings.items()):
            print(f"specatlas train-eval: {spec.id}: measured with these weights and settings; skipped", file=sys.stderr)
            continue
        if plain is None:
            plain = plain_outputs(loaded.model, prompts, args.max_new_tokens)
        entry = {"name": spec.name, "drafter": decoder.drafter.describe(),
                 **settings, **accepted_on(decoder, prompts, plain, args.max_new_tokens), "code": code,
                 "torch": torch.__version__, "measured": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        saved = update_json(path, lambda current, entry=entry, method=spec.id: with_entry(current, saved, method, entry))
        print(f"specatlas train-eval: {spec.id}: {entry['mean_accepted_tokens']} accepted tokens per step, "
              f"identical to plain decoding: {entry['identical_to_plain']}", file=sys.stderr)
    print(f"specatlas train-eval: {path}")
    return 0


def results_file(model: str) -> Path:
    from specatlas.paths import training_results_dir

    return training_results_dir() / f"{model}-held-out-acceptance.json"


WHAT = "the shipped heads' methods at their papers' settings on held-out prompts (`specatlas train-eval`)"


def read_results(path: Path) -> dict:
    """The results file at `path` (an empty one when missing); a damaged one is a one-line error."""
    return read_checked(path, {"what": WHAT, "methods": {}}, is_results, "not a held-out acceptance file (a \"methods\" "
                        f"object whose entries hold {', '.join(ENTRY_KEYS)})")


def with_entry(current, saved: dict, method: str, entry: dict) -> dict:
    """The file as it is now (another run may have added methods), else as this run last read or
    wrote it (`saved`), with `method`'s entry replaced."""
    results = current if is_results(current) else saved
    return results | {"methods": results["methods"] | {method: entry}}


