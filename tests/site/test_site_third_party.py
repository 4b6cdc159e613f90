"""Paper pages show Spec-Bench's published measurements of the method, from the committed data."""

from __future__ import annotations

import pytest

from specatlas.paths import repo_root
from specatlas.site.catalog import load_catalog
from specatlas.site.pages import paper_page, spec_bench_by_paper


@pytest.fixture(scope="module")
def catalog():
    return load_catalog(repo_root())


def test_a_method_on_spec_benchs_leaderboard_shows_its_rows_by_hardware(catalog):
    rows = spec_bench_by_paper(catalog)
    eagle2 = rows["li2024eagle2"]
    assert {row.method for row in eagle2} == {"EAGLE2", "SAMD[EAGLE2]"}  # the combined method under each part
    assert "SAMD[EAGLE2]" in {row.method for row in rows["hu2025sam"]}
    assert [row.hardware for row in eagle2] == sorted(row.hardware for row in eagle2)
    page = paper_page(catalog, catalog.by_id["li2024eagle2"], "@misc{x}", [], True, eagle2)
    section = page[page.index("## Measured by Spec-Bench"):page.index("## Reported results")]
    assert "| SAMD\\[EAGLE2\\] | Vicuna\\-7B\\-v1\\.3 |" in section and "2.73×" in section and "4.58" in section


def test_a_method_spec_bench_did_not_measure_has_no_such_section(catalog):
    assert "leviathan2023fast" not in spec_bench_by_paper(catalog)
    page = paper_page(catalog, catalog.by_id["leviathan2023fast"], "@misc{x}", [], True, [])
    assert "Measured by Spec-Bench" not in page
