"""Every row of the public paper list maps to a record or to a reasoned exclusion, and a record
listed under a topical section carries that section's facet."""

import pytest

from specatlas.catalog import paperlist
from specatlas.catalog.validate import validate

LIST = paperlist.list_path()
pytestmark = pytest.mark.skipif(LIST is None, reason="../shared/data/speculative_decoding_papers_list.json is not present")


@pytest.fixture(scope="module")
def catalog():
    _, records, taxonomy = validate()
    return {r.paper.id: r.paper for r in records if r.paper}, taxonomy


def test_every_row_maps_to_a_record_or_an_exclusion(catalog):
    papers, _ = catalog
    rows = paperlist.load_rows(LIST)
    mapping = paperlist.map_rows(rows, papers.values())
    exclusions = paperlist.load_exclusions()
    missing = [f"line {r['source_line']}: {r['title']}" for r in rows if mapping[r["source_line"]] is None and r["source_line"] not in exclusions]
    assert not missing, f"{len(missing)} rows have no record:\n" + "\n".join(missing)
    stale = [line for line in exclusions if mapping.get(line)]
    assert not stale, f"excluded rows that now have a record: {stale}"
    assert all(len(reason) > 15 for reason in exclusions.values())
    assert set(paperlist.matched_rows().values()) <= set(papers), "matched_rows names unknown records"


def test_hand_matches_are_needed(catalog):
    """A hand match is only for rows that title and arXiv id cannot match."""
    papers, _ = catalog
    rows = [r for r in paperlist.load_rows(LIST) if r["source_line"] in paperlist.matched_rows()]
    from specatlas.catalog.records import normalize_title

    titles = {normalize_title(p.title) for p in papers.values()}
    arxivs = {p.arxiv for p in papers.values() if p.arxiv}
    redundant = [r["source_line"] for r in rows if normalize_title(r["title"]) in titles or r.get("arxiv_id") in arxivs]
    assert not redundant


def test_section_facets_are_tagged(catalog):
    papers, taxonomy = catalog
    rows = paperlist.load_rows(LIST)
    mapping = paperlist.map_rows(rows, papers.values())
    disagreements = paperlist.section_disagreements()
    wrong = []
    for row in rows:
        paper = papers.get(mapping[row["source_line"]] or "")
        if not paper or row["section"] not in paperlist.SECTION_FACETS or paper.id in disagreements:
            continue
        facet, nodes = paperlist.SECTION_FACETS[row["section"]]
        reached = {a for t in getattr(paper.taxonomy, facet) if t in taxonomy.facets[facet].nodes
                   for a in (t, *taxonomy.facets[facet].ancestors(t))}
        if not reached.intersection(nodes):
            wrong.append(f"{paper.id}: listed under '{row['section']}' but has no {facet} tag in {nodes}")
    assert not wrong, "\n".join(wrong)
    assert set(disagreements) <= set(papers), "section_disagreements names unknown records"


def test_alignment_section_records_have_alignment_tags(catalog):
    papers, _ = catalog
    rows = paperlist.load_rows(LIST)
    mapping = paperlist.map_rows(rows, papers.values())
    disagreements = paperlist.section_disagreements()
    untagged = [mapping[r["source_line"]] for r in rows if r["section"] == "Alignment" and mapping[r["source_line"]]
                and mapping[r["source_line"]] not in disagreements and not papers[mapping[r["source_line"]]].taxonomy.alignment]
    assert not untagged
