"""The training data on disk: a folder of answer shards (token ids) and its manifest, as
`specatlas train-data` writes it; which shards a run reads (the held-out ones first), loading them
checked against their hashes; and the retrieval datastore built from them (`--datastore
training-data` of run and bench, `specatlas datastore build --training-data`)."""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from pathlib import Path

from specatlas.cli import TRAINING_DATA, CommandError


DATA_ROOT = Path(__file__).resolve().parent.parent / "reference_impls" / "training_data"


def default_folder(model_name: str) -> Path:
    from specatlas.impls.engine.models import EMBEDDED

    return DATA_ROOT / model_name if model_name == EMBEDDED else Path.cwd() / f"train-data-{safe(model_name)}"


def safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def read_manifest(folder: Path) -> dict:
    path = folder / "manifest.json"
    if not path.exists():
        return {"magpie": [], "answers": []}
    from specatlas.fsutil import ReadError, read_json

    try:
        manifest = read_json(path, 16 << 20)
    except ReadError as exc:
        raise CommandError(f"{path}: {exc}") from None
    if not isinstance(manifest, dict) or not all(isinstance(manifest.get(k), list) for k in ("magpie", "answers")):
        raise CommandError(f"{path}: not a train-data manifest (no 'magpie' and 'answers' lists)")
    for kind in ("magpie", "answers"):
        for number, entry in enumerate(manifest[kind]):
            problem = entry_problem(entry, kind)
            if problem:
                raise CommandError(f"{path}: {kind}[{number}]: {problem}")
    return manifest


def entry_problem(entry, kind: str) -> str | None:
    """What is wrong with a manifest's shard entry, or None."""
    if not isinstance(entry, dict):
        return "not an object"
    if not (isinstance(entry.get("file"), str) and re.fullmatch(rf"{kind}-\d{{5}}\.npz", entry["file"])):
        return f"'file' must name a {kind}-NNNNN.npz shard in the folder"
    if not (isinstance(entry.get("sha256"), str) and re.fullmatch(r"[0-9a-f]{64}", entry["sha256"])):
        return "'sha256' must be 64 hex digits"
    for key in ("conversations", "answer_tokens", "finished"):
        if type(entry.get(key)) is not int or entry[key] < 0:
            return f"'{key}' must be a whole number >= 0"
    return None


def totals(manifest: dict) -> dict:
    shards = manifest["answers"]
    return {"answer_shards": len(shards), "conversations": sum(s["conversations"] for s in shards),
            "answer_tokens": sum(s["answer_tokens"] for s in shards),
            "magpie_queries": sum(s["conversations"] for s in manifest["magpie"])}


def shard_entry(name: str, conversations, data: bytes) -> dict:
    """A shard's line in the manifest."""
    from specatlas.impls.families.answers import file_sha

    return {"file": name, "sha256": file_sha(data), "conversations": len(conversations),
            "answer_tokens": sum(len(c.answer) for c in conversations),
            "finished": sum(c.finished for c in conversations),
            "sources": dict(Counter(c.ref.split(":", 1)[0] for c in conversations))}


HELD_OUT_SHARDS = 1  # the first answer shards: never trained on, the held-out set of every run on this data


def selected(folder: Path, tokens: int | None = None) -> list[dict]:
    """The manifest entries of the answer shards `load` reads: the held-out ones, then training
    shards in order until they hold `tokens` answer tokens (all of them without `tokens`)."""
    manifest = read_manifest(folder)
    if len(manifest["answers"]) <= HELD_OUT_SHARDS:
        raise CommandError(f"not enough training data in {folder} ({len(manifest['answers'])} answer shards; the first "
                           f"{HELD_OUT_SHARDS} are held out): build it with `specatlas train-data`", status=1)
    chosen, total = list(manifest["answers"][:HELD_OUT_SHARDS]), 0
    for entry in manifest["answers"][HELD_OUT_SHARDS:]:
        if tokens is not None and total >= tokens:
            break
        chosen.append(entry)
        total += entry["answer_tokens"]
    return chosen


def training_tokens(folder: Path) -> int:
    """The answer tokens of every training shard in `folder`: as `--tokens`, it selects exactly those
    shards again after `specatlas train-data` has appended more."""
    return sum(entry["answer_tokens"] for entry in selected(folder)[HELD_OUT_SHARDS:])


def load(folder: Path, tokenizer, tokens: int | None = None) -> tuple[list[tuple[str, list]], int]:
    """The answer shards of `folder` in manifest order, as (content hash, conversations) with every
    prompt's token ids filled in (third-party prompts re-read from their source by reference and
    checked against the recorded hash; every shard checked against its manifest hash and its token
    ids against the tokenizer's vocabulary), and how many of them, first, are held out. With `tokens`,
    the training shards stop once they hold that many answer tokens (the data-size curve trains on
    such prefixes, all evaluated on the same held-out shards)."""
    from specatlas.impls.engine.models import encode_chats
    from specatlas.impls.families.answers import ShardError, read_shard, text_sha
    from specatlas.prompt_pool import THIRD_PARTY, SourceError, sharegpt

    chosen = selected(folder, tokens)
    third_party: dict[str, str] | None = None
    shards, unrendered = [], []
    for entry in chosen:
        path = folder / entry["file"]
        try:
            conversations = read_shard(path, len(tokenizer), entry["sha256"])
        except ShardError as exc:
            raise CommandError(f"{exc}; restore it from the repository or delete it and its manifest entry",
                               status=1) from None
        for c in conversations:
            source = c.ref.split(":", 1)[0]
            if source in THIRD_PARTY:
                if third_party is None:
                    try:
                        third_party = {p.ref: p.text for p in sharegpt()}
                    except SourceError as exc:
                        raise CommandError(str(exc), status=1) from None
                text = third_party.get(c.ref)
                if text is None or text_sha(text) != c.prompt_sha:
                    raise CommandError(f"{path}: the prompt {c.ref} is not in the installed {source} data as it was "
                                       "when answered (another version of the package?)", status=1)
                unrendered.append((c, text))
        shards.append((entry["sha256"], conversations))
    # Every third-party prompt rendered at once: one bounded child for the chat template, not one each.
    for (c, _), prompt in zip(unrendered, encode_chats(tokenizer, [text for _, text in unrendered])):
        c.prompt = prompt
    return shards, HELD_OUT_SHARDS


def held_out_prompts(folder: Path, tokenizer, count: int) -> tuple[list[list[int]], list[str]]:
    """The first `count` prompts of the held-out shards (token ids), which no head trains on, and
    those shards' content hashes: the text `train-curve` and `train-eval` decode."""
    shards, held_out = load(folder, tokenizer, tokens=1)
    prompts = [c.prompt for _, conversations in shards[:held_out] for c in conversations][:count]
    return prompts, [key for key, _ in shards[:held_out]]


def describe(folder: Path, shards: list[tuple[str, list]], held_out: int) -> str:
    """The data's line in a model card: which shards of which folder."""
    where = folder.relative_to(DATA_ROOT.parent.parent) if folder.is_relative_to(DATA_ROOT.parent.parent) else folder
    combined = hashlib.sha256("".join(key for key, _ in shards).encode()).hexdigest()[:12]
    return (f"the target's greedy answers in answer shards {held_out}-{len(shards) - 1} of `{where}`, shards "
            f"0-{held_out - 1} held out (`specatlas train-data`; shard hashes combined: {combined})")


RECIPE = "prompt+answer ids, EOS-separated, benchmark 8-grams dropped, v1"


def training_data_store(model: str, folder: Path, tokens: int | None = None) -> Path:
    """Where `build --training-data` keeps the datastore of `folder`'s training shards (those
    `tokens` selects) for `model`: the user cache, named by the shards' hashes and the recipe."""
    from specatlas.impls.engine.models import cache_root

    shards = selected(folder, tokens)[HELD_OUT_SHARDS:]
    digest = hashlib.sha256((RECIPE + "".join(entry["sha256"] for entry in shards)).encode()).hexdigest()[:12]
    return cache_root() / "datastores" / f"{safe(model)}-{TRAINING_DATA}-{digest}.npz"


def chosen_datastore(choice: str | Path | None, model: str) -> Path | None:
    """The file `--datastore` names for `model` (`specatlas run`, `specatlas bench`): None for the
    shipped one, the training-data datastore for `training-data` (a one-line CommandError naming
    the command that builds it when it is not built), else the path given."""
    from specatlas.impls.engine.models import EMBEDDED

    if choice is None:
        return None
    if choice != TRAINING_DATA:
        return Path(choice).expanduser()
    path = training_data_store(model, default_folder(model))
    if not path.is_file():
        command = "specatlas datastore build --training-data" + (f" --model {model}" if model != EMBEDDED else "")
        raise CommandError(f"no {TRAINING_DATA} datastore for {model} at {path}: build it with `{command}`", status=1)
    return path
