"""Spec-Bench's published leaderboard, committed as data in results/published/ (see its README).

The leaderboard page and the Reported results page both show it, so both read it through
`load_spec_bench`, which refuses a missing or malformed file with one line saying which and why:
a page that promises these numbers never silently leaves them out.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from specatlas.fsutil import ReadError, read_json

SPEC_BENCH_FILE = Path("results", "published", "spec-bench-leaderboard.json")  # under the catalog root
ROW_LABELS = ("device", "target_model", "method")  # every other field of a row is a number (or null)
MAX_BYTES = 1 << 20


class PublishedDataError(ValueError):
    """The published data a page needs is missing or malformed (the message is one line)."""


class SpecBenchLeaderboard(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    source: str  # repository, file and commit the figures were copied from
    url: str  # that exact version of the file
    licence: str
    settings: str
    hardware: dict[str, str]  # device name in `rows` -> description
    rows: list[dict[str, str | float | None]]

    @field_validator("url")
    @classmethod
    def _https(cls, url: str) -> str:
        if not url.startswith("https://"):
            raise ValueError("must be an https URL")
        return url

    @field_validator("rows")
    @classmethod
    def _labelled_rows(cls, rows: list[dict]) -> list[dict]:
        if not rows:
            raise ValueError("lists no rows")
        for number, row in enumerate(rows, 1):
            missing = [label for label in ROW_LABELS if not isinstance(row.get(label), str)]
            if missing:
                raise ValueError(f"row {number} has no {', '.join(missing)}")
            texts = [key for key, value in row.items() if isinstance(value, str) and key not in ROW_LABELS]
            if texts:
                raise ValueError(f"row {number}: {', '.join(texts)} must be numbers")
        return rows


def spec_bench_file(root: Path) -> Path:
    return root / SPEC_BENCH_FILE


def load_spec_bench(root: Path) -> SpecBenchLeaderboard:
    """The published Spec-Bench leaderboard of the catalog at `root`."""
    path = spec_bench_file(root)
    shown = SPEC_BENCH_FILE.as_posix()
    if not path.exists():
        raise PublishedDataError(f"{shown} is missing: it holds Spec-Bench's published leaderboard, which the "
                                 "leaderboard and Reported results pages show (restore it from the repository)")
    try:
        data = read_json(path, MAX_BYTES)
    except ReadError as exc:  # "is too large", "cannot be read" or "not valid JSON: ...", as a sentence
        problem = str(exc)
        raise PublishedDataError(f"{shown} {'is ' if problem.startswith('not ') else ''}{problem}") from None
    try:
        return SpecBenchLeaderboard.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"]) or "the file"
        raise PublishedDataError(f"{shown}: {where}: {error['msg'].removeprefix('Value error, ')}") from None
