"""`specatlas freshness`: recent arXiv papers matching the field's queries that the catalog lacks.

Asks arXiv's API (newest first, cs.CL / cs.LG / cs.AI) for each query, drops what the catalog
already has (same arXiv id, or same normalized title, previous titles included) and what
freshness_ignore.yaml says was triaged as out of scope, and prints markdown with a ready-to-edit
`specatlas new --arxiv ID` per paper. The weekly workflow (.github/workflows/freshness.yml) posts
that markdown as one issue. Standard library only.

`--listing FILE` sweeps offline instead: arXiv Atom feeds saved earlier (an API answer or a
category export, e.g. `curl -o cs.CL.xml "https://export.arxiv.org/api/query?search_query=cat:cs.CL
&sortBy=submittedDate&sortOrder=descending&max_results=2000"`) are matched against the same
queries here, so a maintainer with a network saves the listings once and the sweep can be repeated
and reviewed without one.
"""

from __future__ import annotations

import argparse
import datetime as dt
import re
import sys
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from specatlas.catalog.metadata import ARXIV_API, ArxivEntry, Fetch, MetadataError, Offline, http_get, parse_arxiv_feed
from specatlas.catalog.records import Catalog, normalize_title, read_catalog
from specatlas.cli import number
from specatlas.fsutil import ReadError, WriteError, atomic_write, output_file, read_limited, starts_with
from specatlas.paths import papers_dir

# label -> arXiv search_query. Phrases, so "speculative" alone (a common word) does not flood it.
QUERIES: dict[str, str] = {
    "speculative decoding": 'all:"speculative decoding"',
    "speculative sampling": 'all:"speculative sampling"',
    "speculative inference": 'all:"speculative inference"',
    "self-speculative": 'all:"self-speculative"',
    "draft model": 'all:"draft model" AND (all:decoding OR all:inference)',
    "draft then verify": 'all:"draft-then-verify" OR all:"draft and verify"',
    "multi-token prediction": 'all:"multi-token prediction"',
    "lossless acceleration": 'all:"lossless acceleration"',
}
CATEGORIES = ("cs.CL", "cs.LG", "cs.AI")
PAGE_SIZE = 100
MAX_PER_QUERY = 500
API_DELAY_S = 3.0  # arXiv's API terms ask for one request every three seconds
RETRIES = 3
RETRY_WAIT_S = 15.0
IGNORE_FILE = Path(__file__).with_name("freshness_ignore.yaml")
ISSUE_BODY_LIMIT = 60_000
LISTING_LIMIT = 512 * 2**20  # a saved feed; a year of cs.CL as one export is well under it  # GitHub refuses issue bodies over 65,536 characters


def search_url(query: str, start: int = 0, max_results: int = PAGE_SIZE) -> str:
    categories = " OR ".join(f"cat:{c}" for c in CATEGORIES)
    params = {
        "search_query": f"({query}) AND ({categories})",
        "sortBy": "submittedDate",
        "sortOrder": "descending",
        "start": start,
        "max_results": max_results,
    }
    return f"{ARXIV_API}?{urllib.parse.urlencode(params)}"


def _page(url: str, fetch: Fetch, pause, skipped: list[str], tries: int = RETRIES) -> tuple[list[ArxivEntry], int]:
    """One page of results (entries without a readable id or date named in `skipped`). arXiv's API
    often answers 503 or 'Rate exceeded.' under load: wait and ask again; no network at all fails at once."""
    for attempt in range(1, tries + 1):
        unreadable: list[str] = []
        try:
            page = parse_arxiv_feed(fetch(url), unreadable)
        except MetadataError as exc:
            if isinstance(exc, Offline) or attempt == tries:
                raise
            pause(RETRY_WAIT_S * attempt)
        else:
            skipped += unreadable
            return page


@dataclass
class Candidate:
    entry: ArxivEntry
    queries: list[str] = field(default_factory=list)


def search(since: dt.date, fetch: Fetch, queries: dict[str, str] = QUERIES, max_per_query: int = MAX_PER_QUERY,
           pause=time.sleep, skipped: list[str] | None = None) -> dict[str, Candidate]:
    """Every paper first posted on or after `since` that a query finds, by arXiv id; feed entries
    without a readable id or date are named in `skipped`."""
    skipped = [] if skipped is None else skipped
    found: dict[str, Candidate] = {}
    first = True
    for label, query in queries.items():
        for start in range(0, max_per_query, PAGE_SIZE):
            if not first:
                pause(API_DELAY_S)
            first = False
            entries, total = _page(search_url(query, start, min(PAGE_SIZE, max_per_query - start)), fetch, pause,
                                   skipped)
            for entry in entries:
                if entry.published >= since:
                    found.setdefault(entry.arxiv_id, Candidate(entry)).queries.append(label)
            # Newest first: a page reaching back past `since`, or the last page, ends this query.
            if not entries or entries[-1].published < since or start + len(entries) >= total:
                break
    return found


def matches(query: str, text: str) -> bool:
    """Whether `text` (title and abstract) satisfies one of `QUERIES` the way arXiv's search would:
    `all:"a phrase"` and `all:word` terms (case and spacing ignored), AND binding tighter than OR,
    parentheses."""
    tokens = re.findall(r'\(|\)|\bAND\b|\bOR\b|all:"[^"]*"|all:\S+?(?=\)|\s|$)', query)
    haystack = " " + " ".join(re.findall(r"[a-z0-9]+", text.lower())) + " "
    position = 0

    def atom() -> bool:
        nonlocal position
        token = tokens[position]
        position += 1
        if token == "(":
            value = either()
            position += 1  # the ")"
            return value
        words = re.findall(r"[a-z0-9]+", token[4:].lower())
        return f" {' '.join(words)} " in haystack

    def joined(word: str, operand, combine) -> bool:  # operand (word operand)*, every operand read
        nonlocal position
        value = operand()
        while position < len(tokens) and tokens[position] == word:
            position += 1
            value = combine(operand(), value)
        return value

    def both() -> bool:
        return joined("AND", atom, lambda a, b: a and b)

    def either() -> bool:
        return joined("OR", both, lambda a, b: a or b)

    return either()


def sweep(listings: list[Path], since: dt.date, queries: dict[str, str] = QUERIES,
          skipped: list[str] | None = None) -> dict[str, Candidate]:
    """`search` over saved Atom feeds: every entry in `CATEGORIES` first posted on or after `since`
    that a query matches, by arXiv id. A file that is not a feed is a MetadataError naming it; its
    entries without a readable id or date are named in `skipped`."""
    found: dict[str, Candidate] = {}
    for path in listings:
        unreadable: list[str] = []
        try:
            entries, _ = parse_arxiv_feed(read_limited(path, LISTING_LIMIT), unreadable)
        except (ReadError, MetadataError) as exc:
            raise MetadataError(f"{path}: {exc}") from None
        if skipped is not None:
            skipped += [f"{path.name}: {reason}" for reason in unreadable]
        for entry in entries:
            if entry.published < since or not set(entry.categories) & set(CATEGORIES):
                continue
            labels = [label for label, query in queries.items() if matches(query, f"{entry.title} {entry.abstract}")]
            if labels:
                candidate = found.setdefault(entry.arxiv_id, Candidate(entry))
                candidate.queries += [label for label in labels if label not in candidate.queries]
    return found


def read_ignored(path: Path = IGNORE_FILE) -> dict[str, str]:
    if not path.exists():
        return {}
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    return {str(k): str(v) for k, v in data.items()}


def missing(found: dict[str, Candidate], catalog: Catalog, ignored: dict[str, str]) -> list[Candidate]:
    out = [c for arxiv_id, c in found.items()
           if arxiv_id not in catalog.arxiv_ids and arxiv_id not in ignored and normalize_title(c.entry.title) not in catalog.titles]
    return sorted(out, key=lambda c: (c.entry.published, c.entry.arxiv_id), reverse=True)


def _authors(names: list[str]) -> str:
    return ", ".join(map(inert, names[:3])) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


# Markdown's punctuation, escaped with a backslash; '&' is written &amp; (an entity such as &#64;
# would make an '@'), and '@' and '#' (a mention or an issue reference would notify someone) are
# followed by a zero-width space.
_SPECIAL = re.compile(r"[\\`*_\[\]<>|~#@&]")
_ESCAPES = {"&": "&amp;", "@": "@&#8203;", "#": "\\#&#8203;"}


def inert(text: str) -> str:
    """A feed's text as it reads in the issue and nothing more: one line (no line may start a
    shell block or a heading), no links, code, HTML, emphasis, mentions or references."""
    text = " ".join("".join(c if c.isprintable() else " " for c in text).split())
    return _SPECIAL.sub(lambda m: _ESCAPES.get(m.group(), "\\" + m.group()), text)


REPORT_START = "## arXiv papers not in the catalog"  # how every report render() writes begins


def render(candidates: list[Candidate], since: dt.date, today: dt.date, catalog: Catalog, limit: int = ISSUE_BODY_LIMIT) -> str:
    head = [
        f"{REPORT_START}, posted {since.isoformat()} to {today.isoformat()}",
        "",
        f"Queries ({', '.join(CATEGORIES)}): " + "; ".join(f"`{q}`" for q in QUERIES) + ".",
        f"Catalog: {len(catalog.arxiv_ids)} arXiv ids, newest {catalog.newest_arxiv or 'none'}. "
        "Matched by arXiv id and by normalized title (previous titles included).",
        "",
        "For each paper: read the abstract; if it is about speculative decoding, run its command, fill the "
        "TODOs and open a pull request; if not, add its id to `tools/catalog/freshness_ignore.yaml` with a reason.",
        "",
    ]
    if not candidates:
        return "\n".join(head + ["Nothing new: every matching paper is in the catalog or triaged."]) + "\n"
    body: list[str] = []
    size = sum(len(line) + 1 for line in head)
    for shown, candidate in enumerate(candidates):
        entry = candidate.entry
        block = [
            f"- [ ] **{inert(entry.title)}** ({entry.published.isoformat()}, {inert(entry.primary_category)}) "
            f"[abs]({entry.abs_url}) · {_authors(entry.authors)} · matched: {', '.join(candidate.queries)}",
            "  ```bash",
            f"  specatlas new --arxiv {entry.arxiv_id}",
            "  ```",
        ]
        block_size = sum(len(line) + 1 for line in block)
        if size + block_size > limit - 200:
            body.append(f"\n{len(candidates) - shown} more not shown (issue size limit); run `specatlas freshness` locally.")
            break
        body += block
        size += block_size
    summary = [f"**{len(candidates)} paper(s)** to triage, newest first:", ""]
    return "\n".join(head + summary + body) + "\n"


def configure(parser: argparse.ArgumentParser) -> None:
    window = parser.add_mutually_exclusive_group()
    window.add_argument("--since", type=dt.date.fromisoformat, help="first posting date to include, YYYY-MM-DD")
    window.add_argument("--days", type=number(int, 0, 36_500), default=30, help="include papers first posted in the last N days (default 30)")
    parser.add_argument("--max-per-query", type=number(int, 1, 10_000), default=MAX_PER_QUERY, help=f"newest results read per query (default {MAX_PER_QUERY})")
    parser.add_argument("--out", type=Path, help="write the markdown here (a new file or an earlier report) instead of stdout")
    parser.add_argument("--listing", type=Path, action="append", metavar="FILE",
                        help="sweep offline: an arXiv Atom feed saved earlier (an API answer or a category export), "
                             "matched against the same queries here; repeat for several")


def execute(args: argparse.Namespace, fetch: Fetch | None = None, pause=time.sleep, today: dt.date | None = None) -> int:
    today = today or dt.date.today()
    since = args.since or today - dt.timedelta(days=args.days)
    if since > today:
        print(f"specatlas freshness: --since {since} is in the future (today is {today}); no paper has been "
              "posted since then, give a past date", file=sys.stderr)
        return 2
    try:  # before the minutes of polite arXiv queries
        out = args.out and output_file(args.out, "the freshness report", starts_with(REPORT_START))
    except WriteError as exc:
        print(f"specatlas freshness: {exc}", file=sys.stderr)
        return 1
    skipped: list[str] = []
    try:
        if getattr(args, "listing", None):
            found = sweep(args.listing, since, skipped=skipped)
        else:
            found = search(since, fetch or http_get, max_per_query=args.max_per_query, pause=pause, skipped=skipped)
    except MetadataError as exc:
        hint = "; offline? the check needs arXiv's API" if isinstance(exc, Offline) else ""
        print(f"specatlas freshness: {exc}{hint}", file=sys.stderr)
        return 3
    if skipped:
        print(f"specatlas freshness: warning: skipped {len(skipped)} feed entr{'y' if len(skipped) == 1 else 'ies'} "
              f"without a readable id or date: {'; '.join(skipped[:3])}" + ("; ..." if len(skipped) > 3 else ""),
              file=sys.stderr)
    catalog = read_catalog(papers_dir())
    candidates = missing(found, catalog, read_ignored())
    text = render(candidates, since, today, catalog)
    if out:
        try:
            atomic_write(out, text)
        except WriteError as exc:
            print(f"specatlas freshness: {exc}", file=sys.stderr)
            return 1
    else:
        sys.stdout.write(text)
    print(f"{len(found)} matching paper(s) since {since}, {len(candidates)} not in the catalog", file=sys.stderr)
    return 0
