"""Result files on disk, and the checkpoint a run's samples accumulate in.

A run's samples accumulate in a hidden checkpoint (`results/.partial-<config hash>.jsonl`, one
fsynced line per finished (question, method, repeat)); a restarted run with the same
configuration skips what it holds. A line cut short by a kill is dropped; a corrupted or
ill-shaped line elsewhere is skipped, never taking later lines with it. The final JSON is written
to a temp file and linked into place under a name no other result has, so `results/` never holds
a truncated result and no result is ever replaced. A file loads only when its stored summary is
what its samples give.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from pydantic import ValidationError

from specatlas.bench.results import Provenance, Run, RunConfig, Sample, combine_curves, config_hash, summarize
from specatlas.fsutil import ReadError, append_line, atomic_write, locked_file, read_json

# Rows, samples and questions one file may hold: the page's work grows with rows times samples.
MAX_METHODS, MAX_SAMPLES, MAX_QUESTIONS = 256, 100_000, 10_000


def dumps(run: Run) -> str:
    """Readable JSON with one sample per line: diffs stay small and the file stays greppable."""
    data = run.model_dump(mode="json")
    samples = data.pop("samples")
    head = json.dumps(data, indent=1, ensure_ascii=False)[:-2]  # reopen the object to append samples
    body = ",\n".join("  " + json.dumps(s, ensure_ascii=False, separators=(",", ":")) for s in samples)
    return f'{head},\n "samples": [\n{body}\n ]\n}}\n'


write_atomic = atomic_write  # the name other modules import


def schema_error(exc: ValidationError, prefix: str = "", schema: str = "the result schema") -> ValueError:
    """The first problem pydantic found, in one line naming the field."""
    first = exc.errors()[0]
    where = ".".join(str(p) for p in (prefix, *first["loc"]) if p != "") or "(top level)"
    return ValueError(f"does not match {schema}: {where}: {first['msg']}")


def load(path: Path) -> Run:
    """A result file, checked against the schema and its own samples (raises ValueError saying why)."""
    try:
        data = read_json(path, MAX_RESULT_BYTES, parse_constant=_no_constant, parse_float=_finite)
    except ReadError as exc:
        raise ValueError(str(exc)) from None
    if _depth(data) > MAX_DEPTH:
        raise ValueError(f"nested more than {MAX_DEPTH} levels deep: no result field is")
    try:
        run = Run.model_validate(data)
    except ValidationError as exc:
        raise schema_error(exc) from None
    for name, model, data in (("config", RunConfig, run.config), ("provenance", Provenance, run.provenance)):
        try:
            model.model_validate(data)
        except ValidationError as exc:
            raise schema_error(exc, name) from None
    for where, count, bound in (("methods", len(run.methods), MAX_METHODS), ("samples", len(run.samples), MAX_SAMPLES),
                                ("config.question_ids", len(run.config["question_ids"]), MAX_QUESTIONS)):
        if count > bound:
            raise ValueError(f"{where}: {count:,} entries; a result file holds at most {bound:,}")
    if config_hash(run.config) != run.config_hash:
        raise ValueError("config_hash does not match its config")
    if run.schema_version >= 2:
        curve, source = combine_curves([s.cost_curve for s in run.sessions])
        # Exactly: each width is one session's measurement, not a value that rounding could move.
        mismatch = (f"cost_curve should be {json.dumps(curve)}" if run.cost_curve != curve
                    else difference(run.cost_curve_source.model_dump(), source, "cost_curve_source"))
        if mismatch:
            raise ValueError(f"the cost curve does not combine its sessions' curves: {mismatch}")
    mismatch = difference(run.summary, summarize(run))
    if mismatch:
        raise ValueError(f"summary does not match the raw samples: {mismatch}")
    return run


def _depth(data: object) -> int:
    """How deeply `data` nests (a scalar: 0), without recursion: a deep document cannot overflow the stack."""
    deepest, stack = 0, [(data, 1)]
    while stack:
        item, level = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is not None:
            deepest = max(deepest, level)
            if deepest > MAX_DEPTH:
                return deepest
            stack.extend((child, level + 1) for child in children)
    return deepest


def _no_constant(name: str):
    raise ValueError(f"{name} is not a number a measurement can have")


def _finite(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"{text} is out of range")
    return value


# Stored metrics are rounded to 4 decimals; a recomputation on another machine may round the last
# digit the other way, never more.
ROUNDING = 1e-4 + 1e-9


def difference(stored: object, computed: object, where: str = "") -> str | None:
    """Where `stored` differs from `computed` (numbers within rounding count as equal), or None."""
    here = where or "(top level)"
    if isinstance(computed, dict):
        if not isinstance(stored, dict):
            return f"{here} is not an object"
        for key in computed.keys() | stored.keys():
            path = f"{where}.{key}" if where else str(key)
            if key not in stored:
                return f"{path} is missing"
            if key not in computed:
                return f"{path} is not derived from any sample"
            found = difference(stored[key], computed[key], path)
            if found:
                return found
        return None
    if isinstance(computed, list):
        if not isinstance(stored, list) or len(stored) != len(computed):
            return f"{here} should be {json.dumps(computed)}"
        return next((d for i, (a, b) in enumerate(zip(stored, computed)) if (d := difference(a, b, f"{where}[{i}]"))), None)
    if isinstance(computed, float) and not isinstance(stored, bool) and isinstance(stored, (int, float)):
        return None if abs(stored - computed) <= ROUNDING else f"{here} is {stored:g}; the samples give {computed:g}"
    if type(stored) is not type(computed) or stored != computed:
        return f"{here} is {json.dumps(stored)}; the samples give {json.dumps(computed)}"
    return None


class Checkpoint:
    """Append-only JSONL: line 1 is the run header, then one line per finished unit or started
    session. On reopening, a last line cut short by a kill is dropped; any other line that is not
    valid JSON of the right shape is skipped (its number kept in `skipped`) and left in the file,
    so one bad line never costs the units after it."""

    def __init__(self, path: Path):
        self.path = path
        self.header: dict | None = None
        self.items: list[dict] = []
        self.skipped: list[int] = []
        if path.exists():
            self._read()

    def _read(self) -> None:
        complete = 0
        # Locked: a run appending to the same file at once never has its line cut as "short".
        with locked_file(self.path) as f:
            for number, line in enumerate(f, 1):
                if not line.endswith(b"\n"):
                    break  # only the last line can lack its newline: the write a kill cut short
                complete += len(line)
                try:
                    item = json.loads(line)
                except ValueError:
                    item = None
                if self.header is None and _is_header(item):
                    self.header = item
                elif _is_item(item):
                    self.items.append(item)
                else:
                    self.skipped.append(number)
            f.truncate(complete)

    def append(self, item: dict) -> None:
        self._write(item)
        self.items.append(item)

    def start(self, header: dict) -> None:
        self._write(header)
        self.header = header

    def _write(self, item: dict) -> None:
        # One locked write per line: a kill leaves the old lines plus at most a partial last line,
        # and two runs appending at once keep every line of both.
        append_line(self.path, json.dumps(item, ensure_ascii=False, separators=(",", ":")))


def _is_header(item) -> bool:
    # Checkpoints of schema 1 also hold the curve their earliest session timed ("cost_curve").
    return (isinstance(item, dict) and isinstance(item.get("config_hash"), str) and isinstance(item.get("config"), dict)
            and isinstance(item.get("cost_curve", {}), dict) and isinstance(item.get("provenance"), dict)
            and isinstance(item["provenance"].get("started"), str))


def _is_item(item) -> bool:
    if not isinstance(item, dict):
        return False
    if "session" in item:
        return (set(item) == {"session"} and isinstance(item["session"], dict)
                and isinstance(item["session"].get("started"), str)
                and isinstance(item["session"].get("cost_curve", {}), dict))
    try:
        Sample.model_validate(item)
    except ValidationError:
        return False
    return True


# The largest committed run is 1.5 MB; parsed, JSON takes some 20 times its bytes of memory.
MAX_RESULT_BYTES = 32 * 1024 * 1024


# A result nests 6 levels deep; far deeper nesting overflows the serializers (config_hash, the page).
MAX_DEPTH = 32
