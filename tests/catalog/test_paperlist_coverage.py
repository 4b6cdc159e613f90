"""Every row of a public paper list maps to a record or to a reasoned exclusion, and a record
listed under a topical section carries that section's facet. Checked here on a small synthetic
list (tests/fixtures/paperlist) against the base fixture records; `specatlas list-coverage --list
PATH` checks the real list."""

import dataclasses
import json

import pytest

from specatlas.catalog import paperlist
from specatlas.catalog.validate import validate
from specatlas.cli import main
from specatlas.paths import repo_root

FIXTURE = repo_root() / "tests" / "fixtures" / "paperlist"
ALPHA, BETA = "alpha2023drafting", "beta2024verifying"


@pytest.fixture
def catalog(make_catalog):
    _, records, taxonomy = validate(root=make_catalog())
    return {r.paper.id: r.paper for r in records if r.paper}, taxonomy


@pytest.fixture
def rows():
    return paperlist.load_rows(FIXTURE / "list.json")


@pytest.fixture
def exclusions():
    return paperlist.load_exclusions(FIXTURE / "exclusions.yaml")


def problems(catalog, rows, exclusions, **changes):
    papers, taxonomy = catalog
    return paperlist.coverage_problems(rows, papers, taxonomy, dataclasses.replace(exclusions, **changes))


def test_rows_map_by_title_then_arxiv_id_then_by_hand(catalog, rows, exclusions):
    papers, _ = catalog
    assert paperlist.map_rows(rows, papers.values(), exclusions.matched) == {10: ALPHA, 11: BETA, 12: BETA, 13: None, 14: ALPHA}
    assert problems(catalog, rows, exclusions) == []


def test_a_row_without_record_or_exclusion_and_a_stale_exclusion_are_reported(catalog, rows, exclusions):
    assert problems(catalog, rows, exclusions, excluded={}) == [
        "line 13: no record and no exclusion: SpecTacular: Speculative Spectacles for Smart Glasses"]
    stale = {**exclusions.excluded, 10: "Once had no record; now one matches its title."}
    assert problems(catalog, rows, exclusions, excluded=stale) == [f"line 10: excluded, but record {ALPHA} matches it now"]
    assert problems(catalog, rows, exclusions, excluded={13: "no"}) == ["line 13: the exclusion's reason is too short to say why"]


def test_hand_matches_must_be_needed_and_name_records(catalog, rows, exclusions):
    needless = {**exclusions.matched, 11: BETA}
    assert problems(catalog, rows, exclusions, matched=needless) == [
        "line 11: matched by hand, but its title or arXiv id already matches"]
    assert "matched_rows names gone2020paper, which is not a record" in problems(
        catalog, rows, exclusions, matched={12: "gone2020paper"})
    assert problems(catalog, rows, exclusions, disagreements={**exclusions.disagreements, "gone2020paper": "x" * 20}) == [
        "section_disagreements names gone2020paper, which is not a record"]


def test_a_record_listed_under_a_section_carries_its_facet(catalog, rows, exclusions):
    assert problems(catalog, rows, exclusions, disagreements={}) == [
        f"{ALPHA}: listed under 'Multimodal Speculative Decoding' but has no scope tag in ('multimodal',)"]
    aligned = [{**row, "section": "Alignment"} if row["source_line"] == 11 else row for row in rows]
    assert problems(catalog, aligned, exclusions) == [f"{BETA}: listed under 'Alignment' but has no alignment tag"]


def test_the_committed_exclusions_name_records_and_give_reasons():
    _, records, _ = validate()
    ids = {r.paper.id for r in records if r.paper}
    exclusions = paperlist.load_exclusions()
    assert set(exclusions.matched.values()) <= ids and set(exclusions.disagreements) <= ids
    assert all(len(reason) >= paperlist.MIN_REASON for reason in exclusions.excluded.values())


def test_the_command_takes_the_list_path_and_refuses_a_bad_file_in_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["list-coverage"])  # --list is required: nothing is looked up beside the checkout
    capsys.readouterr()
    (tmp_path / "list.json").write_text('{"rows": []}')
    assert main(["list-coverage", "--list", str(tmp_path / "list.json")]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("specatlas list-coverage: ") and "'papers' is an array" in error and "\n" not in error


@pytest.mark.parametrize("row, message", [
    ({"section": "S", "title": "T", "source_line": 4, "arxiv_id": {"id": "2401.00001"}},
     "papers[1] (source_line 4): 'arxiv_id' must be text or null, not an object"),
    ({"section": ["Survey"], "title": "T", "source_line": 4}, "papers[1] (source_line 4): 'section' must be text, not an array"),
    ({"title": "T", "source_line": 4}, "papers[1] (source_line 4): 'section' is missing"),
    ({"section": "S", "title": "T", "source_line": True}, "papers[1]: 'source_line' must be a whole number, not a boolean"),
    ([1], "papers[1]: is an array, not an object with title, section, source_line, arxiv_id"),
])
def test_a_malformed_row_is_named_with_its_field(tmp_path, row, message):
    path = tmp_path / "list.json"
    path.write_text(json.dumps({"papers": [{"section": "S", "title": "T", "source_line": 1}, row]}))
    with pytest.raises(paperlist.PaperListError) as error:
        paperlist.load_rows(path)
    assert str(error.value) == f"{path}: {message}"


def test_list_text_stays_on_its_line(catalog, exclusions):
    rows = [{"section": "S", "title": "Nobody\n::error file=x::pwned", "source_line": 7, "arxiv_id": None}]
    assert problems(catalog, rows, exclusions)[0] == "line 7: no record and no exclusion: Nobody ::error file=x::pwned"
