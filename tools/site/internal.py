"""What a reader never sees: wording about how the catalog was compiled, and Markdown that failed to
render. The list is data (internal_words.yaml beside this file); `check_page` is run on every built
page by the site plugin, and `public` keeps such wording in a record's free text off the pages."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from html.parser import HTMLParser
from pathlib import Path

import yaml

WORDS_FILE = Path(__file__).resolve().parent / "internal_words.yaml"
# Elements whose text is not prose: code shows commands as typed; scripts, styles and drawings are not text.
_VERBATIM = {"code", "pre", "script", "style", "svg", "textarea"}
_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


@dataclass(frozen=True)
class Rule:
    pattern: re.Pattern
    why: str


@lru_cache(maxsize=None)
def rules(path: Path = WORDS_FILE) -> tuple[tuple[Rule, ...], tuple[Rule, ...]]:
    """(internal wording, unrendered Markdown) as the file lists them; a malformed file is one line."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        return tuple(tuple(Rule(re.compile(item["pattern"], re.IGNORECASE), str(item["why"])) for item in data[key])
                     for key in ("internal", "unrendered"))
    except (OSError, yaml.YAMLError, KeyError, TypeError, re.error) as exc:
        raise ValueError(f"{path}: each of internal and unrendered must list {{pattern, why}} entries "
                         f"({type(exc).__name__}: {exc})") from None


def internal(text: str) -> str | None:
    """Why `text` holds internal wording, or None."""
    return next((f"{m.group(0)!r}: {r.why}" for r in rules()[0] if (m := r.pattern.search(text))), None)


def public(text: str | None) -> str | None:
    """A record's free text as a page may show it: None when it holds internal wording."""
    return None if text is None or internal(text) else text


class _Text(HTMLParser):
    """A page's text, split into prose and verbatim (code, scripts, drawings)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.prose: list[str] = []
        self.verbatim: list[str] = []
        self._open: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag not in _VOID:
            self._open.append(tag)
        for name, value in attrs:  # what a reader sees of attributes: tooltips and alternative text
            if name in ("title", "alt", "aria-label") and value:
                self.prose.append(value)

    def handle_endtag(self, tag):
        if tag in self._open:
            while self._open.pop() != tag:
                pass

    def handle_data(self, data):
        (self.verbatim if _VERBATIM & set(self._open) else self.prose).append(data)


def check_page(html: str) -> str | None:
    """The first thing on a rendered page that no reader should see, described in one line; None when clean."""
    parser = _Text()
    parser.feed(html)
    parser.close()
    prose = "\n".join(parser.prose)
    found = internal(prose + "\n" + "\n".join(parser.verbatim))
    if found:
        return f"shows internal wording {found}"
    return next((f"shows unrendered Markdown {m.group(0)!r}: {r.why} near {_around(prose, m)!r}"
                 for r in rules()[1] if (m := r.pattern.search(prose))), None)


def _around(text: str, match: re.Match) -> str:
    return " ".join(text[max(0, match.start() - 40):match.end() + 40].split())
