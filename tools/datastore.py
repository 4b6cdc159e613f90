"""`specatlas datastore build`: a datastore for REST and SAM-Decoding (token array + suffix array,
one .npz), tokenized with the target model's tokenizer.

From a corpus: `specatlas datastore build corpus.txt more.jsonl --output ds.npz` (.txt: documents
separated by blank lines; .jsonl: one document per line, its `text` field or else every string in
it, so chat logs with `turns` or `messages` work as they are).

Self-distilled: `specatlas datastore build --self-generate` has the model answer, greedily, a fixed
set of instructions written for this project (prompts/datastore.jsonl; no benchmark's questions) and
stores each rendered conversation. For the embedded model this writes the datastore shipped with
the package (`specatlas.impls.methods.retrieval.DEFAULT_DATASTORE`).

From the training data: `specatlas datastore build --training-data [--tokens N]` stores every
training conversation of `specatlas train-data`'s shards (the rendered prompt and the greedy answer,
as token ids, as training reads them; the held-out shards left out) in the user cache, where
`--datastore training-data` of `specatlas run` and `specatlas bench` finds it. Never committed: the
shards are, and the build takes minutes.

Every document sharing a word 8-gram or a whole text with a benchmark this project measures on
(`contamination`) is left out, and the datastore's meta counts what was.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from specatlas.cli import MAX_NEW_TOKENS, MAX_TOKENS, TRAINING_DATA, CommandError, add_trust_remote_code, number
from specatlas.fsutil import WriteError, output_file, writable_dir
from specatlas.data_shards import RECIPE, default_folder, load, selected, training_data_store
from specatlas.train_prompts import read_prompts

INSTRUCTIONS = read_prompts("datastore")


def configure(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    build = actions.add_parser("build", help="build a datastore from corpus files, the model's own answers or the training data")
    build.add_argument("inputs", nargs="*", type=Path, help=".txt (blank-line separated documents) or .jsonl files")
    build.add_argument("--self-generate", action="store_true",
                       help="add the model's greedy answers to this project's fixed instruction set")
    build.add_argument("--training-data", action="store_true",
                       help="add every training conversation of `specatlas train-data` (prompt and answer token ids; "
                            "the held-out shards left out)")
    build.add_argument("--data", type=Path, help="with --training-data: the training data folder (default: the one "
                                                 "`specatlas train-data` writes for the model)")
    build.add_argument("--tokens", type=number(int, 1, MAX_TOKENS),
                       help="with --training-data: the training shards, in order, until they hold N answer tokens "
                            "(default: all of them)")
    build.add_argument("--model", help="local HF folder or hub id whose tokenizer (and answers) to use "
                                       "(default: the embedded SmolLM2-135M-Instruct)")
    build.add_argument("--output", type=Path, help="the .npz to write, new or an earlier datastore (default for the "
                                                  "embedded model with --self-generate: the datastore shipped with the "
                                                  "package; with --training-data alone: the user cache, where "
                                                  f"`--datastore {TRAINING_DATA}` finds it)")
    add_trust_remote_code(build)
    build.add_argument("--max-new-tokens", type=number(int, 1, MAX_NEW_TOKENS), default=96, help="answer length cap for --self-generate")
    build.add_argument("--batch-size", type=number(int, 1, 65_536), default=32, help="prompts generated together for --self-generate")


def execute(args: argparse.Namespace) -> int:
    if not (args.inputs or args.self_generate or args.training_data):
        raise CommandError("give corpus files, --self-generate, --training-data, or several of them")
    if (args.tokens or args.data) and not args.training_data:
        raise CommandError("--tokens and --data go with --training-data")
    missing = [str(path) for path in args.inputs if not path.is_file()]
    if missing:
        raise CommandError(f"no such file: {', '.join(missing)}")
    from specatlas.impls.engine.models import ModelLoadError, load_model, machine_kernels
    from specatlas.impls.methods.retrieval import DEFAULT_DATASTORE

    try:  # before the model and the corpus pass
        output = output_file(default_output(args), "the datastore", _earlier_output, allowed=DEFAULT_DATASTORE)
        writable_dir(output.parent, "output folder")
        texts = [text for path in args.inputs for text in read_corpus(path)]
        loaded = load_model(args.model, trust_remote_code=args.trust_remote_code, kernels=machine_kernels())
    except (WriteError, CorpusError, ModelLoadError) as exc:
        raise CommandError(str(exc), status=1)
    tokenizer, started = loaded.tokenizer, time.perf_counter()
    if tokenizer.eos_token_id is None:
        raise CommandError(f"{loaded.name}'s tokenizer has no EOS token to separate the datastore's documents", status=1)
    documents = [tokenizer(text, add_special_tokens=False).input_ids for text in texts]
    meta = {"model": loaded.name, "vocab_size": loaded.model.config.vocab_size,
            "sources": [path.name for path in args.inputs]}
    if args.self_generate:
        documents += self_generate(loaded, args.max_new_tokens, args.batch_size)
        meta["self_generated"] = {"instructions": len(INSTRUCTIONS), "max_new_tokens": args.max_new_tokens,
                                  "batch_size": args.batch_size, "decoding": "greedy",
                                  "command": "specatlas datastore build --self-generate"}
    if args.training_data:
        found, meta["training_data"] = training_documents(data_folder(args), tokenizer, args.tokens)
        documents += found
    documents, meta["contamination"] = without_benchmark_text(documents, tokenizer)
    write(output, documents, tokenizer.eos_token_id, meta | {"documents": len(documents)}, started)
    return 0


def write(output: Path, documents: list[list[int]], separator: int, meta: dict, started: float) -> None:
    from specatlas.impls.drafters.model_free.retrieval import Datastore

    datastore = Datastore.from_documents(documents, separator, meta)
    datastore.meta["tokens"] = len(datastore)
    try:
        datastore.save(output)
    except WriteError as exc:
        raise CommandError(str(exc), status=1)
    print(f"wrote {output}: {len(documents)} documents, {len(datastore)} tokens "
          f"({time.perf_counter() - started:.1f}s)", file=sys.stderr)


def model_name(model: str | None) -> str:
    """The name `load_model` gives `model`, known before loading it."""
    from specatlas.impls.engine.models import EMBEDDED, names_embedded

    return EMBEDDED if names_embedded(model) else model


def default_output(args: argparse.Namespace) -> Path:
    """--output, else the shipped datastore (the embedded model's --self-generate alone) or the
    training-data datastore's place in the cache (--training-data alone)."""
    from specatlas.impls.engine.models import EMBEDDED
    from specatlas.impls.methods.retrieval import DEFAULT_DATASTORE

    if args.output is not None:
        return args.output
    if args.training_data and not (args.inputs or args.self_generate):
        return training_data_store(model_name(args.model), data_folder(args), args.tokens)
    if args.self_generate and not (args.inputs or args.training_data) and model_name(args.model) == EMBEDDED:
        return DEFAULT_DATASTORE
    raise CommandError("--output is required unless rebuilding the embedded model's default datastore "
                       "or building from --training-data alone")


def data_folder(args: argparse.Namespace) -> Path:
    return args.data or default_folder(model_name(args.model))


def training_documents(folder: Path, tokenizer, tokens: int | None) -> tuple[list[list[int]], dict]:
    """Each training conversation of `folder` (the held-out shards left out) as its prompt's and
    answer's token ids, the answer's closing EOS left to the datastore's separator; and what they are."""
    from specatlas.paths import repo_root

    shards, held_out = load(folder, tokenizer, tokens)
    entries = selected(folder, tokens)
    conversations = [c for _, shard in shards[held_out:] for c in shard]
    documents = [c.prompt + (c.answer[:-1] if c.finished else c.answer) for c in conversations]
    root, folder = repo_root(), folder.resolve()
    where = folder.relative_to(root) if folder.is_relative_to(root) else folder.name  # no machine's paths
    return documents, {
        "folder": str(where), "shards": [entry["file"] for entry in entries[held_out:]],
        "held_out_shards_left_out": [entry["file"] for entry in entries[:held_out]],
        "shard_sha256": [entry["sha256"] for entry in entries[held_out:]],
        "conversations": len(conversations), "answer_tokens": sum(len(c.answer) for c in conversations),
        "tokens_requested": tokens, "recipe": RECIPE,
        "command": "specatlas datastore build --training-data" + (f" --tokens {tokens}" if tokens else ""),
    }


def without_benchmark_text(documents: list[list[int]], tokenizer) -> tuple[list[list[int]], dict]:
    """The documents whose decoded text shares no word 8-gram (nor its whole text) with a benchmark
    (`contamination.is_clean`), and the counts of what was dropped."""
    from specatlas.contamination import BENCHMARKS, GRAM, is_clean

    texts = tokenizer.batch_decode(documents, skip_special_tokens=True)
    kept = [document for document, text in zip(documents, texts) if is_clean(text)]
    return kept, {"benchmarks": sorted(BENCHMARKS),
                  "rule": f"a document sharing a word {GRAM}-gram or its whole text with one is dropped",
                  "documents_checked": len(documents), "documents_dropped": len(documents) - len(kept),
                  "tokens_dropped": sum(map(len, documents)) - sum(map(len, kept))}


def _earlier_output(path: Path) -> bool:
    """Whether `path` is a datastore this command wrote (Datastore.save's arrays, nothing pickled)."""
    import zipfile

    import numpy as np

    if not zipfile.is_zipfile(path):
        return False
    with np.load(path, allow_pickle=False) as data:
        return set(data.files) == {"tokens", "suffixes", "meta"}


class CorpusError(Exception):
    """A corpus file cannot be read; one line naming the file (and line)."""


def read_corpus(path: Path) -> list[str]:
    """Documents of a corpus file: blank-line-separated blocks, or for .jsonl one per line (its
    "text", else every string in it)."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise CorpusError(f"corpus {path} is not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise CorpusError(f"cannot read corpus {path}: {exc.strerror or exc}") from None
    if path.suffix != ".jsonl":
        return [block.strip() for block in text.split("\n\n") if block.strip()]
    documents = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                record = json.loads(line)
            except (ValueError, RecursionError) as exc:
                raise CorpusError(f"corpus {path}, line {number}: not a JSON value "
                                  f"({exc.msg if isinstance(exc, json.JSONDecodeError) else 'nested too deeply'})") from None
            documents.append(record["text"] if isinstance(record, dict) and isinstance(record.get("text"), str)
                             else "\n".join(_strings(record)))
    return documents


def _strings(value) -> list[str]:
    """Every string in a JSON value, in document order (iteratively: the depth comes from the file)."""
    found, stack = [], [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            found.append(item)
        elif isinstance(item, (dict, list)):
            stack.extend(reversed(list(item.values()) if isinstance(item, dict) else item))
    return found


def self_generate(loaded, max_new_tokens: int, batch_size: int) -> list[list[int]]:
    """Each instruction rendered with the chat template, then the model's greedy answer (the
    datastore separator is its EOS), so the datastore also knows how answers begin."""
    import torch

    from specatlas.impls.engine.models import encode_chats, eos_ids

    model, tokenizer = loaded.model, loaded.tokenizer
    stop, pad = eos_ids(model, tokenizer), tokenizer.pad_token_id or tokenizer.eos_token_id
    prompts = sorted(encode_chats(tokenizer, INSTRUCTIONS), key=len)  # less padding
    documents = []
    for first in range(0, len(prompts), batch_size):
        batch = prompts[first : first + batch_size]
        width = max(map(len, batch))
        ids = torch.tensor([[pad] * (width - len(p)) + p for p in batch], device=model.device)
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in batch], device=model.device)
        with torch.inference_mode():
            out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=max_new_tokens,
                                 do_sample=False, pad_token_id=pad)
        for prompt, row in zip(batch, out[:, width:].tolist()):
            end = next((i for i, token in enumerate(row) if token in stop), len(row))
            documents.append(prompt + row[:end])
        print(f"  generated {len(documents)}/{len(prompts)}", file=sys.stderr)
    return documents

