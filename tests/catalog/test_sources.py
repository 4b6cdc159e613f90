"""Source fields hold public addresses; result and engine notes cite pages, never narrate look-ups;
and no shipped file narrates how the work was done."""

import re
import subprocess

import pytest

from specatlas.catalog.sources import internal_words, narration, no_narration, public, public_addresses
from specatlas.site.internal import check_page
from specatlas.paths import repo_root

# Shipped text: what readers and users get (records, taxonomy, docs, results, tools, implementations).
SHIPPED = ("papers", "taxonomy", "docs", "README.md", "CONTRIBUTING.md", "results", "tools", "reference_impls")
# The validators' word lists name these words on purpose.
WORD_LISTS = {"tools/catalog/internal_words.yaml"}
# How the work was done, as it reads in a file: look-up tools, search corpora and stored copies, working
# notes, work sessions, issue numbers, work branches, helpers. Wider than internal_words.yaml, which also
# runs on record prose and pages, in one way: branches; narrower in another: "row 0" and
# "not reachable" are ordinary words in code. "corpora" alone is subject matter (a retrieval drafter's
# text corpora), so only the look-up corpora count.
NARRATION = re.compile(
    r"find_string|read_file|find_files|find_repos|search tool|search \((pages|docs|code|issues)\)"
    r"|`?\b(code|pages|docs|issues)`? corpus\b|\b(stored|code|pages|docs|issues) corpora\b"
    r"|stored (page|copy|cop|source|arxiv)|reading note"
    r"|\b(first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|this|last|next|work) session\b"
    r"|\bissues? #?[0-9]{1,3}\b|\bwt-catalog|\bhelpers?\b", re.IGNORECASE)


@pytest.mark.parametrize("text, said", [
    ("find_string '2610.02251' (2026-12-05, fourth session): arXiv RSS copy", "'find_string': names a look-up tool"),
    ("October 2026 digest (read_file 70913805574, row 251)", "'read_file': names a look-up tool"),
    ("search (pages): 'speculative decoding edge device' -> https://arxiv.org/abs/2510.15312", "'search (pages)': names a look-up tool"),
    ("quoted by two notes (code corpus)", "'code corpus': names a search corpus"),
    ("checked in the fifth session", "'fifth session': narrates when the work was done"),
    ("cn-chat-arxiv page, id 70899475109", "'id 70899475109': names an internal file id"),
    ("a digest, row 364", "'row 364': names a row of a working copy"),
    ("as a reading note quotes it", "'reading note': cites working notes instead of a public address"),
])
def test_narration_names_the_internal_word(text, said):
    assert narration(text) == said


@pytest.mark.parametrize("text", [
    "retrieval from session, workspace and global corpora",  # the method's own vocabulary
    "it retrieves tokens from a text corpus",
    "Table 2 of https://arxiv.org/abs/2401.10774, Mean column",
    "vLLM v0.11.0 on one H100, batch size 1",
])
def test_subject_matter_is_not_narration(text):
    assert narration(text) is None and no_narration(text) == text


def test_every_listed_pattern_is_reachable():
    # Each entry is the first to match its own example: the list has no dead entries.
    examples = ["find_repos", "search (docs)", "pages corpus", "stored HTML", "reading notes", "third session",
                "issue 27", "candidates.yaml", "helpers", "arXiv daily digest", "id 123456", "row 12",
                "read 2026-12-05", "not reachable"]
    rules = internal_words()
    assert [next(i for i, r in enumerate(rules) if r.pattern.search(e)) for e in examples] == list(range(len(rules)))


@pytest.mark.parametrize("text", ["names from issue 27", "a file of the helpers", "a digest, row 364", "read 2026-12-05"])
def test_one_list_serves_the_validator_and_the_pages(text):
    """What the validator refuses in a record, a page may not show, and the other way round."""
    with pytest.raises(ValueError, match="describes how the fact was looked up"):
        no_narration(text)
    assert "internal wording" in check_page(f"<p>{text}</p>")


def test_a_records_only_entry_is_skipped_on_pages_but_keeps_record_text_off_them():
    text = "its text was not reachable"
    with pytest.raises(ValueError, match="not reachable"):
        no_narration(text)
    assert public(text) is None and check_page(f"<p>{text}</p>") is None


@pytest.mark.parametrize("entry", ["{pattern: '(', why: x}", "{why: x}", "{pattern: x, why: x, pages: 'no'}"])
def test_a_malformed_word_list_is_one_line(tmp_path, entry):
    bad = tmp_path / "words.yaml"
    bad.write_text(f"internal:\n  - {entry}\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"words\.yaml: internal must list \{pattern, why\} entries \("):
        internal_words(bad)


@pytest.mark.parametrize("value", [
    "https://arxiv.org/abs/2401.10774",
    "https://arxiv.org/abs/2401.10774; https://github.com/FasterDecoding/Medusa",
    "paper list: https://github.com/hemingkx/SpeculativeDecodingPapers; ACL Anthology: https://aclanthology.org/2025.acl-long.1/",
    "https://openreview.net/forum?id=wgGJE6Z1B3",
])
def test_public_addresses_accepted(value):
    assert public_addresses(value) == value


@pytest.mark.parametrize("value, says", [
    ("seen in a list of 2024 speculative decoding papers", "is not a public address"),
    ("found on a digest: http://example.org/x", "is not a public address"),  # not https
    ("https://arxiv.org/abs/2401.10774 (v1 01 May 2026; byline from the HTML)", "is not a public address"),
    ("a long description of where the paper was seen first: https://arxiv.org/abs/2401.10774", "is not a public address"),
    ("find_string '2401.10774': https://arxiv.org/abs/2401.10774", "describes how the fact was looked up ('find_string': names a look-up tool)"),
])
def test_narrated_or_bare_found_via_rejected(value, says):
    with pytest.raises(ValueError, match=says.replace("(", r"\(").replace(")", r"\)")):
        public_addresses(value)


def _shipped_files():
    root = repo_root()
    listed = subprocess.run(["git", "ls-files", "-z", "--", *SHIPPED], cwd=root, capture_output=True, check=True)
    return root, [name for name in listed.stdout.decode().split("\0") if name and name not in WORD_LISTS]


def narrated_lines(root, names):
    """(file, line number, the words) for each line of the named text files that narrates the work."""
    found = []
    for name in names:
        try:
            text = (root / name).read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError):
            continue  # binary files (weights, images) hold no prose
        for number, line in enumerate(text.splitlines(), 1):
            if match := NARRATION.search(line):
                found.append(f"{name}:{number}: {match.group()!r}")
    return found


def test_shipped_text_does_not_narrate_the_work():
    root, names = _shipped_files()
    assert len(names) > 100  # the scan reached the repository's files
    found = narrated_lines(root, names)
    assert not found, ("shipped text describes how the work was done; say it for a reader and cite the public "
                       "address instead:\n" + "\n".join(found))


@pytest.mark.parametrize("line", [
    "seen: 'find_string ''2608.24004'' (2026-12-05)'",
    "Sources are stored public material reached with `search` (pages, docs corpora)",
    "The `pages` corpus returns only the start of a page",
    "## Sweep of 2026-12-05 (fourth session, branch `wt-catalog`)",
    "after the plain-step fixes of issue 26",
    "a reading note (read_file id 59456549978)",
    "the helper branch h-add1",
])
def test_narration_in_a_file_is_found(tmp_path, line):
    (tmp_path / "notes.md").write_text("A public page: https://arxiv.org/abs/2401.10774\n" + line + "\n", encoding="utf-8")
    assert [f[:10] for f in narrated_lines(tmp_path, ["notes.md"])] == ["notes.md:2"]


@pytest.mark.parametrize("line", [
    "REST retrieves from a datastore built from a corpus of text or code",
    "drafter: retrieval from session, workspace and global corpora",
    "units measured in the session; logits row 0 after the last committed token",
])
def test_subject_matter_in_a_file_is_not_narration(tmp_path, line):
    (tmp_path / "notes.md").write_text(line + "\n", encoding="utf-8")
    assert narrated_lines(tmp_path, ["notes.md"]) == []
