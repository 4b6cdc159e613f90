"""BibTeX: entry types by venue kind, overrides, escaping, and a full round trip."""

import bibtexparser
import pytest
from bibtexparser.middlewares import LatexDecodingMiddleware

from specatlas.catalog import bibtex
from specatlas.catalog.schema import Paper
from specatlas.catalog.validate import validate

TRICKY_TITLES = [
    "Medusa & EAGLE: 50% Faster with draft_len #3 for $5",
    "Caf\u00e9 \u00fcber \u00f8l: Accents in \u00c9cole and \u0141\u00f3d\u017a",
    "Speculative Decoding in $O(n^2)$ Time with \u03b1-Tuning",
    "Braces {like this} and a back\\slash and ~tilde",
    "LLaMA-2 meets GPT-4 -- A \"Study\" of ''Quotes'' -- \u2013 and \u2014 dashes",
]


def paper(**changes) -> Paper:
    data = {
        "id": "doe2024tricky", "title": "A Tricky Title", "authors": ["Jane Doe", "Jos\u00e9 \u00c1lvarez"],
        "year": 2024, "venue": "arXiv", "arxiv": "2401.00001", "taxonomy": {"scope": ["analysis"]},
        "lossless": None, "summary": "A record made up for the BibTeX tests, long enough to be valid.",
    }
    return Paper.model_validate({**data, **changes})


def parse(text: str) -> bibtexparser.Library:
    return bibtexparser.parse_string(text, append_middleware=[LatexDecodingMiddleware()])


def fields(entry: bibtexparser.model.Entry) -> dict[str, str]:
    return {f.key: f.value for f in entry.fields}


@pytest.mark.parametrize("title", TRICKY_TITLES)
def test_titles_decode_back_exactly(title):
    library = parse(bibtex.render([paper(title=title)]))
    assert not library.failed_blocks
    assert library.entries[0]["title"] == title


def test_only_acronyms_mixed_case_and_method_names_are_protected():
    assert bibtex.latex_title("Medusa and EAGLE on LLaMA") == "Medusa and {EAGLE} on {LLaMA}"
    assert bibtex.latex_title("Medusa: Simple LLM Inference with GPT-4 and T5", ["medusa"]) == \
        "{Medusa}: Simple {LLM} Inference with {GPT}-4 and {T5}"
    # One-word aliases are the method's names; a hyphenated alias is a phrase of ordinary words.
    entry = bibtex.entry(paper(title="Prompt Lookup with Lookahead", aliases=["prompt-lookup", "lookahead"]))
    assert fields(entry)["title"] == "Prompt Lookup with {Lookahead}"


@pytest.mark.parametrize(("venue", "entry_type", "field", "value"), [
    ("ICML", "inproceedings", "booktitle", "Proceedings of the International Conference on Machine Learning"),
    ("ICML-Workshop", "inproceedings", "booktitle", "ICML Workshop"),
    ("TMLR", "article", "journal", "Transactions on Machine Learning Research"),
    ("technical-report", "techreport", "url", "https://example.org/report"),
    ("blog", "misc", "howpublished", "Blog post"),
    ("software", "misc", "howpublished", "Software release"),
])
def test_entry_type_follows_venue_kind(venue, entry_type, field, value):
    entry = bibtex.entry(paper(venue=venue, arxiv=None, url="https://example.org/report"))
    assert entry.entry_type == entry_type
    assert fields(entry)[field] == value
    assert "eprint" not in fields(entry)


def test_preprint_is_misc_with_eprint_unescaped():
    values = fields(bibtex.entry(paper(doi="10.1000/a_b%c")))
    assert bibtex.entry(paper()).entry_type == "misc"
    assert values["eprint"] == "2401.00001" and values["archivePrefix"] == "arXiv" and values["primaryClass"] == "cs.CL"
    assert values["doi"] == "10.1000/a_b%c" and values["url"] == "https://arxiv.org/abs/2401.00001"
    assert values["author"] == "Jane Doe and Jos\u00e9 \u00c1lvarez"


def test_overrides_win_and_prose_is_escaped():
    record = paper(venue="ICML", bibtex={"entry_type": "article", "journal": "Data & Knowledge", "pages": "1--9"},
                   venue_note="Oral & spotlight")
    entry = bibtex.entry(record)
    assert entry.entry_type == "article"
    assert fields(entry)["journal"] == "Data \\& Knowledge" and fields(entry)["pages"] == "1--9"
    assert fields(entry)["note"] == "Oral \\& spotlight"


def test_real_catalog_round_trips(tmp_path):
    _, records, _ = validate()
    papers = [r.paper for r in records if r.paper]
    library = parse(bibtex.render(papers))
    assert not library.failed_blocks
    assert len(library.entries) == len(papers)
    titles = {e.key: e["title"] for e in library.entries}
    assert titles == {p.id: p.title for p in papers}


def test_cli_writes_the_file(tmp_path):
    from specatlas.cli import main

    out = tmp_path / "papers.bib"
    assert main(["bib", "-o", str(out)]) == 0
    assert out.read_text(encoding="utf-8").count("\n@") + 1 == len(validate()[1])


@pytest.mark.parametrize("title, kept", [
    (r"Faster by $\alpha_{t}$ and $O(n^2)$", [r"$\alpha_{t}$", "$O(n^2)$"]),
    (r"Math that runs $\input{/etc/passwd}$ or $\write18{rm -rf ~}$", []),
    (r"A $\def\x{y}$ and $\catcode`\^=7$", []),
])
def test_title_math_reaches_bibtex_only_from_the_whitelist(title, kept):
    """A title's $...$ with any macro outside the whitelist is escaped as text, so compiling a
    citing paper never runs it; whitelisted math stays math."""
    rendered = bibtex.latex_title(title)
    for math in kept:
        assert math in rendered
    for danger in (r"\input", r"\write18", r"\def", r"\catcode"):
        assert danger not in rendered.replace(r"\textbackslash{}", "")
    library = bibtexparser.parse_string("@article{k, title = {" + rendered + "}}",
                                        append_middleware=[LatexDecodingMiddleware()])
    if not kept:  # escaped math reads back as the title's own characters
        assert library.entries[0]["title"] == title


def test_characters_whose_macro_reads_back_otherwise_stay_utf8():
    title = "Middle dot \u00b7 and caf\u00e9"
    rendered = bibtex.latex_title(title)
    assert "\u00b7" in rendered and r"\'e" in rendered
    library = bibtexparser.parse_string("@article{k, title = {" + rendered + "}}",
                                        append_middleware=[LatexDecodingMiddleware()])
    assert library.entries[0]["title"] == title


def test_cli_writes_a_filtered_set_as_the_catalog_filters_it(tmp_path, capsys):
    """--node (with the nodes below it), --since/--until (the cited version's year) and --lossless
    keep the records the site's catalog filters keep; each entry is the one `specatlas bib` writes."""
    from specatlas.cli import main

    problems, records, taxonomy = validate()
    papers = [r.paper for r in records]
    expected = sorted(p.id for p in papers if p.year >= 2024 and p.lossless is True
                      and any(t == "extra-heads" or "extra-heads" in taxonomy.facets["drafting"].ancestors(t)
                              for t in p.taxonomy.drafting or [] if t in taxonomy.facets["drafting"].nodes))
    assert expected and sorted(p.id for p in bibtex.select(papers, taxonomy, "extra-heads", 2024, None, True)) == expected
    out = tmp_path / "heads.bib"
    assert main(["bib", "--node", "extra-heads", "--since", "2024", "--lossless", "-o", str(out)]) == 0
    library = bibtexparser.parse_string(out.read_text(encoding="utf-8"))
    assert sorted(e.key for e in library.entries) == expected
    whole = bibtex.render(papers)
    assert all(bibtex.render([p]).strip() in whole for p in papers if p.id in expected[:3])
    assert main(["bib", "--node", "no-such-node", "-o", "-"]) == 1
    assert main(["bib", "--since", "2999", "-o", str(tmp_path / "none.bib")]) == 1 and not (tmp_path / "none.bib").exists()
    assert "no paper matches" in capsys.readouterr().err
