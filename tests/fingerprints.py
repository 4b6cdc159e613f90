"""Fingerprints of benchmark texts, so tests can check that this project's prompts share no text
with a benchmark without the benchmark's texts being in the repository.

Two kinds, both from SHA-256: a 16-hex-digit hash of every distinct turn (stripped), and a
32-bit hash of one in 8 of the turns' word 8-grams (those whose hash is 0 mod 8). A copied turn
matches the first; a copied passage of 40 words or more holds 33 8-grams, so it matches the second
unless none of them was kept, which happens with probability (7/8)^33, about 1%.

Regenerate from a copy of Spec-Bench's question.jsonl (hemingkx/Spec-Bench, Apache-2.0):
    python -m tests.fingerprints path/to/question.jsonl
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import sys
from pathlib import Path

FOLDER = Path(__file__).resolve().parent / "fixtures" / "benchmarks"
TURNS, GRAMS = FOLDER / "spec_bench_turns.sha256", FOLDER / "spec_bench_8grams.txt.gz"
KEPT_ONE_IN = 8


def turn_hash(text: str) -> str:
    return hashlib.sha256(text.strip().encode()).hexdigest()[:16]


def gram_hashes(text: str, n: int = 8) -> set[int]:
    """32-bit hashes of the text's word n-grams (lower-cased words), the kept one in 8 only."""
    words = re.findall(r"[a-z']+", text.lower())
    hashes = (int(hashlib.sha256(" ".join(words[i:i + n]).encode()).hexdigest()[:8], 16)
              for i in range(len(words) - n + 1))
    return {h for h in hashes if h % KEPT_ONE_IN == 0}


def spec_bench() -> tuple[set[str], set[int]]:
    """(turn hashes, kept 8-gram hashes) of Spec-Bench's questions."""
    grams = gzip.decompress(GRAMS.read_bytes()).decode().split()
    return set(TURNS.read_text().split()), {int(h, 16) for h in grams}


def shared_text(texts: list[str]) -> list[str]:
    """The texts that share a turn or a kept 8-gram with Spec-Bench."""
    turns, grams = spec_bench()
    return [text for text in texts if turn_hash(text) in turns or gram_hashes(text) & grams]


if __name__ == "__main__":
    texts = [turn for line in open(sys.argv[1], encoding="utf-8") for turn in json.loads(line)["turns"]]
    TURNS.write_text("\n".join(sorted({turn_hash(t) for t in texts})) + "\n")
    grams = sorted(set().union(*map(gram_hashes, texts)))
    GRAMS.write_bytes(gzip.compress(("\n".join(f"{h:08x}" for h in grams) + "\n").encode(), mtime=0))
    print(f"{len(texts)} turns, {len(grams)} kept 8-grams")
