"""`specatlas datastore build`: a datastore for REST and SAM-Decoding (token array + suffix array,
one .npz), tokenized with the target model's tokenizer.

From a corpus: `specatlas datastore build corpus.txt more.jsonl --output ds.npz` (.txt: documents
separated by blank lines; .jsonl: one document per line, its `text` field or else every string in
it, so chat logs with `turns` or `messages` work as they are).

Self-distilled: `specatlas datastore build --self-generate` has the model answer, greedily, a fixed
set of instructions written for this project (prompts/datastore.jsonl; no benchmark's questions) and
stores each rendered conversation. For the embedded model this writes the datastore shipped with
the package (`specatlas.impls.methods.retrieval.DEFAULT_DATASTORE`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from specatlas.cli import MAX_NEW_TOKENS, CommandError, add_trust_remote_code, number
from specatlas.fsutil import WriteError, output_file, writable_dir
from specatlas.train_prompts import read_prompts

INSTRUCTIONS = read_prompts("datastore")


def configure(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    build = actions.add_parser("build", help="build a datastore from corpus files or the model's own answers")
    build.add_argument("inputs", nargs="*", type=Path, help=".txt (blank-line separated documents) or .jsonl files")
    build.add_argument("--self-generate", action="store_true",
                       help="add the model's greedy answers to this project's fixed instruction set")
    build.add_argument("--model", help="local HF folder or hub id whose tokenizer (and answers) to use "
                                       "(default: the embedded SmolLM2-135M-Instruct)")
    build.add_argument("--output", type=Path, help="the .npz to write, new or an earlier datastore (default for the "
                                                  "embedded model with --self-generate: the datastore shipped with the package)")
    add_trust_remote_code(build)
    build.add_argument("--max-new-tokens", type=number(int, 1, MAX_NEW_TOKENS), default=96, help="answer length cap for --self-generate")
    build.add_argument("--batch-size", type=number(int, 1, 65_536), default=32, help="prompts generated together for --self-generate")


def execute(args: argparse.Namespace) -> int:
    if not args.inputs and not args.self_generate:
        raise CommandError("give corpus files, --self-generate, or both")
    missing = [str(path) for path in args.inputs if not path.is_file()]
    if missing:
        raise CommandError(f"no such file: {', '.join(missing)}")
    from specatlas.impls.methods.retrieval import DEFAULT_DATASTORE
    from specatlas.impls.engine.models import EMBEDDED, ModelLoadError, load_model
    from specatlas.impls.drafters.model_free.retrieval import Datastore

    output = args.output
    if output is None:
        if not (args.self_generate and not args.inputs and args.model in (None, EMBEDDED)):
            raise CommandError("--output is required unless rebuilding the embedded model's default datastore")
        output = DEFAULT_DATASTORE
    try:  # before the model and the corpus pass
        output = output_file(output, "the datastore", _earlier_output, allowed=DEFAULT_DATASTORE)
        writable_dir(output.parent, "output folder")
        texts = [text for path in args.inputs for text in read_corpus(path)]
        loaded = load_model(args.model, trust_remote_code=args.trust_remote_code)
    except (WriteError, CorpusError) as exc:
        raise CommandError(str(exc), status=1)
    except ModelLoadError as exc:
        raise CommandError(str(exc), status=1)
    tokenizer, started = loaded.tokenizer, time.perf_counter()
    documents = [tokenizer(text, add_special_tokens=False).input_ids for text in texts]
    meta = {"model": loaded.name, "vocab_size": loaded.model.config.vocab_size,
            "sources": [path.name for path in args.inputs]}
    if args.self_generate:
        documents += self_generate(loaded, args.max_new_tokens, args.batch_size)
        meta["self_generated"] = {"instructions": len(INSTRUCTIONS), "max_new_tokens": args.max_new_tokens,
                                  "batch_size": args.batch_size, "decoding": "greedy",
                                  "command": "specatlas datastore build --self-generate"}
    datastore = Datastore.from_documents(documents, tokenizer.eos_token_id, meta | {"documents": len(documents)})
    datastore.meta["tokens"] = len(datastore)
    try:
        datastore.save(output)
    except WriteError as exc:
        raise CommandError(str(exc), status=1)
    print(f"wrote {output}: {len(documents)} documents, {len(datastore)} tokens "
          f"({time.perf_counter() - started:.1f}s)", file=sys.stderr)
    return 0


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

    from specatlas.impls.engine.models import encode_chat, eos_ids

    model, tokenizer = loaded.model, loaded.tokenizer
    stop, pad = eos_ids(model, tokenizer), tokenizer.pad_token_id or tokenizer.eos_token_id
    prompts = sorted((encode_chat(tokenizer, text) for text in INSTRUCTIONS), key=len)  # less padding
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

