"""`specatlas new`: scaffold papers/<id>.yaml with every field present and the id rule applied.

Facts come from flags, or from prompts when a flag is missing and stdin is a terminal. The
scaffold is deliberately invalid until its TODOs (summary, taxonomy tags) are filled in.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from specatlas.catalog.ids import propose_id
from specatlas.catalog.venues import VENUES, normalize_badge
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
reported_results: []
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
    from specatlas.catalog.metadata import fill_args

    return fill_args(args)


def _ask(label: str) -> str:
    try:
        return input(f"{label}: ").strip()
    except EOFError:
        return ""


def execute(args: argparse.Namespace) -> int:
    if status := _fill_from_metadata(args):
        return status
    interactive = sys.stdin.isatty()
    for name, label in _PROMPTS:
        if getattr(args, name) in (None, "") and interactive:
            value = _ask(label)
            setattr(args, name, int(value) if name == "year" and value.isdigit() else value or None)
    missing = [f"--{name}" for name, _ in _PROMPTS if getattr(args, name) in (None, "")]
    if missing:
        print(f"specatlas new: missing {', '.join(missing)} (or run it in a terminal to be prompted)", file=sys.stderr)
        return 2
    venue = args.venue if args.venue in VENUES else normalize_badge(args.venue)
    if venue is None:
        print(f"specatlas new: venue '{args.venue}' is not in the controlled list: {', '.join(VENUES)}", file=sys.stderr)
        return 2
    authors = [a.strip() for a in re.split(r",| and ", args.authors) if a.strip()]
    arxiv = re.sub(r"^https?://arxiv\.org/(abs|pdf)/|v\d+$|\.pdf$", "", args.arxiv or "") or None
    target_dir = args.dir or papers_dir()
    taken = {p.stem for p in target_dir.glob("*.yaml")}
    paper_id = args.paper_id or propose_id(authors[0], args.year, args.title, taken)
    url = args.url or (f"https://arxiv.org/abs/{arxiv}" if arxiv else None)
    text = TEMPLATE.format(
        pdf=json.dumps(args.pdf) if args.pdf else "null",
        previous_titles=f"previous_titles: {json.dumps(args.previous_titles, ensure_ascii=False)}\n" if args.previous_titles else "",
        found_via=f"found_via: {json.dumps(args.found_via[:400], ensure_ascii=False)}\n" if args.found_via else "",
        id=paper_id,
        title=json.dumps(args.title, ensure_ascii=False),
        authors="\n".join(f"  - {json.dumps(a, ensure_ascii=False)}" for a in authors),
        year=args.year,
        month=f"month: {args.month}\n" if args.month else "",
        venue=venue,
        arxiv=f"'{arxiv}'" if arxiv else "null",
        doi=json.dumps(args.doi) if args.doi else "null",
        url=url or "null",
        code=json.dumps(args.code),
    )
    if args.stdout:
        print(text, end="")
        return 0
    path = target_dir / f"{paper_id}.yaml"
    if path.exists():
        print(f"specatlas new: {path} already exists; pass --id to choose another id", file=sys.stderr)
        return 1
    path.write_text(text, encoding="utf-8")
    print(f"wrote {path}\nnext: fill in the TODOs and tags, then run `specatlas validate {path}`")
    return 0
