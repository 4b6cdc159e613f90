"""The record id rule: first author's surname + year + first content word of the title,
lower-case ASCII (leviathan2023fast). Ids are stored, never recomputed: this only proposes one."""

from __future__ import annotations

import re
import unicodedata

STOPWORDS = frozenset(
    "a an the on of for to in into with and or via by from at as is are be do does how what when "
    "why can your you all we our it its not no towards toward beyond through".split()
)


def ascii_words(text: str) -> list[str]:
    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode().lower()
    return re.findall(r"[a-z0-9]+", folded)


def surname(author: str) -> str:
    words = [w for w in ascii_words(author) if w.isalpha()]
    return words[-1] if words else "anon"


def propose_id(first_author: str, year: int, title: str, taken: set[str] | frozenset[str] = frozenset()) -> str:
    """Propose an id; on a clash with `taken`, add further title words, then a letter suffix."""
    content = [w for w in ascii_words(title) if w not in STOPWORDS] or ["paper"]
    base = f"{surname(first_author)}{year}"
    candidate = base + content[0]
    for extra in content[1:3]:
        if candidate not in taken:
            return candidate
        candidate += extra
    suffix = ord("b")
    unique = candidate
    while unique in taken:
        unique, suffix = f"{candidate}{chr(suffix)}", suffix + 1
    return unique
