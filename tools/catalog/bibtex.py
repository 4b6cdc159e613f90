"""The catalog as BibTeX, one entry per record keyed by its id (`specatlas bib` writes it, the site
serves it as papers.bib).

The entry type follows the venue's kind (tools/catalog/venues.py); a record's `bibtex`
overrides win. Prose fields are LaTeX-escaped; in titles, braces keep the capitals that a style
must not lower-case, and only those: acronyms and words with inner capitals ({EAGLE}, {LLaMA},
{GPT}-4) and the method's own names from the record's aliases ({Medusa}). Ordinary title-case
words stay bare, so styles can set the title in sentence case. Names and short fields (author,
pages, volume, number) keep their text with TeX's special characters escaped; identifiers (url,
doi, eprint) are written as they are, except that braces and backslashes, which would end the
field, are percent-encoded. Whatever validates renders, and what renders parses back.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

import bibtexparser
from bibtexparser.model import Entry, Field
from pylatexenc.latex2text import LatexNodes2Text
from pylatexenc.latexencode import RULE_DICT, UnicodeToLatexConversionRule, UnicodeToLatexEncoder

from specatlas.catalog.schema import Paper
from specatlas.catalog.venues import VENUES

_SPECIALS = {
    "\\": r"\textbackslash{}", "{": r"\{", "}": r"\}", "&": r"\&", "%": r"\%", "$": r"\$",
    "#": r"\#", "_": r"\_", "~": r"\textasciitilde{}",
    "^": r"\string^",  # reads back as ^ (\textasciicircum reads back as U+02C6); never two ^ in a row

    '"': '"',  # pylatexenc's default ('') would come back as a curly quote
}
# Our rule for the ten specials first, then pylatexenc's defaults for accents, Greek, dashes...
_ENCODER = UnicodeToLatexEncoder(
    conversion_rules=[
        UnicodeToLatexConversionRule(RULE_DICT, {ord(c): v for c, v in _SPECIALS.items()}),
        "defaults",
    ],
    non_ascii_only=False,
    replacement_latex_protection="braces",
    unknown_char_policy="keep",
)
# $...$ in a title is mathematics, kept for LaTeX to typeset. Pandoc's rule: no space just
# inside the dollars and no digit right after, so "costs $5 and $10" stays text.
_MATH = re.compile(r"(\$(?=\S)[^$]*?(?<=\S)\$(?!\d))")
_WORD = re.compile(r"\w+")
PROSE_FIELDS = ("booktitle", "journal", "note", "publisher", "howpublished")
SHORT_FIELDS = ("volume", "number", "pages")
_TEX_SPECIALS = str.maketrans({c: v for c, v in _SPECIALS.items() if c != '"'})
_URL_UNSAFE = str.maketrans({"{": "%7B", "}": "%7D", "\\": "%5C"})


def tex_specials(text: str) -> str:
    """Only TeX's ten special characters escaped; accents and dashes (1--9) stay as written."""
    return text.translate(_TEX_SPECIALS)


def identifier(text: str) -> str:
    """A url or doi as written, with the characters that would end a BibTeX field percent-encoded."""
    return text.translate(_URL_UNSAFE)


_DECODER = LatexNodes2Text()  # what bibtexparser's LatexDecodingMiddleware reads with
_LIGATURE = re.compile(r"([-'`])(?=[-'`])")


# ASCII characters the encoder writes as they are: text made only of these skips it (most words
# of most titles), which keeps BibTeX for thousands of records fast.
_VERBATIM = frozenset(c for c in map(chr, range(32, 127)) if _ENCODER.unicode_to_latex(c) == c)


@lru_cache(maxsize=1 << 16)  # title words recur across a catalog
def latex(text: str) -> str:
    """Plain text as LaTeX that decodes back to the same text. Runs such as -- or '' are split
    with {} so that TeX does not turn them into dashes or curly quotes."""
    encoded = text if _VERBATIM.issuperset(text) else "".join(map(_latex_char, text))
    return _LIGATURE.sub(r"\1{}", encoded)


@lru_cache(maxsize=None)
def _latex_char(char: str) -> str:
    """`char`'s LaTeX macro when it decodes back to `char`, else the character itself (UTF-8, which
    biber and LaTeX since 2018 read): pylatexenc writes U+00B7 as \\textperiodcentered but reads
    that macro as U+02D9, so a macro is kept only where the round trip holds."""
    encoded = _ENCODER.unicode_to_latex(char)
    return encoded if encoded == char or _DECODER.latex_to_text(encoded) == char else char


# Math a title may carry into BibTeX: symbols, sub/superscripts and these macros only. Anything else
# (\input, \write18, \def, \catcode...) would run in whoever compiles a citing paper: such
# "math" is escaped as text instead.
_MATH_MACROS = frozenset("""alpha beta gamma delta epsilon varepsilon zeta eta theta kappa lambda mu nu xi pi rho sigma
    tau phi varphi chi psi omega Gamma Delta Theta Lambda Xi Pi Sigma Phi Psi Omega times cdot leq geq le ge neq
    approx sim infty ell log exp sqrt frac mathcal mathrm mathbf mathbb text textrm rightarrow to leftarrow pm
    ldots cdots""".split())
_MATH_SAFE = re.compile(r"[$\\\sA-Za-z0-9+\-*/=<>()\[\]{}^_.,:;!|'~]*")


def safe_math(math: str) -> bool:
    """Whether a $...$ span holds only whitelisted macros and harmless characters."""
    return (bool(_MATH_SAFE.fullmatch(math)) and "^^" not in math  # ^^5c is a backslash to TeX
            and set(re.findall(r"\\([A-Za-z]+|.)", math)) <= _MATH_MACROS)


def latex_title(title: str, proper_names: Iterable[str] = ()) -> str:
    """Escape a title and brace-protect the words a style must not lower-case: acronyms and
    mixed case ({EAGLE}, {LLaMA}, {T5}) and `proper_names` (any case: method names such as
    Medusa). A word that is merely capitalised (Title Case) is left to the style."""
    names = {n.lower() for n in proper_names}
    parts = []
    for i, chunk in enumerate(_MATH.split(title)):
        if i % 2 and safe_math(chunk):
            parts.append(chunk)
            continue
        pos = 0
        for word in _WORD.finditer(chunk):
            parts.append(latex(chunk[pos:word.start()]))
            parts.append(_protect(word.group(), names))
            pos = word.end()
        parts.append(latex(chunk[pos:]))
    return "".join(parts)


def _protect(word: str, proper_names: set[str]) -> str:
    if any(c.isupper() for c in word) and (
            any(c.isupper() or c.isdigit() for c in word[1:]) or word.lower() in proper_names):
        return "{" + latex(word) + "}"
    return latex(word)


def _proper_names(paper: Paper) -> set[str]:
    """The record's one-word aliases, the method's own names (medusa, lookahead); a hyphenated
    alias (prompt-lookup) names a phrase of ordinary words, which stay unprotected."""
    return {alias for alias in paper.aliases if "-" not in alias}


def entry(paper: Paper) -> Entry:
    venue = VENUES[paper.venue]
    overrides = paper.bibtex.model_dump(exclude_none=True) if paper.bibtex else {}
    entry_type = overrides.pop("entry_type", None)
    fields: dict[str, str] = {
        "title": latex_title(paper.title, _proper_names(paper)),
        "author": " and ".join(tex_specials(name) for name in paper.authors),
        "year": str(paper.year),
    }
    if paper.month:
        fields["month"] = str(paper.month)
    if venue.kind in ("conference", "workshop"):
        entry_type = entry_type or "inproceedings"
        fields["booktitle"] = venue.name
    elif venue.kind == "journal":
        entry_type = entry_type or "article"
        fields["journal"] = venue.name
    elif venue.kind == "report":
        entry_type = entry_type or "techreport"
    else:  # preprint, blog, software
        entry_type = entry_type or "misc"
        if not (venue.kind == "preprint" and paper.arxiv):
            fields["howpublished"] = venue.name
    if paper.arxiv and venue.kind == "preprint":
        fields.update(eprint=paper.arxiv, archivePrefix="arXiv", primaryClass="cs.CL")
    if paper.venue_note:
        fields["note"] = paper.venue_note
    fields.update(overrides)
    for name in PROSE_FIELDS:
        if name in fields:
            fields[name] = latex(fields[name])
    for name in SHORT_FIELDS:
        if name in fields:
            fields[name] = tex_specials(fields[name])
    if paper.doi:
        fields["doi"] = identifier(paper.doi)
    url = paper.url or (f"https://arxiv.org/abs/{paper.arxiv}" if paper.arxiv else None)
    if url:
        fields["url"] = identifier(url)
    return Entry(entry_type, paper.id, [Field(k, v) for k, v in fields.items()])


def render(papers: list[Paper]) -> str:
    library = bibtexparser.Library([entry(p) for p in sorted(papers, key=lambda p: p.id)])
    stack = bibtexparser.middlewares.default_unparse_stack(allow_inplace_modification=True)
    return bibtexparser.write_string(library, unparse_stack=stack)


def select(papers: list[Paper], taxonomy, node: str | None = None, since: int | None = None,
           until: int | None = None, lossless: bool | None = None) -> list[Paper]:
    """The records the filters keep, as the site's catalog filters them: tagged with `node` or a node
    below it, cited version's year in [since, until], losslessness as asked (None: any)."""
    def tagged(paper: Paper) -> bool:
        for facet in taxonomy.facets.values():
            for tag in getattr(paper.taxonomy, facet.id, None) or []:
                if tag == node or (tag in facet.nodes and node in facet.ancestors(tag)):
                    return True
        return False

    return [p for p in papers if (node is None or tagged(p)) and (since is None or p.year >= since)
            and (until is None or p.year <= until) and (lossless is None or p.lossless is lossless)]
