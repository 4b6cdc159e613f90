"""Paper pages of runnable methods show what was measured here, from results/*.json: speedup and
mean accepted tokens per policy and per subtask, linked to the raw run, beside the paper's own
reported numbers; a method never measured says so."""

import html
import json
import re
import shutil

import pytest

from sitecatalog import FIXTURE_PAPERS, make_root
from specatlas.bench.aggregate import load_all
from specatlas.bench.measured import measured_by_method
from specatlas.paths import repo_root
from specatlas.site.catalog import load_catalog
from specatlas.site.mkdocs_build import build

RUN = "2026-12-03-smollm2-135m-instruct-cpu-9abfbd69.json"
MEASURED = ("li2025eagle", "hu2025sam", "ankner2024hydra")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("measured")
    papers = tmp / "papers"
    shutil.copytree(FIXTURE_PAPERS, papers)
    for paper_id in (*MEASURED, "li2024eagle2"):  # EAGLE-3 builds on EAGLE-2
        shutil.copy(repo_root() / "papers" / f"{paper_id}.yaml", papers)
    root = make_root(tmp / "root", papers)
    shutil.copy(repo_root() / "results" / RUN, root / "results")
    out = tmp / "site"
    build(out, load_catalog(root))
    return root, out


def section(page_html, title):
    start = page_html.index(f">{title}<")
    return page_html[start:page_html.index("<h2", start)]


@pytest.mark.parametrize("paper_id", MEASURED)
def test_runnable_methods_show_the_numbers_measured_here(site, paper_id):
    root, out = site
    page = (out / "papers" / paper_id / "index.html").read_text(encoding="utf-8")
    measured = section(page, "Measured here")
    (table,) = measured_by_method(load_all(root / "results"))[paper_id]
    overall = dict(table.rows)["Overall"]
    # paper settings and cost-aware side by side: speedup and accepted tokens of each, from the run
    assert [line.policy for line in table.lines] == ["paper", "cost-aware"]
    row = re.search(r"<td>Overall</td>((?:\s*<td[^>]*>[^<]*</td>){4})", measured)
    assert row and re.findall(r">([^<]*)</td>", row.group(1)) == overall
    assert "Mathematical Reasoning" in measured and "Spec-Bench, 6 questions × 64 tokens × 1 repeat" in html.unescape(measured)
    assert f'href="../../runs/{RUN}"' in measured
    assert "Reported results" in page  # the paper's own numbers stay beside them, in their own section


def test_the_measured_numbers_are_the_runs(site):
    root, out = site
    summary = json.loads((root / "results" / RUN).read_text())["summary"]
    page = (out / "papers" / "hu2025sam" / "index.html").read_text(encoding="utf-8")
    assert f"{summary['hu2025sam']['overall']['speedup']:.2f}×" in section(page, "Measured here")
    assert f"{summary['hu2025sam@cost-aware']['overall']['mean_accepted']:.2f}" in section(page, "Measured here")
    assert (out / "runs" / RUN).read_bytes() == (root / "results" / RUN).read_bytes()


def test_a_method_without_a_run_says_so(site):
    _, out = site
    page = (out / "papers" / "xia2024unlocking" / "index.html").read_text(encoding="utf-8")
    assert "No reference implementation here, so nothing is measured" in section(page, "Measured here")
