"""Prompt sets in Spec-Bench's JSONL format: one object per line with `question_id`, `category`
and `turns` (a list of user turns; later turns are asked after the model's own earlier answers).

Spec-Bench files its 80 MT-Bench questions under their MT-Bench categories (writing, coding, ...);
they form its "Multi-turn Conversation" subtask, so they are grouped under `mt_bench` here.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from specatlas.bench.results import RESERVED_CATEGORIES
from specatlas.fsutil import NotUTF8, ReadError, parse_json, read_limited, text_lines

# Spec-Bench's six subtasks, in its leaderboard's column order, with its column names.
SUBTASKS = {
    "mt_bench": "Multi-turn Conversation",
    "translation": "Translation",
    "summarization": "Summarization",
    "qa": "Question Answering",
    "math_reasoning": "Mathematical Reasoning",
    "rag": "Retrieval-aug. Generation",
}
MT_BENCH_CATEGORIES = {"writing", "roleplay", "reasoning", "math", "coding", "extraction", "stem", "humanities"}

BUILTIN = Path(__file__).resolve().parent / "prompts" / "specatlas-prompts-v1.jsonl"
# Prompt sets known by their sha256, named as their authors name them: a result file records a
# set by its file name and digest, and Spec-Bench's file is plainly called question.jsonl.
KNOWN_PROMPT_SETS = {
    "4b6d33e79484f9841c487ee87d1cf6aa8c6066f61d5d482ff09e5a007fafdf04": "Spec-Bench",  # hemingkx/Spec-Bench data/spec_bench/question.jsonl
}
MAX_BYTES = 256 * 1024 * 1024


class QuestionsError(Exception):
    """A prompt file is unusable; the message is `file:line: problem`."""


@dataclass(frozen=True)
class Question:
    id: str  # question_id as text: Spec-Bench uses ints, other sets may use strings
    category: str  # one of SUBTASKS, or the file's own category when it is none of them
    turns: tuple[str, ...]


@dataclass(frozen=True)
class PromptSet:
    id: str  # the file name without .jsonl
    sha256: str
    path: Path
    questions: tuple[Question, ...]


def prompt_set_name(prompt_set: dict) -> str:
    """How a result file's prompt set (its `config.prompt_set`: id and sha256) is named to readers."""
    return KNOWN_PROMPT_SETS.get(prompt_set["sha256"], prompt_set["id"])


def subtask(category: str) -> str:
    return "mt_bench" if category in MT_BENCH_CATEGORIES else category


def load(path: Path | None = None) -> PromptSet:
    """Read and check a prompt file (default: the built-in set)."""
    path = Path(path) if path else BUILTIN
    try:
        data = read_limited(path, MAX_BYTES)
    except ReadError as exc:
        raise QuestionsError(f"{path}: {exc}") from None
    try:
        lines = text_lines(data)
    except NotUTF8 as exc:
        raise QuestionsError(f"{path}:{exc.line}: {exc}") from None
    questions, seen = [], set()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            item = parse_json(line)
        except ReadError as exc:
            raise QuestionsError(f"{where}: {exc}") from None
        question = _question(item, where)
        if question.id in seen:
            raise QuestionsError(f"{where}: question_id {question.id} appears twice")
        seen.add(question.id)
        questions.append(question)
    if not questions:
        raise QuestionsError(f"{path}: no questions")
    return PromptSet(path.stem if path.suffix.lower() == ".jsonl" else path.name, hashlib.sha256(data).hexdigest(), path, tuple(questions))


def _question(item: object, where: str) -> Question:
    if not isinstance(item, dict):
        raise QuestionsError(f"{where}: expected an object with question_id, category and turns")
    missing = [key for key in ("question_id", "category", "turns") if key not in item]
    if missing:
        raise QuestionsError(f"{where}: missing {', '.join(missing)}")
    qid, category, turns = item["question_id"], item["category"], item["turns"]
    if isinstance(qid, bool) or not isinstance(qid, (int, str)) or str(qid).strip() == "":
        raise QuestionsError(f"{where}: question_id must be a number or a non-empty string")
    if not isinstance(category, str) or not category.strip():
        raise QuestionsError(f"{where}: category must be a non-empty string")
    if subtask(category.strip()) in RESERVED_CATEGORIES:
        raise QuestionsError(f"{where}: category '{category.strip()}' is reserved for the summary; rename it")
    if not isinstance(turns, list) or not turns or not all(isinstance(t, str) and t.strip() for t in turns):
        raise QuestionsError(f"{where}: turns must be a non-empty list of non-empty strings")
    return Question(str(qid), subtask(category.strip()), tuple(turns))


def select(questions: tuple[Question, ...], categories: list[str] | None, limit_per_category: int | None) -> list[Question]:
    """Questions of the given subtasks (all when None), at most `limit_per_category` of each, in file order."""
    if categories:
        wanted = {subtask(c) for c in categories}
        unknown = wanted - {q.category for q in questions}
        if unknown:
            known = ", ".join(sorted({q.category for q in questions}))
            raise QuestionsError(f"no questions in categories {', '.join(sorted(unknown))} (the file has: {known})")
    kept, count = [], {}
    for question in questions:
        if categories and question.category not in wanted:
            continue
        if limit_per_category is not None and count.get(question.category, 0) >= limit_per_category:
            continue
        count[question.category] = count.get(question.category, 0) + 1
        kept.append(question)
    return kept
