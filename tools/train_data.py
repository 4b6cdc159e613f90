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
import subprocess
import sys
import time
from pathlib import Path

from specatlas.cli import MAX_NEW_TOKENS, MAX_SEED, MAX_TOKENS, CommandError, disk_error, number
from specatlas.data_shards import DATA_ROOT, default_folder, read_manifest, shard_entry, totals
from specatlas.fsutil import WriteError, atomic_write, exclusive, output_dir

MARKER = ".specatlas-train-data"


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


def execute(args: argparse.Namespace) -> int:
    import torch

    from specatlas.impls.engine.cpu_kernels import TORCH_KERNELS
    from specatlas.impls.engine.models import EMBEDDED, ModelLoadError, load_model, pick_device

    if args.status:
        folder = args.output or default_folder(args.model or EMBEDDED)
        manifest = read_manifest(folder)
        print(json.dumps({"folder": str(folder), **totals(manifest), "sources": manifest.get("sources", {})}, indent=1))
        return 0
    if args.threads:
        torch.set_num_threads(args.threads)
    try:  # batched decoding is many rows per forward: the few-row kernels measured here do not pay
        loaded = load_model(args.model, pick_device(args.device), torch.float32, kernels=TORCH_KERNELS)
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


