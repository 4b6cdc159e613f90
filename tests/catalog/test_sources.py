"""Source fields hold public addresses; result and engine notes cite pages, never narrate look-ups."""

import pytest

from specatlas.catalog.sources import INTERNAL_VOCABULARY, narration, no_narration, public_addresses


@pytest.mark.parametrize("text, word", [
    ("find_string '2610.02251' (2026-12-05, fourth session): arXiv RSS copy", "find_string"),
    ("October 2026 digest (read_file 70913805574, row 251)", "read_file"),
    ("search (pages): 'speculative decoding edge device' -> https://arxiv.org/abs/2510.15312", "search (...)"),
    ("quoted by two notes (code corpus)", "'<name> corpus'"),
    ("checked in the fifth session", "a work session"),
    ("cn-chat-arxiv page, id 70899475109", "an internal file id"),
    ("a digest, row 364", "a row number"),
    ("as a reading note quotes it", "a reading note"),
])
def test_narration_names_the_internal_word(text, word):
    assert narration(text) == word


@pytest.mark.parametrize("text", [
    "retrieval from session, workspace and global corpora",  # the method's own vocabulary
    "it retrieves tokens from a text corpus",
    "Table 2 of https://arxiv.org/abs/2401.10774, Mean column",
    "vLLM v0.11.0 on one H100, batch size 1",
])
def test_subject_matter_is_not_narration(text):
    assert narration(text) is None and no_narration(text) == text


def test_every_vocabulary_pattern_is_reachable():
    # Each pattern matches its own example: the list has no dead entries.
    examples = ["find_string", "read_file", "find_files", "find_repos", "search (docs)", "pages corpus",
                "third session", "id 123456", "row 12", "reading notes", "stored HTML", "read 2026-12-05",
                "not reachable"]
    assert [narration(e) for e in examples] == list(INTERNAL_VOCABULARY.values())


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
    ("find_string '2401.10774': https://arxiv.org/abs/2401.10774", "describes how the fact was looked up (find_string)"),
])
def test_narrated_or_bare_found_via_rejected(value, says):
    with pytest.raises(ValueError, match=says.replace("(", r"\(").replace(")", r"\)")):
        public_addresses(value)
