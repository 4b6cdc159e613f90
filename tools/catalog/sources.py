"""Where a record's facts come from: public addresses, never a story of how they were looked up.

`found_via` names the public pages that confirm a record (arXiv, proceedings, repository, project
page); result and engine notes say where in those pages a number stands. Neither may narrate the
look-up itself: the tools used, internal file ids, row numbers or dates of work mean nothing to a
reader and cannot be checked. internal_words.yaml beside this file is the one list of such wording:
the validator refuses it here, and the site leaves it off its pages (`public`, and
`specatlas.site.internal`, which checks every built page).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

WORDS_FILE = Path(__file__).resolve().parent / "internal_words.yaml"


@dataclass(frozen=True)
class Rule:
    pattern: re.Pattern
    why: str
    on_pages: bool = True  # False: records only, the site's check of built pages skips it


@lru_cache(maxsize=None)
def internal_words(path: Path = WORDS_FILE) -> tuple[Rule, ...]:
    """The list's {pattern, why[, pages]} entries (case-insensitive patterns); a malformed file is one line naming it."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        return tuple(_rule(item) for item in data["internal"])
    except (OSError, yaml.YAMLError, KeyError, TypeError, AttributeError, re.error) as exc:
        raise ValueError(f"{path}: internal must list {{pattern, why}} entries ({type(exc).__name__}: {exc})") from None


def _rule(item: dict) -> Rule:
    pages = item.get("pages", True)
    if not isinstance(pages, bool):
        raise TypeError(f"pages must be true or false, not {pages!r}")
    return Rule(re.compile(item["pattern"], re.IGNORECASE), str(item["why"]), pages)


def narration(text: str | None, page: bool = False) -> str | None:
    """The internal wording `text` uses and why it is refused, in one line; None when there is none.
    `page`: `text` is a built page's, checked against the entries that apply to pages."""
    return next((f"{m.group(0)!r}: {r.why}" for r in internal_words()
                 if (r.on_pages or not page) and (m := r.pattern.search(text or ""))), None)


def public(text: str | None) -> str | None:
    """A record's free text as a page may show it: None when it holds internal wording."""
    return None if text is None or narration(text) else text


_URL = r"https://[^\s<>\"'{}\\;]+"
# One cited address: a URL, optionally after a short label ("ACL Anthology: https://...").
_ENTRY = re.compile(rf"^(?:(?P<label>[^:;]{{2,60}}): )?(?P<url>{_URL})$")
SOURCE_FORM = ("public addresses, each an https:// URL optionally after a short label ('paper list: https://...'), "
               "several separated by '; '")


def no_narration(value: str | None) -> str | None:
    """Pydantic check for prose that cites sources (result notes and sources, engine notes)."""
    word = narration(value)
    if word:
        raise ValueError(f"describes how the fact was looked up ({word}); cite the public page and where in it "
                         "('Table 2 of https://arxiv.org/abs/...') instead")
    return value


def public_addresses(value: str | None) -> str | None:
    """Pydantic check for `found_via`: only public addresses, each with at most a short label."""
    if value is None:
        return value
    no_narration(value)
    for entry in (e.strip() for e in value.split(";")):
        match = _ENTRY.match(entry)
        if not match or len((match.group("label") or "").split()) > 8:
            raise ValueError(f"'{entry[:80]}' is not a public address; write {SOURCE_FORM}")
    return value
