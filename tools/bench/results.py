"""The result file: its schema, the metrics derived from its raw samples, and crash-safe writing.

A run's samples accumulate in a hidden checkpoint (`results/.partial-<config hash>.jsonl`, one
fsynced line per finished (question, method, repeat)); a restarted run with the same
configuration skips what it holds. The final JSON is written to a temp file and renamed into
place, so `results/` never holds a truncated result.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from statistics import fmean
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

SCHEMA_VERSION = 1
BASELINE = "baseline"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Turn(_Strict):
    seed: int
    tokens: list[int]
    wall_seconds: float = Field(gt=0)
    steps: int = Field(ge=0)
    widths: dict[int, int]
    draft_seconds: float | None
    verify_seconds: float | None
    drafted_at: list[int] | None
    accepted_at: list[int] | None


class Sample(_Strict):
    question_id: str
    category: str
    repeat: int = Field(ge=0)
    method: str
    turns: list[Turn] = Field(min_length=1)


class Method(_Strict):
    id: str
    name: str
    kind: Literal["specatlas", "peer"]
    lossless: bool
    setup: str
    error: str | None
    policy: str | None = None  # "paper", "cost-aware" or "fixed"; absent in older results


class Session(_Strict):
    started: str
    finished: str | None
    git_commit: str | None
    git_dirty: bool | None
    units: int  # (question, method, repeat) units measured in this session


class Run(_Strict):
    schema_version: Literal[1]
    config_hash: str
    config: dict  # everything that must match for a checkpoint to be resumed (hashed)
    provenance: dict  # packages, hardware, model digests, prompt set, command: see run.py
    cost_curve: dict[int, float] = Field(min_length=1)  # tokens fed -> seconds of a target forward
    sessions: list[Session] = Field(min_length=1)
    methods: list[Method]
    samples: list[Sample]
    summary: dict


def config_hash(config: dict) -> str:
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()


# Metrics ---------------------------------------------------------------------------------------

def summarize(run: Run) -> dict:
    """Per method: metrics overall and per category, and the lossless check against the baseline.

    speedup: Spec-Bench's, the mean per-question throughput (tokens / seconds over all turns of a
    question and repeat) divided by the baseline's on the same questions. speedup_total: total
    tokens over total time, divided likewise. mean_accepted: tokens per target forward that
    committed tokens. predicted: the speedup if drafting were free, from mean_accepted and the
    measured cost curve (a plain step costs c(1); a forward over w tokens costs c(w)).
    """
    by_method: dict[str, dict[tuple[str, int], Sample]] = {}
    for sample in run.samples:
        by_method.setdefault(sample.method, {})[(sample.question_id, sample.repeat)] = sample
    base = by_method.get(BASELINE, {})
    greedy = run.config.get("temperature", 0) == 0
    out = {}
    for method in run.methods:
        mine = by_method.get(method.id, {})
        keys = [key for key in mine if key in base]
        if not keys:
            continue
        groups = {"overall": keys}
        for key in keys:
            groups.setdefault(mine[key].category, []).append(key)
        out[method.id] = {
            name: _metrics([mine[k] for k in group], [base[k] for k in group], run.cost_curve) for name, group in groups.items()
        }
        out[method.id]["lossless"] = _lossless_check(mine, base, keys) if greedy else {
            "status": "not applicable", "reason": f"sampling at temperature {run.config['temperature']:g} "
            f"(seed {run.config['seed']}): token identity is not expected"}
    return out


def _throughput(sample: Sample) -> float:
    return sum(len(t.tokens) for t in sample.turns) / sum(t.wall_seconds for t in sample.turns)


def _metrics(mine: list[Sample], base: list[Sample], curve: dict[int, float]) -> dict:
    turns = [t for s in mine for t in s.turns]
    tokens = sum(len(t.tokens) for t in turns)
    seconds = sum(t.wall_seconds for t in turns)
    base_turns = [t for s in base for t in s.turns]
    base_rate = sum(len(t.tokens) for t in base_turns) / sum(t.wall_seconds for t in base_turns)
    steps = sum(t.steps for t in turns)
    widths = {}
    for t in turns:
        for width, count in t.widths.items():
            widths[width] = widths.get(width, 0) + count
    forward_seconds = sum(_cost(curve, w) * n for w, n in widths.items())
    drafted, accepted = _positions(turns)
    timed = [t for t in turns if t.draft_seconds is not None]
    return {
        "questions": len(mine),
        "tokens": tokens,
        "seconds": round(seconds, 4),
        "speedup": round(fmean(map(_throughput, mine)) / fmean(map(_throughput, base)), 4),
        "speedup_total": round(tokens / seconds / base_rate, 4),
        "mean_accepted": round(tokens / steps, 4) if steps else None,
        "predicted": round(tokens / steps * _cost(curve, 1) * sum(widths.values()) / forward_seconds, 4)
        if steps and forward_seconds else None,
        "acceptance_by_position": [round(a / d, 4) for a, d in zip(accepted, drafted)] if drafted else None,
        "draft_seconds": round(sum(t.draft_seconds for t in timed), 4) if timed else None,
        "verify_seconds": round(sum(t.verify_seconds for t in timed), 4) if timed else None,
    }


def _cost(curve: dict[int, float], width: int) -> float:
    """c(width), interpolated linearly between measured widths; beyond the last, proportional."""
    if width in curve:
        return curve[width]
    below = max((w for w in curve if w < width), default=min(curve))
    above = min((w for w in curve if w > width), default=None)
    if above is None:
        return curve[below] * width / below
    return curve[below] + (curve[above] - curve[below]) * (width - below) / (above - below)


def _positions(turns: list[Turn]) -> tuple[list[int], list[int]]:
    drafted: list[int] = []
    accepted: list[int] = []
    for t in turns:
        for i, (d, a) in enumerate(zip(t.drafted_at or [], t.accepted_at or [])):
            if i == len(drafted):
                drafted.append(0)
                accepted.append(0)
            drafted[i] += d
            accepted[i] += a
    return drafted, accepted


def _lossless_check(mine: dict, base: dict, keys: list) -> dict:
    """Token-by-token comparison of every output with the baseline's for the same question,
    repeat and turn. Later turns see each method's own earlier answers, as in Spec-Bench."""
    compared = identical = 0
    first = None
    for key in keys:
        for turn, (ours, theirs) in enumerate(zip(mine[key].turns, base[key].turns), 1):
            compared += 1
            position = next((i for i, (a, b) in enumerate(zip(ours.tokens, theirs.tokens)) if a != b),
                            None if len(ours.tokens) == len(theirs.tokens) else min(len(ours.tokens), len(theirs.tokens)))
            if position is None:
                identical += 1
            elif first is None:
                first = {"question_id": key[0], "repeat": key[1], "turn": turn, "position": position}
    return {"status": "pass" if identical == compared else "fail", "identical": identical, "compared": compared,
            "first_divergence": first}


# Files -----------------------------------------------------------------------------------------

def dumps(run: Run) -> str:
    """Readable JSON with one sample per line: diffs stay small and the file stays greppable."""
    data = run.model_dump(mode="json")
    samples = data.pop("samples")
    head = json.dumps(data, indent=1, ensure_ascii=False)[:-2]  # reopen the object to append samples
    body = ",\n".join("  " + json.dumps(s, ensure_ascii=False, separators=(",", ":")) for s in samples)
    return f'{head},\n "samples": [\n{body}\n ]\n}}\n'


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with tmp.open("w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def load(path: Path) -> Run:
    """A result file, checked against the schema and its own samples (raises ValueError saying why)."""
    try:
        run = Run.model_validate_json(path.read_bytes())
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise ValueError(f"does not match the result schema: {where}: {first['msg']}") from None
    except OSError as exc:
        raise ValueError(f"cannot read ({exc.strerror or exc})") from None
    if config_hash(run.config) != run.config_hash:
        raise ValueError("config_hash does not match its config")
    if summarize(run) != run.summary:
        raise ValueError("summary does not match the raw samples")
    return run


class Checkpoint:
    """Append-only JSONL: line 1 is the run header, then one line per finished unit or started
    session. A line cut short by a kill is dropped on reopening."""

    def __init__(self, path: Path):
        self.path = path
        self.header: dict | None = None
        self.items: list[dict] = []
        if path.exists():
            self._read()

    def _read(self) -> None:
        good = 0
        with self.path.open("rb") as f:
            for line in f:
                if not line.endswith(b"\n"):
                    break
                try:
                    item = json.loads(line)
                except ValueError:
                    break
                if self.header is None:
                    self.header = item
                else:
                    self.items.append(item)
                good += len(line)
        os.truncate(self.path, good)

    def append(self, item: dict) -> None:
        self._write(item)
        self.items.append(item)

    def start(self, header: dict) -> None:
        self._write(header)
        self.header = header

    def _write(self, item: dict) -> None:
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(item, ensure_ascii=False, separators=(",", ":")) + "\n")
            f.flush()
            os.fsync(f.fileno())
