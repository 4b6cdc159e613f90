"""Paper facts from arXiv, DBLP, Semantic Scholar and Crossref, for `specatlas new --arxiv/--doi`.

Standard library only. Every request goes through one `Fetch` callable (URL -> body bytes), so
tests replay recorded responses and never touch the network. arXiv (or Crossref for a DOI) is
required; DBLP and Semantic Scholar are asked whether the paper was published since, and their
failures only add a note. What comes back is facts to check, not a finished record: the
summary and the taxonomy tags stay for the contributor.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import sys
import urllib.error
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from specatlas.catalog.ids import surname
from specatlas.catalog.records import normalize_title, read_catalog
from specatlas.paths import papers_dir
from specatlas.catalog.venue_names import venue_key
from specatlas.catalog.yamlio import shorten

ARXIV_API = "https://export.arxiv.org/api/query"
S2_API = "https://api.semanticscholar.org/graph/v1/paper/"
S2_FIELDS = "title,authors,venue,publicationVenue,year,publicationDate,externalIds,journal"
DBLP_API = "https://dblp.org/search/publ/api"
CROSSREF_API = "https://api.crossref.org/works/"
USER_AGENT = "specatlas-metadata/1 (+https://github.com/specatlas; catalog of speculative decoding papers)"
TIMEOUT_S = 20.0

ATOM = "{http://www.w3.org/2005/Atom}"
ARXIV_NS = "{http://arxiv.org/schemas/atom}"
OPENSEARCH = "{http://a9.com/-/spec/opensearch/1.1/}"


class MetadataError(Exception):
    """A one-line reason the metadata could not be had (HTTP error, not found, bad response)."""


class Offline(MetadataError):
    """No answer at all: no network, DNS failure, refused connection or timeout."""


Fetch = Callable[[str], bytes]


def http_get(url: str, timeout: float = TIMEOUT_S) -> bytes:
    """GET `url` and return its body; HTTP errors and network failures become one-line errors."""
    host = urllib.parse.urlsplit(url).hostname or url
    request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.read()
    except urllib.error.HTTPError as exc:
        raise MetadataError(f"{host} answered HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        raise Offline(f"cannot reach {host} ({getattr(exc, 'reason', exc)})") from None


# ---------------------------------------------------------------------------------------------
# arXiv (Atom)


@dataclass
class ArxivEntry:
    arxiv_id: str  # without version
    version: int
    title: str
    authors: list[str]
    abstract: str
    published: dt.date  # first version
    updated: dt.date  # this version
    comment: str
    journal_ref: str
    doi: str | None
    primary_category: str
    categories: list[str]

    @property
    def abs_url(self) -> str:
        return f"https://arxiv.org/abs/{self.arxiv_id}"

    @property
    def pdf_url(self) -> str:
        return f"https://arxiv.org/pdf/{self.arxiv_id}"


def _text(element: ET.Element | None) -> str:
    return " ".join((element.text or "").split()) if element is not None else ""


def _date(text: str, name: str) -> dt.date:
    try:
        return dt.date.fromisoformat(text[:10])
    except ValueError:
        raise MetadataError(f"{name} date {shorten(text)!r} is not a date (YYYY-MM-DD...)" if text
                            else f"has no {name} date") from None


def split_arxiv_id(text: str) -> tuple[str, int]:
    """'https://arxiv.org/abs/2401.10774v3' -> ('2401.10774', 3); version 0 when absent."""
    match = re.search(r"((?:\d{4}\.\d{4,5})|(?:[a-z-]+(?:\.[A-Z]{2})?/\d{7}))(?:v(\d+))?", text)
    if not match:
        raise MetadataError(f"{shorten(text)!r} is not an arXiv id (expected e.g. 2401.10774)")
    return match.group(1), int(match.group(2) or 0)


def parse_arxiv_feed(data: bytes, skipped: list[str] | None = None) -> tuple[list[ArxivEntry], int]:
    """Entries of an arXiv API response and its totalResults. arXiv answers some failures with
    HTTP 200: a plain-text 'Rate exceeded.' or a single entry titled 'Error'. An entry without a
    readable id or date is an error, or, when `skipped` is given, left out and named there."""
    try:
        root = ET.fromstring(data)
    except ET.ParseError:
        snippet = " ".join(data[:80].decode("utf-8", "replace").split())
        raise MetadataError(f"arXiv answered something that is not an Atom feed: {shorten(snippet, 80)!r}") from None
    if root.tag != f"{ATOM}feed":  # an RSS feed or a web page: zero entries would read as "nothing new"
        namespace, _, name = root.tag.rpartition("}")
        raise MetadataError(f"not an Atom feed: the document is <{shorten(name, 40)}>"
                            + (f" in {shorten(namespace.lstrip('{'), 60)}" if namespace else "")
                            + ", not an Atom <feed> (save the answer of arXiv's API, export.arxiv.org/api/query)")
    entries = []
    for number, node in enumerate(root.iter(f"{ATOM}entry"), 1):
        entry_id = _text(node.find(f"{ATOM}id"))
        title = _text(node.find(f"{ATOM}title"))
        if "/api/errors" in entry_id or (title == "Error" and "/abs/" not in entry_id):
            raise MetadataError(f"arXiv refused the query: {shorten(_text(node.find(f'{ATOM}summary')), 200)}")
        try:
            entries.append(_entry(node, entry_id, title))
        except MetadataError as exc:
            if skipped is None:
                raise
            skipped.append(f"entry {number} ({shorten(entry_id or 'no id', 60)}) {exc}")
    total = _text(root.find(f"{OPENSEARCH}totalResults"))
    return entries, int(total) if total.isdigit() else len(entries)


def _entry(node: ET.Element, entry_id: str, title: str) -> ArxivEntry:
    arxiv_id, version = split_arxiv_id(entry_id)
    doi = _text(node.find(f"{ARXIV_NS}doi")) or None
    primary = node.find(f"{ARXIV_NS}primary_category")
    published = _text(node.find(f"{ATOM}published"))
    return ArxivEntry(
        arxiv_id=arxiv_id,
        version=version,
        title=title,
        authors=[_text(a.find(f"{ATOM}name")) for a in node.findall(f"{ATOM}author")],
        abstract=_text(node.find(f"{ATOM}summary")),
        published=_date(published, "published"),
        updated=_date(_text(node.find(f"{ATOM}updated")) or published, "updated"),
        comment=_text(node.find(f"{ARXIV_NS}comment")),
        journal_ref=_text(node.find(f"{ARXIV_NS}journal_ref")),
        doi=doi.split()[0] if doi else None,
        primary_category=primary.get("term", "") if primary is not None else "",
        categories=[c.get("term", "") for c in node.findall(f"{ATOM}category")],
    )


def fetch_arxiv(arxiv_id: str, fetch: Fetch) -> ArxivEntry:
    url = f"{ARXIV_API}?{urllib.parse.urlencode({'id_list': arxiv_id, 'max_results': 1})}"
    entries, _ = parse_arxiv_feed(fetch(url))
    match = [e for e in entries if e.arxiv_id == arxiv_id]
    if not match:
        raise MetadataError(f"arXiv has no paper {arxiv_id}; check the id")
    return match[0]


_CODE_URL = re.compile(r"https?://(?:www\.)?(?:github\.com|gitlab\.com)/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")


def code_links(*texts: str) -> list[str]:
    """Repository URLs named in an abstract or comment, in order, https, without '.git' or a
    sentence's final period."""
    found: list[str] = []
    for text in texts:
        for url in _CODE_URL.findall(text or ""):
            url = re.sub(r"(\.git)?[.,;:)]*$", "", url.rstrip("."))
            url = "https://" + url.split("://", 1)[1].removeprefix("www.")
            if url.lower() not in (f.lower() for f in found):
                found.append(url)
    return found


# ---------------------------------------------------------------------------------------------
# Semantic Scholar, DBLP, Crossref (JSON)


def _json(data: bytes, source: str) -> dict:
    try:
        value = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise MetadataError(f"{source} answered something that is not JSON") from None
    if not isinstance(value, dict):
        raise MetadataError(f"{source} answered an unexpected JSON shape")
    return value


@dataclass
class ScholarPaper:
    title: str
    authors: list[str]
    venue: str  # the name it gives, possibly a preprint server
    year: int | None
    external_ids: dict[str, str]


def parse_semantic_scholar(data: bytes) -> ScholarPaper:
    value = _json(data, "Semantic Scholar")
    if "error" in value or "title" not in value:
        raise MetadataError(f"Semantic Scholar: {value.get('error') or value.get('message') or 'no paper'}")
    venue = (value.get("publicationVenue") or {}).get("name") or value.get("venue") or ""
    return ScholarPaper(
        title=" ".join(value["title"].split()),
        authors=[a["name"] for a in value.get("authors") or [] if a.get("name")],
        venue=venue,
        year=value.get("year"),
        external_ids={k: str(v) for k, v in (value.get("externalIds") or {}).items()},
    )


def fetch_semantic_scholar(paper_ref: str, fetch: Fetch) -> ScholarPaper:
    """`paper_ref` is 'arXiv:2401.10774' or 'DOI:10.18653/...'."""
    return parse_semantic_scholar(fetch(f"{S2_API}{urllib.parse.quote(paper_ref, safe=':/')}?fields={S2_FIELDS}"))


@dataclass
class DblpHit:
    title: str
    authors: list[str]
    venue: str
    year: int
    kind: str  # DBLP's type, e.g. 'Conference and Workshop Papers', 'Informal and Other Publications'
    key: str
    doi: str | None
    ee: str | None  # the electronic edition's URL: the publisher's landing page

    @property
    def preprint(self) -> bool:
        return self.kind.startswith("Informal") or venue_key(self.venue) == "arXiv"


def _listed(value) -> list:
    return value if isinstance(value, list) else [] if value is None else [value]


def parse_dblp(data: bytes) -> list[DblpHit]:
    hits = _json(data, "DBLP").get("result", {}).get("hits", {})
    out = []
    for hit in _listed(hits.get("hit")):
        info = hit.get("info", {})
        authors = [a.get("text", "") if isinstance(a, dict) else str(a) for a in _listed((info.get("authors") or {}).get("author"))]
        out.append(DblpHit(
            title=" ".join(str(info.get("title", "")).split()).removesuffix("."),
            # DBLP tells namesakes apart with a number ('Tianle Cai 0001'); the paper has none.
            authors=[re.sub(r"\s+\d{4}$", "", a) for a in authors if a],
            venue=" ".join(map(str, _listed(info.get("venue")))),
            year=int(info.get("year", 0) or 0),
            kind=str(info.get("type", "")),
            key=str(info.get("key", "")),
            doi=str(info["doi"]).lower() if info.get("doi") else None,  # DBLP upper-cases DOIs; they are case-blind
            ee=next(iter(_listed(info.get("ee"))), None),
        ))
    return out


def fetch_dblp(title: str, fetch: Fetch) -> list[DblpHit]:
    words = " ".join(re.findall(r"[\w]+", title))
    return parse_dblp(fetch(f"{DBLP_API}?{urllib.parse.urlencode({'q': words, 'format': 'json', 'h': 30})}"))


@dataclass
class CrossrefWork:
    doi: str
    title: str
    authors: list[str]
    container: str
    event: str
    year: int | None
    month: int | None
    landing: str | None
    pdf: str | None
    kind: str


def parse_crossref(data: bytes) -> CrossrefWork:
    message = _json(data, "Crossref").get("message")
    if not isinstance(message, dict) or "DOI" not in message:
        raise MetadataError("Crossref answered without a work")
    parts = next((message[k]["date-parts"][0] for k in ("published-print", "published-online", "issued", "published")
                  if message.get(k, {}).get("date-parts", [[None]])[0][0]), [None])
    authors = []
    for person in message.get("author") or []:
        name = " ".join(p for p in (person.get("given"), person.get("family")) if p) or person.get("name", "")
        if name:
            authors.append(" ".join(name.split()))
    landing = (message.get("resource") or {}).get("primary", {}).get("URL")
    pdf = next((link["URL"] for link in message.get("link") or []
                if link.get("content-type") == "application/pdf" and str(link.get("URL", "")).startswith("https://")), None)
    return CrossrefWork(
        doi=message["DOI"],
        title=" ".join(" ".join(message.get("title") or [""]).split()),
        authors=authors,
        container=" ".join(message.get("container-title") or []),
        event=(message.get("event") or {}).get("name", ""),
        year=parts[0],
        month=parts[1] if len(parts) > 1 else None,
        landing=landing if landing and landing.startswith("https://") else None,
        pdf=pdf,
        kind=message.get("type", ""),
    )


def fetch_crossref(doi: str, fetch: Fetch) -> CrossrefWork:
    return parse_crossref(fetch(CROSSREF_API + urllib.parse.quote(doi, safe="/:;()")))


# ---------------------------------------------------------------------------------------------
# Putting it together


@dataclass
class Metadata:
    title: str
    authors: list[str]
    year: int | None
    venue: str | None  # None: published somewhere the controlled list does not name
    month: int | None = None
    arxiv: str | None = None
    doi: str | None = None
    url: str | None = None
    pdf: str | None = None
    code: list[str] = field(default_factory=list)
    previous_title: str | None = None  # the preprint's title when the published one differs
    abstract: str = ""
    sources: list[str] = field(default_factory=list)  # "label: public URL" of each page consulted, for found_via
    notes: list[str] = field(default_factory=list)  # what the contributor must check by hand


def normalize_doi(text: str) -> str:
    return re.sub(r"^(https?://(dx\.)?doi\.org/|doi:)", "", text.strip(), flags=re.IGNORECASE)


def _landing_page(doi: str | None, ee: str | None) -> str | None:
    """The canonical page: the ACL Anthology for its DOIs, else the electronic edition (https)."""
    if doi and doi.lower().startswith("10.18653/v1/"):
        return "https://aclanthology.org/" + doi.split("/", 2)[2].lower() + "/"
    if ee and "arxiv.org" not in ee:
        return re.sub(r"^http://", "https://", ee)
    return f"https://doi.org/{doi}" if doi else None


def _published_hit(hits: list[DblpHit], titles: set[str], first_author: str) -> DblpHit | None:
    """The DBLP record of the published version: same title (preprint or newer), same first
    author's surname, not CoRR. A main-track version beats a workshop one, then the newest wins."""
    matches = [h for h in hits if not h.preprint and normalize_title(h.title) in titles and h.authors
               and surname(h.authors[0]) == surname(first_author)]
    return max(matches, key=lambda h: (not (venue_key(h.venue) or "").endswith(("-Workshop", "workshop")), h.year), default=None)


def _comment_venue(entry: ArxivEntry) -> tuple[str, int | None] | None:
    """A venue (and its year) the authors name in the arXiv journal-ref or comment
    ('Accepted to ICML 2024')."""
    phrases = [entry.journal_ref] if entry.journal_ref else []
    match = re.search(r"\b(?:accepted|published|to appear|appears?)\b[^.;]*?\b(?:at|to|in|by|as)\b\s+(?:the\s+)?([^.;,]+)", entry.comment, re.IGNORECASE)
    if match:
        phrase = re.sub(r"\b(main|conference|track|paper|long|short|oral|spotlight|poster)\b", " ", match.group(1), flags=re.IGNORECASE)
        phrases.append(" ".join(phrase.split()[:5]))
    for phrase in phrases:
        key = venue_key(phrase)
        if key and key != "arXiv":
            year = re.search(r"\b(?:19|20)\d{2}\b", phrase)
            return key, int(year.group()) if year else None
    return None


def from_arxiv(arxiv_id: str, fetch: Fetch = http_get) -> Metadata:
    arxiv_id, _ = split_arxiv_id(arxiv_id)
    entry = fetch_arxiv(arxiv_id, fetch)
    meta = Metadata(
        title=entry.title, authors=entry.authors, year=entry.published.year, month=entry.published.month,
        venue="arXiv", arxiv=arxiv_id, url=entry.abs_url, pdf=entry.pdf_url,
        doi=entry.doi if entry.doi and not entry.doi.startswith("10.48550/") else None,
        code=code_links(entry.comment, entry.abstract), abstract=entry.abstract,
        sources=[f"arXiv: {entry.abs_url}v{entry.version}"],
    )
    scholar = None
    try:
        scholar = fetch_semantic_scholar(f"arXiv:{arxiv_id}", fetch)
        meta.sources.append(f"Semantic Scholar: {S2_API}arXiv:{arxiv_id}")
    except MetadataError as exc:
        meta.notes.append(f"Semantic Scholar not consulted: {exc}")
    titles = {normalize_title(entry.title)} | ({normalize_title(scholar.title)} if scholar else set())
    published = None
    try:
        for title in dict.fromkeys([entry.title, *([scholar.title] if scholar else [])]):
            published = _published_hit(fetch_dblp(title, fetch), titles, entry.authors[0] if entry.authors else "")
            if published:
                break
    except MetadataError as exc:
        meta.notes.append(f"DBLP not consulted: {exc}")

    if published:
        meta.sources.append(f"DBLP: https://dblp.org/rec/{published.key}")
        meta.venue, meta.year, meta.month = venue_key(published.venue), published.year, None
        meta.authors = published.authors  # the version the venue refers to, not arXiv's
        if normalize_title(published.title) != normalize_title(entry.title):
            meta.title, meta.previous_title = published.title, entry.title
        meta.doi = published.doi or meta.doi
        meta.url = _landing_page(published.doi, published.ee) or meta.url
        if meta.venue is None:
            meta.notes.append(f"DBLP names the venue '{published.venue}', which is not in tools/catalog/venues.py; pass --venue")
        meta.notes.append("title, authors and year are the published version's (DBLP); compare them with the paper's venue page")
    elif scholar and venue_key(scholar.venue) not in (None, "arXiv"):
        meta.venue, meta.month = venue_key(scholar.venue), None
        meta.year = scholar.year or meta.year
        meta.notes.append(f"venue from Semantic Scholar ('{scholar.venue}'); set url to the proceedings page and check the authors against it")
    elif stated := _comment_venue(entry):
        meta.venue, meta.month = stated[0], None
        meta.year = stated[1] or meta.year
        meta.notes.append(f"venue read from the arXiv comment ('{entry.comment or entry.journal_ref}'); confirm the year and set url to the proceedings page")
    return meta


def from_doi(doi: str, fetch: Fetch = http_get) -> Metadata:
    doi = normalize_doi(doi)
    if doi.lower().startswith("10.48550/arxiv."):  # arXiv's own DOI names a preprint: ask arXiv
        return from_arxiv(doi.split(".", 2)[2], fetch)
    work = fetch_crossref(doi, fetch)
    venue = venue_key(work.container) or venue_key(work.event)
    meta = Metadata(
        title=work.title, authors=work.authors, year=work.year, month=work.month, venue=venue,
        doi=work.doi, url=_landing_page(work.doi, work.landing), pdf=work.pdf,
        sources=[f"Crossref: {CROSSREF_API}{work.doi}"],
    )
    try:
        scholar = fetch_semantic_scholar(f"DOI:{work.doi}", fetch)
        meta.sources.append(f"Semantic Scholar: {S2_API}DOI:{work.doi}")
        meta.venue = meta.venue or (venue_key(scholar.venue) if venue_key(scholar.venue) != "arXiv" else None)
        if scholar.external_ids.get("ArXiv"):
            entry = fetch_arxiv(scholar.external_ids["ArXiv"], fetch)
            meta.arxiv, meta.abstract = entry.arxiv_id, entry.abstract
            meta.pdf = meta.pdf or entry.pdf_url
            meta.code = code_links(entry.comment, entry.abstract)
            if normalize_title(entry.title) != normalize_title(work.title):
                meta.previous_title = entry.title
            meta.sources.append(f"arXiv: {entry.abs_url}")
    except MetadataError as exc:
        meta.notes.append(f"no arXiv version found: {exc}")
    if meta.venue is None:
        meta.notes.append(f"Crossref names the venue '{work.container or work.event or work.kind}', which is not in tools/catalog/venues.py; pass --venue")
    return meta


# ---------------------------------------------------------------------------------------------
# The hook `specatlas new` calls


def manual_command(args: argparse.Namespace) -> str:
    ref = f" --arxiv {args.arxiv}" if args.arxiv else f" --doi {args.doi}" if args.doi else ""
    venue = "arXiv" if args.arxiv else "VENUE"
    return f'specatlas new --title "..." --authors "A. One, B. Two" --year YYYY --venue {venue}{ref} --offline'


def _catalogued_as(directory: Path, meta: Metadata) -> str | None:
    """The record file that already holds this paper (same arXiv id or normalized title)."""
    catalog = read_catalog(directory)
    titles = [meta.title, *([meta.previous_title] if meta.previous_title else [])]
    return (catalog.arxiv_ids.get(meta.arxiv or "")
            or next((catalog.titles[normalize_title(t)] for t in titles if normalize_title(t) in catalog.titles), None))


def fill_args(args: argparse.Namespace, fetch: Fetch | None = None) -> int:
    """Fill the facts `specatlas new` was not given from --arxiv / --doi; flags always win.
    Returns 0, or 2 after a one-line error naming the manual path."""
    fetch = fetch or http_get
    try:
        meta = from_arxiv(args.arxiv, fetch) if args.arxiv else from_doi(args.doi, fetch)
    except MetadataError as exc:
        hint = "offline? " if isinstance(exc, Offline) else ""
        print(f"specatlas new: {exc}; {hint}fill the record by hand: {manual_command(args)}", file=sys.stderr)
        return 2
    directory = args.dir or papers_dir()
    known = _catalogued_as(directory, meta)
    if known:
        print(f"specatlas new: this paper is already in the catalog: {directory.name}/{known}; edit that record "
              "(to scaffold anyway, pass the facts with --offline)", file=sys.stderr)
        return 1
    fetched = {
        "title": meta.title, "authors": ", ".join(meta.authors), "year": meta.year, "month": meta.month,
        "venue": meta.venue, "arxiv": meta.arxiv, "doi": meta.doi, "url": meta.url, "pdf": meta.pdf,
        "previous_titles": [meta.previous_title] if meta.previous_title else [],
        "found_via": "; ".join(meta.sources),
    }
    for name, value in fetched.items():
        if getattr(args, name, None) in (None, "", []):
            setattr(args, name, value)
    if not args.code:
        args.code = meta.code
    for note in meta.notes:
        print(f"note: {note}", file=sys.stderr)
    if meta.abstract:
        print(f"abstract (read it, then write the summary in your own words):\n  {meta.abstract}", file=sys.stderr)
    return 0
