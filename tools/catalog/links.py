"""`specatlas check-links`: does every url, pdf, code and links URL of the catalog still answer?

Each distinct URL is asked once, HEAD first and GET when HEAD is refused or fails (many servers
answer HEAD with 403/405), with a timeout, at most --jobs requests at once and --per-host per
host. Problems are reported as `papers/x.yaml:LINE: field: status URL`.

Outcomes: ok (2xx/3xx), broken (404/410: gone), unreachable (no answer: DNS, refused, timeout),
unverified (401/403/429/5xx/other 4xx: the site refuses scripts or is down right now; reported,
failing only with --strict). Exit 0 when nothing is broken or unreachable, 1 otherwise, 3 when
there is no network at all (nothing could be checked). Standard library only.
"""

from __future__ import annotations

import argparse
import http.client
import itertools
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from http import HTTPStatus
from pathlib import Path
from typing import Callable

from specatlas.catalog.metadata import USER_AGENT
from specatlas.cli import number
from specatlas.catalog.records import MAX_RECORD_BYTES, Problem, display_path
from specatlas.catalog.validate import github_annotation
from specatlas.catalog.yamlio import YamlProblem, load_yaml, one_line
from specatlas.fsutil import ReadError, read_limited
from specatlas.paths import repo_root

FIELDS = ("url", "pdf", "code", "links")
GONE = (404, 410)
PROBE_HOSTS = 3


class NetworkError(Exception):
    """No HTTP answer at all."""


# (method, url, timeout) -> (status, final url after redirects); raises NetworkError.
Http = Callable[[str, str, float], "tuple[int, str]"]


def http_status(method: str, url: str, timeout: float) -> tuple[int, str]:
    request = urllib.request.Request(url, method=method, headers={"User-Agent": USER_AGENT, "Accept": "*/*"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.geturl()  # the body is never read
    except urllib.error.HTTPError as exc:
        return exc.code, url
    except (urllib.error.URLError, TimeoutError, OSError, http.client.HTTPException, ValueError) as exc:
        raise NetworkError(str(getattr(exc, "reason", exc)) or type(exc).__name__) from None


@dataclass(frozen=True, order=True)
class Link:
    file: str
    line: int
    field: str
    url: str


@dataclass(frozen=True)
class Outcome:
    status: int | None  # None: no answer
    final_url: str | None = None
    error: str | None = None

    @property
    def kind(self) -> str:
        if self.status is None:
            return "unreachable"
        if self.status < 400:
            return "ok"
        return "broken" if self.status in GONE else "unverified"

    def describe(self) -> str:
        if self.status is None:
            return f"unreachable ({self.error})"
        try:
            phrase = HTTPStatus(self.status).phrase
        except ValueError:
            phrase = ""
        return f"{self.status} {phrase}".strip()


def collect_links(paths: list[Path], root: Path, fields: tuple[str, ...] = FIELDS) -> list[Link]:
    """Every URL field of the records, with its line; records the validator would refuse are
    read as far as their YAML allows."""
    links: list[Link] = []
    for path in paths:
        shown = display_path(path, root)
        try:
            loaded = load_yaml(read_limited(path, MAX_RECORD_BYTES).decode("utf-8"))
        except (ReadError, UnicodeDecodeError, YamlProblem):
            continue
        data = loaded.data if isinstance(loaded.data, dict) else {}
        for name in fields:
            value = data.get(name)
            if isinstance(value, str):
                items = [((name,), name, value)]
            elif isinstance(value, list):
                items = [((name, i), f"{name}[{i}]", v) for i, v in enumerate(value)]
            elif isinstance(value, dict):
                items = [((name, k), f"{name}.{k}", v) for k, v in value.items()]
            else:
                items = []
            for loc, label, url in items:
                # One printable word, as the validator wants it: what else a record holds is no link
                # to ask for, and would break the line it is reported on.
                if isinstance(url, str) and url.startswith(("http://", "https://")) and url.isprintable() \
                        and " " not in url:
                    links.append(Link(shown, loaded.line_of(loc), label, url))
    return sorted(links)


def check_url(url: str, http: Http, timeout: float) -> Outcome:
    try:
        status, final = http("HEAD", url, timeout)
        if status < 400:
            return Outcome(status, final)
    except NetworkError:
        pass
    try:  # HEAD refused or failed: GET decides
        status, final = http("GET", url, timeout)
        return Outcome(status, final)
    except NetworkError as exc:
        return Outcome(None, error=str(exc))


def _moved(url: str, final: str | None) -> bool:
    """A repository that now lives elsewhere (GitHub redirects renamed and transferred repos)."""
    return bool(final) and final.rstrip("/").lower() != url.rstrip("/").lower()


def _host(url: str) -> str:
    return (urllib.parse.urlsplit(url).hostname or "").lower()


def check_all(urls: list[str], http: Http, timeout: float, jobs: int, per_host: int) -> dict[str, Outcome]:
    limits: dict[str, threading.BoundedSemaphore] = defaultdict(lambda: threading.BoundedSemaphore(per_host))
    lock = threading.Lock()

    def one(url: str) -> tuple[str, Outcome]:
        with lock:
            gate = limits[_host(url)]
        with gate:
            return url, check_url(url, http, timeout)

    # Round-robin over hosts, so workers waiting on one busy host (arxiv.org) do not idle the pool.
    by_host: dict[str, list[str]] = defaultdict(list)
    for url in urls:
        by_host[_host(url)].append(url)
    order = [u for batch in itertools.zip_longest(*by_host.values()) for u in batch if u is not None]
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return dict(pool.map(one, order))


def offline(urls: list[str], http: Http, timeout: float) -> str | None:
    """The reason there is no network, when the busiest hosts all fail to answer; else None."""
    hosts = [h for h, _ in Counter(_host(u) for u in urls).most_common(PROBE_HOSTS)]
    reasons = []
    for host in hosts:
        try:
            http("HEAD", f"https://{host}/", timeout)
            return None
        except NetworkError as exc:
            reasons.append(f"{host}: {exc}")
    return "; ".join(reasons) if reasons else None


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", type=Path, metavar="PATH", help="record files or folders (default: the whole catalog)")
    parser.add_argument("--field", dest="fields", action="append", choices=FIELDS, help="check only this field (repeatable; default: all)")
    parser.add_argument("--jobs", type=number(int, 1, 1024), default=8, help="requests at once (default 8)")
    parser.add_argument("--per-host", type=number(int, 1, 1024), default=2, help="requests at once to one host (default 2)")
    parser.add_argument("--timeout", type=number(float, 0, 3600, above=True), default=15.0, help="seconds per request (default 15)")
    parser.add_argument("--strict", action="store_true", help="also fail on unverified links (401/403/429/5xx)")
    parser.add_argument("--format", choices=("text", "github"), default="text", help="github: Actions annotations")


def _record_files(paths: list[Path], root: Path) -> list[Path]:
    if not paths:
        return sorted((root / "papers").glob("*.yaml"))
    out: list[Path] = []
    for path in paths:
        path = path if path.is_absolute() or path.exists() else root / path
        out.extend(sorted(path.glob("*.yaml")) if path.is_dir() else [path])
    return out


def execute(args: argparse.Namespace, http: Http | None = None) -> int:
    http = http or http_status
    root = repo_root()
    files = _record_files(args.paths, root)
    absent = [str(f) for f in files if not f.is_file()]
    if absent:
        print(f"specatlas check-links: no such record: {one_line(', '.join(absent))}", file=sys.stderr)
        return 2
    links = collect_links(files, root, tuple(args.fields or FIELDS))
    urls = sorted({link.url for link in links})
    if not urls:
        print(f"specatlas check-links: no links in {len(files)} record(s)", file=sys.stderr)
        return 0
    reason = offline(urls, http, args.timeout)
    if reason:
        print(f"specatlas check-links: no network, nothing checked ({reason}); run it where the web is reachable", file=sys.stderr)
        return 3
    outcomes = check_all(urls, http, args.timeout, args.jobs, args.per_host)
    failing = {"broken", "unreachable"} | ({"unverified"} if args.strict else set())
    counts: Counter[str] = Counter(outcomes[u].kind for u in urls)
    moved = 0
    for link in links:
        outcome = outcomes[link.url]
        if outcome.kind == "ok":
            if not (link.field.startswith("code") and _moved(link.url, outcome.final_url)):
                continue
            moved += 1  # a renamed or transferred repository: still answers, but the record should say where
            message = f"moved to {outcome.final_url} (was {link.url})"
        else:
            message = f"{outcome.describe()} {link.url}"
        if args.format == "github":
            level = "error" if outcome.kind in failing else "warning"
            print(github_annotation(Problem(link.file, link.line, link.field, message), level))
        else:
            print(Problem(link.file, link.line, link.field, message))
    summary = ", ".join(f"{counts[k]} {k}" for k in ("ok", "broken", "unreachable", "unverified") if counts[k])
    summary += f" ({moved} code link(s) moved)" if moved else ""
    print(f"checked {len(urls)} distinct link(s) ({len(links)} fields) in {len(files)} record(s): {summary}", file=sys.stderr)
    return 1 if any(counts[k] for k in failing) else 0
