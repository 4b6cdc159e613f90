"""Escaping record text for the places a page puts it (the site's pages, results/LEADERBOARD.md).
Records are data, never markup: every string from a record goes through one of these before it
reaches Markdown, HTML, JSON or a URL."""

from __future__ import annotations

import html
import json
import re
from functools import lru_cache

# Python-Markdown's backslash-escapable characters (with the tables extension's '|'). Others
# would keep their backslash, and '<', '>', '&' are HTML-escaped instead.
_MD_ESCAPABLE = re.compile(r"([\\`*_{}\[\]()#+\-.!|])")
_MD_ESCAPABLE_KEEP_EMPHASIS = re.compile(r"([\\`{}\[\]()#+\-.!|])")
_SAFE_URL = re.compile(r"^https?://[^\s<>\"'`\\]+$")


def md(text: object) -> str:
    """Plain text as inline Markdown that renders literally (one line, no markup, no HTML)."""
    return _md(str(text))  # cached on the string: 1 and 1.0 are equal keys but print differently


@lru_cache(maxsize=1 << 16)  # titles and names recur on many pages of a large catalog
def _md(text: str) -> str:
    flat = " ".join(text.split())
    return _inert_start(html.escape(_MD_ESCAPABLE.sub(r"\\\1", flat), quote=False))


def md_prose(text: str) -> str:
    """Like `md`, but keeps *emphasis* and _emphasis_, which records may use in summaries.
    Links, images, attribute lists, HTML and Material's boxes stay inert."""
    flat = " ".join(text.split())
    return _inert_start(html.escape(_MD_ESCAPABLE_KEEP_EMPHASIS.sub(r"\\\1", flat), quote=False))


def _inert_start(markdown: str) -> str:
    """Text that may start a line cannot open a collapsible block ('??? note'). '!!!' (an
    admonition) is backslash-escaped already; '?' has no Markdown escape, so it becomes a
    character reference."""
    return "&#63;" + markdown[1:] if markdown.startswith("?") else markdown


def code_span(text: object) -> str:
    """Text as one inline code span, shown as typed (Markdown escapes a code span's HTML itself)."""
    flat = " ".join(str(text).split())
    fence = "`" * (max((len(m) for m in re.findall(r"`+", flat)), default=0) + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") else ""
    return f"{fence}{pad}{flat}{pad}{fence}"


def md_code(text: str) -> str:
    """Like `md`, but the `backticked` parts of the text (commands, paths) become code spans; with
    an unpaired backtick, all of it is literal."""
    parts = text.split("`")
    if len(parts) % 2 == 0:
        return md(text)
    return "".join(code_span(part) if i % 2 else _spaced(part) for i, part in enumerate(parts))


def _spaced(text: str) -> str:
    """`md` keeping one space at either end, where the text meets a code span."""
    inner = md(text)
    return (" " if text[:1].isspace() else "") + inner + (" " if text[-1:].isspace() and inner else "")


def attr(text: object) -> str:
    """Text for an HTML attribute value or element body."""
    return html.escape(str(text), quote=True)


def tag_name(name: str) -> str:
    """A taxonomy node's name as a Material tag. The theme inserts tag names as raw HTML (its
    tags partial, and its search results through innerHTML), so the name is stored escaped, in
    the page's front matter and in the tags plugin's allow-list alike."""
    return attr(name)


def safe_url(url: str | None) -> str | None:
    """`url` if it is a plain http(s) URL, else None: a record's link never becomes a
    javascript: or data: link. Parentheses are percent-encoded so Markdown links stay intact."""
    if not url or not _SAFE_URL.match(url):
        return None
    return url.replace("(", "%28").replace(")", "%29")


def md_link(label: str, url: str | None) -> str:
    """A Markdown link to an external URL, or the bare label when the URL is not safe."""
    safe = safe_url(url)
    return f"[{md(label)}]({safe})" if safe else md(label)


def script_json(data: object) -> str:
    """JSON that is safe inside <script type="application/json">: no '<', '>' or '&' can close
    the element or start markup."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def code_fence(text: str, lang: str = "") -> str:
    """A fenced code block longer than any backtick run inside `text`, so it cannot be closed early."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{lang}\n{text.rstrip()}\n{fence}"


def yaml_str(text: str) -> str:
    """One line of text as a double-quoted YAML scalar."""
    return '"' + " ".join(text.split()).replace("\\", "\\\\").replace('"', '\\"') + '"'
