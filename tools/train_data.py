"""`specatlas train-data`: build the self-distilled data the draft heads train on.

    specatlas train-data                       # resume or extend the embedded model's data to 2M answer tokens
    specatlas train-data --tokens 500000       # stop at 500k answer tokens
    specatlas train-data --status              # what is built: the manifest's totals per source

Two stages, each resumable shard by shard (a kill loses at most the shards in progress):
1. Magpie: the target writes `--magpie` user queries of its own from its chat template's user-turn
   prefix (sampled at temperature 1, seeded per shard), kept as `magpie-NNNNN.npz`.
2. Answers: the target answers the prompt pool (`prompt_pool`: ShareGPT opening turns, the Magpie
   queries, templated tasks over this catalog's summaries, the project's corpus) greedily, in pool
   order, with continuous batching (`families.answers`), until `--tokens` answer tokens;
   `answers-NNNNN.npz`.
Shards hold token ids (third-party prompts only by reference) and are small enough to commit: for
the embedded model they go to reference_impls/training_data/<model>/, so a new machine trains
without regenerating; `manifest.json` there lists every shard with its hash, counts and the pool's
per-source report. Hidden states are not stored: training recomputes them from the tokens.
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from specatlas.cli import MAX_NEW_TOKENS, MAX_SEED, MAX_TOKENS, CommandError, disk_error, number
from specatlas.fsutil import WriteError, atomic_write, exclusive, output_dir

MARKER = ".specatlas-train-data"
DATA_ROOT = Path(__file__).resolve().parent.parent / "reference_impls" / "training_data"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", help="local HF folder or hub id (default: the embedded SmolLM2-135M-Instruct)")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--output", type=Path, help="data folder (default: the shipped one for the embedded model, "
                                                     "else ./train-data-<model>)")
    parser.add_argument("--tokens", type=number(int, 1, MAX_TOKENS), default=2_000_000,
                        help="answer tokens to reach (default 2,000,000)")
    parser.add_argument("--magpie", type=number(int, 0, 10**7), default=1024, help="self-written queries to generate first")
    parser.add_argument("--max-new-tokens", type=number(int, 1, MAX_NEW_TOKENS), default=320, help="answer length cap")
    parser.add_argument("--max-prompt-tokens", type=number(int, 1, MAX_NEW_TOKENS), default=512,
                        help="longer prompts are left out")
    parser.add_argument("--rows", type=number(int, 1, 65_536), default=64, help="sequences decoded together")
    parser.add_argument("--shard-size", type=number(int, 1, 10**6), default=128, help="conversations per shard")
    parser.add_argument("--threads", type=number(int, 1, 1024), help="torch threads (default: torch's)")
    parser.add_argument("--seed", type=number(int, 0, MAX_SEED), default=0)
    parser.add_argument("--status", action="store_true", help="print the manifest's totals and exit")


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


def execute(args: argparse.Namespace) -> int:
    import os

    import torch

    from specatlas.impls.engine.models import EMBEDDED, ModelLoadError, load_model, pick_device

    if args.status:
        folder = args.output or default_folder(args.model or EMBEDDED)
        manifest = read_manifest(folder)
        print(json.dumps({"folder": str(folder), **totals(manifest), "sources": manifest.get("sources", {})}, indent=1))
        return 0
    if args.threads:
        torch.set_num_threads(args.threads)
    # Batched decoding is many rows per forward: the few-row kernels `load_model` picks do not pay.
    os.environ["SPECATLAS_PACKED_LINEARS"] = "0"
    try:
        loaded = load_model(args.model, pick_device(args.device), torch.float32)
    except ModelLoadError as exc:
        raise CommandError(str(exc), status=1)
    try:
        folder = output_dir(args.output or default_folder(loaded.name), "training data", MARKER, allowed=DATA_ROOT)
    except WriteError as exc:
        raise CommandError(str(exc)) from None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if not (folder / MARKER).is_file():
            atomic_write(folder / MARKER, "written by specatlas train-data, which may write here again\n")
        # One run per folder: two would name their shards alike and each keep only its own manifest.
        with exclusive(folder / MARKER, f"another specatlas train-data writing {folder}"):
            Builder(loaded, folder, args).run()
    except (WriteError, ModelLoadError) as exc:  # a full disk too: the shards and manifest so far are whole
        raise CommandError(str(exc), status=1) from None
    except OSError as exc:
        raise CommandError(disk_error(exc), status=1) from None
    return 0


class Builder:
    def __init__(self, loaded, folder: Path, args: argparse.Namespace):
        from specatlas.impls.engine.models import eos_ids

        self.loaded, self.folder, self.args = loaded, folder, args
        self.manifest = read_manifest(folder)
        self.vocab = loaded.model.config.vocab_size
        self.stop = eos_ids(loaded.model, loaded.tokenizer)
        self.started = time.time()

    # ----------------------------------------------------------------------------------------

    def save_manifest(self) -> None:
        import torch

        args = self.args
        self.manifest.update({
            "model": self.loaded.name, "tokenizer_vocab": self.vocab,
            "settings": {"max_new_tokens": args.max_new_tokens, "max_prompt_tokens": args.max_prompt_tokens,
                         "answers": "greedy", "magpie_temperature": 1.0, "magpie_max_new_tokens": MAGPIE_TOKENS,
                         "rows": args.rows, "shard_size": args.shard_size, "seed": args.seed},
            "command": "specatlas train-data" + (f" --model {args.model}" if args.model else ""),
            "totals": totals(self.manifest),
            "last_run": {"commit": _commit(), "machine": platform.processor() or platform.machine(),
                         "torch": torch.__version__, "threads": torch.get_num_threads()},
        })
        atomic_write(self.folder / "manifest.json", (json.dumps(self.manifest, indent=1) + "\n").encode())

    def add_shard(self, kind: str, name: str, conversations, data: bytes) -> None:
        self.manifest[kind] = [s for s in self.manifest[kind] if s["file"] != name] + [
            shard_entry(name, conversations, data)]
        self.save_manifest()

    def shards(self, kind: str):
        from specatlas.impls.families.answers import ShardError, read_shard

        for entry in self.manifest[kind]:
            try:
                yield entry["file"], read_shard(self.folder / entry["file"], self.vocab, entry["sha256"])
            except ShardError as exc:  # resuming over it would answer its conversations again, or lose them
                raise CommandError(f"{exc}; restore it, or delete it and its manifest entry to generate it again",
                                   status=1) from None

    # ----------------------------------------------------------------------------------------

    def run(self) -> None:
        self.magpie()
        self.answers()

    def magpie(self) -> None:
        from specatlas.impls.families.answers import Conversation, generate, text_sha, write_shard

        tokenizer, model = self.loaded.tokenizer, self.loaded.model
        prefix_text = user_turn_prefix(tokenizer)
        prefix = tokenizer(prefix_text, add_special_tokens=False).input_ids
        per_shard = 256
        done = {entry["file"] for entry in self.manifest["magpie"]}
        for shard in range(-(-self.args.magpie // per_shard)):
            name = f"magpie-{shard:05d}.npz"
            if name in done:
                continue
            count = min(per_shard, self.args.magpie - shard * per_shard)
            print(f"specatlas train-data: Magpie queries, shard {shard} ({count})", file=sys.stderr)
            found = sorted(generate(model, [prefix] * count, MAGPIE_TOKENS, self.stop, rows=self.args.rows,
                                    temperature=1.0, seed=self.args.seed * 100_003 + shard), key=lambda a: a.index)
            conversations = [Conversation(f"magpie:{shard}-{a.index}", text_sha(prefix_text), prefix, a.tokens,
                                          a.finished) for a in found]
            self.add_shard("magpie", name, conversations, write_shard(self.folder / name, conversations, self.vocab))

    def magpie_queries(self):
        from specatlas.prompt_pool import PoolPrompt

        tokenizer = self.loaded.tokenizer
        for _, conversations in self.shards("magpie"):
            for c in conversations:
                if c.finished:
                    text = tokenizer.decode([t for t in c.answer if t not in self.stop], skip_special_tokens=True).strip()
                    yield PoolPrompt(c.ref, text)

    def pool(self):
        from specatlas import prompt_pool
        from specatlas.paths import papers_dir

        import yaml

        records = [yaml.safe_load(path.read_text(encoding="utf-8")) for path in sorted(papers_dir().glob("*.yaml"))]
        try:
            sources = [prompt_pool.project(), prompt_pool.templated([r for r in records if isinstance(r, dict)],
                       self.args.seed), list(self.magpie_queries()), prompt_pool.sharegpt()]
        except prompt_pool.SourceError as exc:
            raise CommandError(str(exc), status=1) from None
        prompts, report = prompt_pool.pool(sources, self.args.seed)
        self.manifest["sources"] = report
        return prompts

    def answers(self) -> None:
        from tqdm import tqdm

        from specatlas.impls.engine.models import encode_chat
        from specatlas.impls.families.answers import Conversation, generate, text_sha, write_shard
        from specatlas.prompt_pool import THIRD_PARTY

        args, tokenizer = self.args, self.loaded.tokenizer
        prompts = self.pool()
        done = [c for _, conversations in self.shards("answers") for c in conversations]
        answered, answered_texts = {c.ref for c in done}, {c.prompt_sha for c in done}
        have = totals(self.manifest)["answer_tokens"]
        if have >= args.tokens:
            self.save_manifest()
            print(f"specatlas train-data: {have} answer tokens already in {self.folder}", file=sys.stderr)
            return
        todo, encoded = [], []
        for prompt in prompts:
            if prompt.ref in answered or text_sha(prompt.text) in answered_texts:  # the same text under another ref
                continue
            ids = encode_chat(tokenizer, prompt.text)
            if len(ids) <= args.max_prompt_tokens:
                todo.append(prompt)
                encoded.append(ids)
        # After the highest shard listed: shards finish out of order, so a kill can leave a gap, and
        # counting entries would name the next shard like one already listed.
        next_shard = 1 + max((int(e["file"][len("answers-"):-len(".npz")]) for e in self.manifest["answers"]), default=-1)
        print(f"specatlas train-data: {have} answer tokens in {len(answered)} conversations; "
              f"{len(todo)} prompts left in the pool", file=sys.stderr)
        bar = tqdm(total=args.tokens, initial=have, unit="tok", desc="answer tokens", smoothing=0.05)
        waiting: dict[int, dict[int, Conversation]] = {}
        for answer in generate(self.loaded.model, encoded, args.max_new_tokens, self.stop, rows=args.rows,
                               max_prompt=args.max_prompt_tokens):
            prompt = todo[answer.index]
            shard = answer.index // args.shard_size
            stored = [] if prompt.source in THIRD_PARTY else encoded[answer.index]
            waiting.setdefault(shard, {})[answer.index] = Conversation(
                prompt.ref, text_sha(prompt.text), stored, answer.tokens, answer.finished)
            bar.update(len(answer.tokens))
            expected = min(args.shard_size, len(todo) - shard * args.shard_size)
            if len(waiting[shard]) == expected:
                conversations = [c for _, c in sorted(waiting.pop(shard).items())]
                name = f"answers-{next_shard + shard:05d}.npz"
                self.add_shard("answers", name, conversations, write_shard(self.folder / name, conversations, self.vocab))
                if totals(self.manifest)["answer_tokens"] >= args.tokens:
                    break
        bar.close()
        print(f"specatlas train-data: {json.dumps(totals(self.manifest))}", file=sys.stderr)


MAGPIE_TOKENS = 128  # a query longer than this is cut off, and not used


def shard_entry(name: str, conversations, data: bytes) -> dict:
    """A shard's line in the manifest."""
    from specatlas.impls.families.answers import file_sha

    return {"file": name, "sha256": file_sha(data), "conversations": len(conversations),
            "answer_tokens": sum(len(c.answer) for c in conversations),
            "finished": sum(c.finished for c in conversations),
            "sources": dict(Counter(c.ref.split(":", 1)[0] for c in conversations))}


def user_turn_prefix(tokenizer) -> str:
    """The chat template rendered up to where the user's text starts (Magpie's prompt)."""
    from specatlas.impls.engine.chat import render_chat

    marker = "\u0000MAGPIE\u0000"
    text = render_chat(tokenizer, [{"role": "user", "content": marker}])
    return text[: text.index(marker)]


def _commit() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
                              cwd=Path(__file__).parent).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


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
    import hashlib

    where = folder.relative_to(DATA_ROOT.parent.parent) if folder.is_relative_to(DATA_ROOT.parent.parent) else folder
    combined = hashlib.sha256("".join(key for key, _ in shards).encode()).hexdigest()[:12]
    return (f"the target's greedy answers in answer shards {held_out}-{len(shards) - 1} of `{where}`, shards "
            f"0-{held_out - 1} held out (`specatlas train-data`; shard hashes combined: {combined})")
