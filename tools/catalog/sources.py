"""Where a record's facts come from: public addresses, never a story of how they were looked up.

`found_via` names the public pages that confirm a record (arXiv, proceedings, repository, project
page); result and engine notes say where in those pages a number stands. Neither may narrate the
look-up itself: the tools used, internal file ids, row numbers or dates of work mean nothing to a
reader and cannot be checked. `INTERNAL_VOCABULARY` is the one list of such words.
"""

from __future__ import annotations

import re

# Words that only describe how a fact was looked up. Each is specific enough not to match the
# catalog's own subject matter ("a text corpus", "per-request caches" stay allowed).
INTERNAL_VOCABULARY: dict[str, str] = {
    r"\bfind_string\b": "find_string",
    r"\bread_file\b": "read_file",
    r"\bfind_files\b": "find_files",
    r"\bfind_repos\b": "find_repos",
    r"\bsearch\s*\((?:docs|pages|code|issues)\)": "search (...)",
    r"\b(?:docs|pages|code|issues) corpus\b": "'<name> corpus'",
    r"\b(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|work|this|earlier|later|previous) session\b": "a work session",
    r"\b(?:file )?id [0-9]{5,}\b": "an internal file id",
    r"\brow [0-9]+\b": "a row number",
    r"\breading notes?\b": "a reading note",
    r"\bstored (?:copy|page|arXiv|source|HTML|version)\b": "a stored copy",
    r"\b(?:read|checked|confirmed|looked up) (?:on )?20[0-9]{2}-[0-9]{2}-[0-9]{2}\b": "a date of work",
    r"\bnot reachable\b": "what could not be reached",
}
_NARRATION = re.compile("|".join(f"(?:{p})" for p in INTERNAL_VOCABULARY), re.IGNORECASE)

_URL = r"https://[^\s<>\"'{}\\;]+"
# One cited address: a URL, optionally after a short label ("ACL Anthology: https://...").
_ENTRY = re.compile(rf"^(?:(?P<label>[^:;]{{2,60}}): )?(?P<url>{_URL})$")
SOURCE_FORM = ("public addresses, each an https:// URL optionally after a short label ('paper list: https://...'), "
               "several separated by '; '")


def narration(text: str | None) -> str | None:
    """The internal look-up word `text` uses, or None."""
    found = _NARRATION.search(text or "")
    if not found:
        return None
    return next(name for pattern, name in INTERNAL_VOCABULARY.items() if re.fullmatch(pattern, found.group(), re.IGNORECASE))


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
