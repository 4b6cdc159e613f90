"""This project's prompt corpora, shipped as JSONL data in `prompts/` (one {"prompt": ...} per line):
instructions written for this project (no benchmark's questions), varied in task and register like
a chat assistant's traffic.

`PROMPTS` (prompts/train.jsonl) is what `specatlas train` distills the target on: writing, role
play, reasoning, arithmetic, code, extraction, science, humanities, translation, summarization,
factual questions and answering from a given passage. `specatlas datastore build --self-generate`
answers prompts/datastore.jsonl. A prompt's id is its line: append new ones at the end, so that
cached training data (keyed by the corpus) stays valid.
"""

from __future__ import annotations

import json
from pathlib import Path

CORPORA = Path(__file__).with_name("prompts")


def read_prompts(name: str) -> list[str]:
    """The prompts of corpus `name` (prompts/<name>.jsonl), in order."""
    lines = (CORPORA / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["prompt"] for line in lines if line.strip()]


PROMPTS: list[str] = read_prompts("train")
