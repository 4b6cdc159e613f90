"""`specatlas new`: scaffold papers/<id>.yaml with every field present and the id rule applied.

Facts come from flags, or from prompts when a flag is missing and stdin is a terminal. Each fact
is checked against the record schema before anything is written, and every value is written as a
quoted YAML scalar, so no flag can add keys or write outside the target folder. The file is created
atomically and exclusively: an existing record is never replaced. The scaffold is deliberately
invalid until its TODOs (summary, taxonomy tags) are filled in.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from pydantic import TypeAdapter, ValidationError

from specatlas.catalog.ids import propose_id
from specatlas.catalog.metadata import fill_args
from specatlas.catalog.schema import ARXIV_PATTERN, DOI_PATTERN, ID_PATTERN, AuthorName, HttpsUrl, Line, Paper, Title
from specatlas.catalog.venues import VENUES, normalize_badge
from specatlas.catalog.yamlio import shorten
from specatlas.fsutil import WriteError, create_exclusive
from specatlas.paths import papers_dir

TEMPLATE = """\
# yaml-language-server: $schema=../paper.schema.json
id: {id}
kind: paper
title: {title}
authors:
{authors}
year: {year}
{month}venue: {venue}
arxiv: {arxiv}
doi: {doi}
url: {url}
pdf: {pdf}
code: {code}
aliases: []  # short method names users type, e.g. [medusa]
{previous_titles}taxonomy:  # node ids from taxonomy/*.yaml; tag every axis that applies
  drafting: []
  verification: []
  alignment: []
  scope: []
lossless: null  # true: keeps the target's distribution; false: lossy; null: not a decoding method
builds_on: []  # ids of cataloged papers this work extends
summary: >-
  TODO: 1-4 sentences in your own words: what the method does, how, and why it helps.
reported_results: []  # the headline number(s): metric, value, target_model, benchmark, source, statistic
# no_result_reason: survey  # only when the paper has no result to copy (see paper.schema.json)
{found_via}"""

_PROMPTS = [
    ("title", "Title (exactly as on the paper)"),
    ("authors", "Authors, comma-separated, in paper order"),
    ("year", "Year (venue year; first arXiv posting for preprints)"),
    ("venue", "Venue (arXiv, NeurIPS, ICML, ACL, ACL-Findings, ...)"),
]


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--title")
    parser.add_argument("--authors", help="comma-separated full names, in paper order")
    parser.add_argument("--year", type=int)
    parser.add_argument("--month", type=int)
    parser.add_argument("--venue", help="controlled venue key or a badge such as NIPS2024")
    parser.add_argument("--arxiv", help="arXiv id, e.g. 2302.01318 (a URL is accepted); the facts not given are looked up online")
    parser.add_argument("--doi", help="DOI; the facts not given are looked up online (Crossref, Semantic Scholar)")
    parser.add_argument("--offline", action="store_true", help="do not look up --arxiv / --doi online")
    parser.add_argument("--url")
    parser.add_argument("--pdf")
    parser.add_argument("--code", action="append", default=[], help="official code URL (repeatable)")
    parser.add_argument("--id", dest="paper_id", help="override the proposed id")
    parser.add_argument("--dir", type=Path, help="where to write (default: the catalog's papers/)")
    parser.add_argument("--stdout", action="store_true", help="print instead of writing a file")
    parser.set_defaults(previous_titles=[], found_via=None)  # set from metadata only


def _fill_from_metadata(args: argparse.Namespace) -> int:
    """With --arxiv or --doi and facts missing, fetch them (metadata.py); flags win. 0 or an exit status."""
    if not (args.arxiv or args.doi) or args.offline or all(getattr(args, n) not in (None, "") for n, _ in _PROMPTS):
        return 0
    return fill_args(args)


def _ask(label: str) -> str:
    try:
        return input(f"{label}: ").strip()
    except EOFError:
        return ""


class BadFlag(Exception):
    """A flag's value cannot go into a record; the message names the flag."""


_LINE, _TITLE, _NAME, _URL = TypeAdapter(Line), TypeAdapter(Title), TypeAdapter(AuthorName), TypeAdapter(HttpsUrl)


def _check(flag: str, value, adapter: TypeAdapter = _LINE, pattern: str | None = None, hint: str = ""):
    if value is None:
        return None
    if pattern and not re.fullmatch(pattern, value):  # fullmatch: "$" alone lets a final newline through
        raise BadFlag(f"{flag} {shorten(repr(value))} has the wrong form{hint}")
    try:
        return adapter.validate_python(value)
    except ValidationError as exc:
        reason = exc.errors()[0]["msg"].removeprefix("Value error, ")
        raise BadFlag(f"{flag} {shorten(repr(value))}: {reason[:1].lower() + reason[1:]}{hint}") from None


def _range(flag: str, value: int | None, name: str) -> None:
    field = Paper.model_fields[name]
    low = next((m.ge for m in field.metadata if hasattr(m, "ge")), None)
    high = next((m.le for m in field.metadata if hasattr(m, "le")), None)
    if value is not None and not (low <= value <= high):
        raise BadFlag(f"{flag} must be in {low}..{high}, got {value}")


def execute(args: argparse.Namespace) -> int:
    try:
        return _scaffold(args)
    except BadFlag as exc:
        print(f"specatlas new: {exc}", file=sys.stderr)
        return 2
    except WriteError as exc:
        print(f"specatlas new: {exc}", file=sys.stderr)
        return 1


def _ask_missing(args: argparse.Namespace) -> list[str]:
    """The required facts not given, asked for in a terminal; the flags of those still missing."""
    interactive = sys.stdin.isatty()
    for name, label in _PROMPTS:
        if getattr(args, name) in (None, "") and interactive:
            value = _ask(label)
            setattr(args, name, int(value) if name == "year" and value.isdigit() else value or None)
    return [f"--{name}" for name, _ in _PROMPTS if getattr(args, name) in (None, "")]


def _scaffold(args: argparse.Namespace) -> int:
    if status := _fill_from_metadata(args):
        return status
    missing = _ask_missing(args)
    if missing:
        print(f"specatlas new: missing {', '.join(missing)} (or run it in a terminal to be prompted)", file=sys.stderr)
        return 2
    venue = args.venue if args.venue in VENUES else normalize_badge(args.venue)
    if venue is None:
        print(f"specatlas new: venue {shorten(repr(args.venue))} is not in the controlled list: {', '.join(VENUES)}",
              file=sys.stderr)
        return 2
    title = _check("--title", args.title.strip(), _TITLE)
    authors = [_check("--authors", a.strip(), _NAME) for a in re.split(r",| and ", args.authors) if a.strip()]
    if not authors:
        raise BadFlag(f"--authors {shorten(repr(args.authors))} names no one; give full names separated by commas")
    _range("--year", args.year, "year")
    _range("--month", args.month, "month")
    arxiv = re.sub(r"^https?://arxiv\.org/(abs|pdf)/|v\d+$|\.pdf$", "", (args.arxiv or "").strip()) or None
    _check("--arxiv", arxiv, pattern=ARXIV_PATTERN, hint="; write an arXiv id such as 2302.01318")
    doi = _check("--doi", args.doi and args.doi.strip(), pattern=DOI_PATTERN, hint="; write the bare DOI: 10.18653/v1/2023.acl-long.1")
    url = _check("--url", args.url and args.url.strip(), _URL, hint="; an https:// URL") or (f"https://arxiv.org/abs/{arxiv}" if arxiv else None)
    pdf = _check("--pdf", args.pdf and args.pdf.strip(), _URL, hint="; an https:// URL")
    code = [_check("--code", c.strip(), _URL, hint="; an https:// URL") for c in args.code]
    if args.paper_id is not None and not re.fullmatch(ID_PATTERN, args.paper_id):
        raise BadFlag(f"--id {shorten(repr(args.paper_id))} is not a record id: surname + year + title word, "
                      "lower-case letters and digits only, e.g. leviathan2023fast")
    target_dir = args.dir or papers_dir()
    if not target_dir.is_dir():
        raise WriteError(f"cannot write to {target_dir}: not an existing folder")
    taken = {p.stem for p in target_dir.glob("*.yaml")}
    paper_id = args.paper_id or propose_id(authors[0], args.year, title, taken)
    text = TEMPLATE.format(
        pdf=json.dumps(pdf) if pdf else "null",
        previous_titles=f"previous_titles: {json.dumps(args.previous_titles, ensure_ascii=False)}\n" if args.previous_titles else "",
        found_via=f"found_via: {json.dumps(args.found_via[:400], ensure_ascii=False)}\n" if args.found_via else "",
        id=paper_id,
        title=json.dumps(title, ensure_ascii=False),
        authors="\n".join(f"  - {json.dumps(a, ensure_ascii=False)}" for a in authors),
        year=args.year,
        month=f"month: {args.month}\n" if args.month else "",
        venue=venue,
        arxiv=f"'{arxiv}'" if arxiv else "null",  # matched ARXIV_PATTERN: no quote inside
        doi=json.dumps(doi) if doi else "null",
        url=json.dumps(url) if url else "null",
        code=json.dumps(code),
    )
    if args.stdout:
        print(text, end="")
        return 0
    path = target_dir / f"{paper_id}.yaml"
    if not create_exclusive(path, text):
        print(f"specatlas new: {path} already exists; pass --id to choose another id", file=sys.stderr)
        return 1
    print(f"wrote {path}\nnext: fill in the TODOs and tags, then run `specatlas validate {path}`")
    return 0
