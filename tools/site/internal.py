"""What a reader never sees: wording about how the catalog was compiled (the one list,
tools/catalog/internal_words.yaml, read by `specatlas.catalog.sources`), and Markdown that failed to
render. `check_page` is run on every built page by the site plugin."""

from __future__ import annotations

import re
from html.parser import HTMLParser

from specatlas.catalog.sources import Rule, narration

# Elements whose text is not prose: code shows commands as typed; scripts, styles and drawings are not text.
_VERBATIM = {"code", "pre", "script", "style", "svg", "textarea"}
_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
# Markdown that reached a page unrendered: checked in the prose, outside _VERBATIM.
UNRENDERED = (
    Rule(re.compile("`"), "a literal backtick (an unrendered code span)"),
    Rule(re.compile(r"\*\*"), "a literal ** (unrendered emphasis)"),
    Rule(re.compile(r"\\[\\`*_{}\[\]()#+\-.!|]"), "a literal backslash escape"),
)


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
    found = narration(prose + "\n" + "\n".join(parser.verbatim), page=True)
    if found:
        return f"shows internal wording {found} (the list: tools/catalog/internal_words.yaml)"
    return next((f"shows unrendered Markdown {m.group(0)!r}: {r.why} near {_around(prose, m)!r}"
                 for r in UNRENDERED if (m := r.pattern.search(prose))), None)


def _around(text: str, match: re.Match) -> str:
    return " ".join(text[max(0, match.start() - 40):match.end() + 40].split())
