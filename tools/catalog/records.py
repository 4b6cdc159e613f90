"""Reading paper records: bytes -> text -> YAML (with lines) -> `Paper`, with every problem
reported as a `Problem` naming file, line and field. Never raises on bad input. Also the
catalog's index of arXiv ids and normalized titles, which `specatlas new` and `specatlas
freshness` check papers against."""

from __future__ import annotations

import difflib
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Collection

from pydantic import ValidationError

from specatlas.catalog.schema import Paper
from specatlas.catalog.venues import VENUES, normalize_badge
from specatlas.catalog.yamlio import LoadedYaml, YamlProblem, load_yaml, one_line, shorten
from specatlas.fsutil import ReadError, read_limited

# The largest record is ~2 KB; a bigger file is a mistake or an attack, refused before parsing.
MAX_RECORD_BYTES = 64 * 1024
_ARXIV_NEW_STYLE = re.compile(r"^(\d{2})(\d{2})\.\d{4,5}$")  # YYMM.NNNNN


def arxiv_posted(arxiv_id: str | None) -> tuple[int, int] | None:
    """(year, month) a new-style arXiv id was posted; None for an old-style id or none."""
    match = _ARXIV_NEW_STYLE.match(arxiv_id or "")
    return (2000 + int(match.group(1)), int(match.group(2))) if match else None


def posted_month(paper) -> str | None:
    """'YYYY-MM' the work first appeared: the arXiv id's month when it has a new-style id, else the
    record's year and month; None when the month is unknown."""
    posted = arxiv_posted(paper.arxiv)
    if posted:
        return f"{posted[0]}-{posted[1]:02d}"
    return f"{paper.year}-{paper.month:02d}" if paper.month else None


@dataclass(frozen=True, order=True)
class Problem:
    file: str
    line: int
    field: str
    message: str

    def __str__(self) -> str:
        return one_line(f"{self.file}:{self.line}: {self.field}: {self.message}")  # a file name may hold a newline


@dataclass
class Record:
    path: Path
    display: str  # path as shown in messages (relative to the repo when possible)
    paper: Paper | None
    loaded: LoadedYaml | None

    def line_of(self, *path) -> int:
        return self.loaded.line_of(path) if self.loaded else 1


def safe_resolve(path: Path) -> Path:
    """`path.resolve()`, or the absolute path where resolving fails (a symlink loop)."""
    try:
        return path.resolve()
    except (OSError, RuntimeError):
        return path.absolute()


def display_path(path: Path, root: Path | None) -> str:
    try:
        return str(safe_resolve(path).relative_to(safe_resolve(root))) if root else str(path)
    except ValueError:
        return str(path)


def read_record(path: Path, root: Path | None = None) -> tuple[Record, list[Problem]]:
    shown = display_path(path, root)
    record = Record(path, shown, None, None)
    try:
        raw = read_limited(path, MAX_RECORD_BYTES)
    except ReadError as exc:
        return record, [Problem(shown, 1, "(file)", str(exc))]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        return record, [Problem(shown, line, "(encoding)", f"byte 0x{raw[exc.start]:02x} is not UTF-8; save the file as UTF-8")]
    if text.startswith("\ufeff"):
        return record, [Problem(shown, 1, "(encoding)", "starts with a byte-order mark; save as UTF-8 without BOM")]
    if not text.strip():
        return record, [Problem(shown, 1, "(file)", "is empty; run `specatlas new` to scaffold a record")]
    try:
        loaded = load_yaml(text)
    except YamlProblem as exc:
        return record, [Problem(shown, exc.line, exc.field, exc.message)]
    record.loaded = loaded
    if not isinstance(loaded.data, dict):
        return record, [Problem(shown, 1, "(file)", "must be a YAML mapping of fields (id: ..., title: ...)")]
    try:
        record.paper = Paper.model_validate(loaded.data)
    except ValidationError as exc:
        return record, [_explain(shown, loaded, error) for error in exc.errors()]
    return record, []


_FIELDS = set(Paper.model_fields)


def _dotted(loc: tuple) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(record)"


def _undotted(place: str) -> tuple:
    """'reported_results[0].note' -> ('reported_results', 0, 'note'): the inverse of _dotted."""
    return tuple(int(part) if part.isdigit() else part for part in re.findall(r"[^.\[\]]+", place))


def _explain(shown: str, loaded: LoadedYaml, error: dict) -> Problem:
    loc = tuple(p for p in error["loc"] if not (isinstance(p, str) and p.startswith(("function-", "literal[", "constrained-str"))))
    kind, message = error["type"], error["msg"]
    value = error.get("input")
    raw_number = loaded.raw_numbers.get(loc)
    if raw_number is not None and loc and loc[-1] in ("arxiv", "doi", "title", "id"):
        message = (f"YAML read {raw_number} as the number {value!r}; quote it: "
                   f"{loc[-1]}: '{raw_number}'")
    elif kind == "extra_forbidden":
        close = difflib.get_close_matches(str(loc[-1]), _FIELDS if len(loc) == 1 else [], n=1)
        message = "unknown field" + (f"; did you mean '{close[0]}'?" if close else "; see paper.schema.json for the fields")
    elif kind == "missing":
        message = "is required"
    elif loc == ("venue",):
        guess = normalize_badge(str(value)) or next(iter(difflib.get_close_matches(str(value), VENUES, n=1)), None)
        message = f"'{shorten(value)}' is not a controlled venue" + (f"; did you mean '{guess}'?" if guess else "; see tools/catalog/venues.py")
    elif kind == "string_pattern_mismatch":
        message = _pattern_hint(loc, value)
    elif kind == "value_error":
        message = message.removeprefix("Value error, ")
        # Model-level checks name the field they are about: "builds_on: ...".
        named = re.match(r"^([a-z_]+(?:\[[0-9]+\]|\.[a-z0-9_-]+)*): (.*)$", message, re.S)
        if named:
            loc, message = (*loc, *_undotted(named.group(1))), named.group(2)
    return Problem(shown, loaded.line_of(loc), _dotted(loc), message)


def _pattern_hint(loc: tuple, value) -> str:
    name = next((p for p in reversed(loc) if isinstance(p, str)), "")
    value = shorten(value)
    hints = {
        "id": "use surname + year + first title word, lower-case: leviathan2023fast",
        "builds_on": "list record ids such as leviathan2023fast",
        "not_duplicate_of": "list record ids such as leviathan2023fast",
        "arxiv": "write the id without version or URL, quoted: '2302.01318'",
        "doi": "write the bare DOI: 10.18653/v1/2023.acl-long.1",
        "aliases": "lower-case letters, digits, '.', '+' and '-': eagle-2",
        "implementation": "the record's own id, once the registry runs it",
    }
    if name in ("url", "pdf", "code", "links") or (loc and loc[0] in ("code", "links")):
        return f"'{value}' must be an https:// URL"
    if loc and loc[0] == "taxonomy":
        return f"'{value}' is not a kebab-case node id"
    return f"'{value}' has the wrong form; {hints.get(name, 'see paper.schema.json')}"


# The catalog as `specatlas new` and `specatlas freshness` look papers up in it

def normalize_title(title: str) -> str:
    """A title as duplicates are detected: ASCII, lowercase, words only."""
    text = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode().lower()
    return " ".join(re.sub(r"[^a-z0-9]+", " ", text).split())


@dataclass
class Catalog:
    arxiv_ids: Collection[str]  # read_catalog maps each to its record's file name
    titles: Collection[str]  # normalized; likewise
    newest_arxiv: str | None


def read_catalog(directory: Path) -> Catalog:
    """arXiv ids and normalized titles (previous titles too) of every record; a record that
    does not parse is skipped here, the validator reports it."""
    ids: dict[str, str] = {}
    titles: dict[str, str] = {}
    for path in sorted(directory.glob("*.yaml")):
        try:
            data = load_yaml(path.read_text(encoding="utf-8")).data
        except (OSError, UnicodeDecodeError, YamlProblem):
            continue
        if not isinstance(data, dict):
            continue
        if data.get("arxiv"):
            ids[str(data["arxiv"])] = path.name
        for title in [data.get("title"), *(data.get("previous_titles") or [])]:
            if isinstance(title, str):
                titles[normalize_title(title)] = path.name
    new_style = sorted(i for i in ids if "/" not in i)
    return Catalog(ids, titles, new_style[-1] if new_style else None)
