"""The built site in headless Chromium: every page type without console errors (light and dark),
search, the catalog's filters kept in the URL across Back, the results view's sorting, the
leaderboard at 1280 px and 390 px, its headings stating the sample size (each hardware's largest
run first, raw files linked, paper and tuned rows side by side), no id or word broken across
lines and code blocks scrolling at phone width, chart labels readable in dark mode and drawn
inside their chart, the lineage links, the Which-method page's CPU verdict (a method measured on
CPU here), a paper's lineage neighbourhood at phone width, the Reported results answering
"fastest on Spec-Bench for a 7B model", EAGLE-3's measured numbers, counts that follow the
filters, and search bringing a taxonomy node first for its phrase. Screenshots are kept in
test-artifacts/site/ (the phone neighbourhood in the test's tmp dir)."""

import functools
import http.server
import os
import re
import shutil
import threading

import pytest

from sitecatalog import make_root
from specatlas.paths import repo_root
from specatlas.site import pages
from specatlas.site.catalog import load_catalog
from specatlas.site.mkdocs_build import build

pytestmark = pytest.mark.browser

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# Headless Chromium as root in a container, with nothing that phones home.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
NODE = "extra-heads"


def _require(condition: bool, reason: str) -> None:
    if not condition:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason} (CI must run the browser test: .ci/run installs chromium)")
        pytest.skip(reason)


@pytest.fixture(scope="module")
def browser():
    _require(CHROMIUM is not None, "chromium is not installed (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _require(False, "playwright is not installed (pip install -e '.[test]')")
    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield instance
        instance.close()


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """(base URL, catalog): the real catalog when it has Medusa's record, else the fixture one."""
    catalog = load_catalog(repo_root())
    if "cai2024medusa" not in catalog.by_id:
        root = make_root(tmp_path_factory.mktemp("catalog"))
        shutil.copytree(repo_root() / "results", root / "results", dirs_exist_ok=True)  # beside results/published
        catalog = load_catalog(root)
    site = tmp_path_factory.mktemp("site")
    build(site, catalog)

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/", catalog
    server.shutdown()


ARTIFACTS = repo_root() / "test-artifacts" / "site"


@pytest.fixture
def open_page(browser, served):
    """open_page(color_scheme="light") -> a page at 1280x900 that records console errors, page
    errors and any request off the test server (the site works offline) in page.errors."""
    base, _ = served
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    opened = []

    def make(color_scheme: str = "light"):
        context = browser.new_context(viewport={"width": 1280, "height": 900}, color_scheme=color_scheme)
        page = context.new_page()
        page.set_default_timeout(15_000)
        page.errors = []
        page.on("console", lambda message: message.type == "error" and page.errors.append(message.text))
        page.on("pageerror", lambda error: page.errors.append(str(error)))
        page.route("**/*", lambda route: route.continue_() if route.request.url.startswith(base)
                   else (page.errors.append(f"external request {route.request.url}"), route.abort()))
        opened.append(context)
        return page

    yield make
    for context in opened:
        context.close()


def shot(page, name: str, full_page: bool = False) -> None:
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=full_page)


def test_every_page_type_loads_without_console_errors(open_page, served):
    base, catalog = served
    node = catalog.taxonomy.all_nodes()[0].id
    paths = {"home": "", "catalog": "catalog/", "paper": "papers/cai2024medusa/", "taxonomy": "taxonomy/",
             "node": f"taxonomy/{node}/", "timeline": "timeline/", "lineage": "lineage/", "leaderboard": "leaderboard/",
             "results": "results/", "choose": "choose/", "run": "run/", "coverage": "coverage/",
             "contributing": "contributing/", "bib": "papers/cai2024medusa.bib"}
    for scheme in ("light", "dark"):
        page = open_page(scheme)
        for name, path in paths.items():
            response = page.goto(base + path)
            assert response.ok, path
            if name != "bib":
                assert page.locator("h1").count() >= 1, path
                shot(page, f"{scheme}-{name}", full_page=name in ("paper", "leaderboard"))
        assert page.errors == [], scheme


def test_search_finds_a_paper(open_page, served):
    base, _ = served
    page = open_page()
    page.goto(base)
    assert page.locator("h1").first.inner_text().startswith("SpecAtlas")
    page.locator("label.md-search__icon, .md-search__input").first.click()
    # The index loads in a worker, slowly on a busy machine, and a query is read on key events: so
    # wait until Material says the search is ready, then type as a user does (fill sends no keys).
    page.wait_for_function("() => !/initializ/i.test(document.querySelector('.md-search-result__meta')"
                           "?.textContent ?? 'initializing')", timeout=120_000)
    page.locator(".md-search__input").press_sequentially("Medusa", delay=20)
    result = page.locator(".md-search-result__link[href*='papers/cai2024medusa']").first
    result.wait_for(timeout=60_000)
    shot(page, "search")
    result.click()
    page.wait_for_url("**/papers/cai2024medusa/**")
    assert "Medusa" in page.locator("h1").first.inner_text()
    # one set of taxonomy badges (linked), not Material's unlinked tag chips as well
    assert page.locator(".md-tags").count() == 0 or not page.locator(".md-tags").first.is_visible()
    assert page.locator("a.sa-badge").count() >= 1
    assert "Lossless: Lossless" not in page.locator("article").inner_text()
    assert page.errors == []


def test_catalog_filter_lives_in_the_url_and_survives_back(open_page, served):
    base, catalog = served
    page = open_page()
    page.goto(base + "catalog/")
    rows = page.locator("#sa-table tbody tr")
    assert rows.count() == len(catalog.papers)
    page.select_option("#sa-filter-node", NODE)
    expected = len(catalog.node_papers[NODE])
    assert 0 < expected < len(catalog.papers)
    assert rows.count() == expected
    assert page.locator("#sa-count").inner_text() == f"Showing {expected} of {len(catalog.papers)} records"
    assert "cai2024medusa" in rows.evaluate_all("rows => rows.map(r => r.dataset.id)")
    assert f"node={NODE}" in page.url
    # the text filter matches authors and aliases, not only titles
    page.fill("#sa-filter-text", "medusa")
    assert "cai2024medusa" in rows.evaluate_all("rows => rows.map(r => r.dataset.id)")
    page.fill("#sa-filter-text", "Tianle Cai")
    assert "cai2024medusa" in rows.evaluate_all("rows => rows.map(r => r.dataset.id)")
    page.locator("#sa-table thead button[data-key=speedup]").click()
    assert "sort=speedup" in page.url and "q=Tianle" in page.url
    filtered = rows.count()
    shot(page, "catalog")
    # one-click links: arXiv, PDF and code badges are plain links
    medusa = page.locator("#sa-table tbody tr[data-id=cai2024medusa]")
    assert medusa.locator("a.sa-link-badge", has_text="Code").get_attribute("href").startswith("https://github.com/")
    medusa.locator("td").first.locator("a").first.click()
    page.wait_for_url("**/papers/cai2024medusa/**")
    page.go_back()
    page.wait_for_url("**/catalog/?*")
    assert page.locator("#sa-filter-node").input_value() == NODE
    assert page.locator("#sa-filter-text").input_value() == "Tianle Cai"
    assert rows.count() == filtered
    assert page.locator("th[aria-sort=descending] button").inner_text() == "Speedup"
    # and a shared link opens the same view
    fresh = open_page()
    fresh.goto(page.url)
    assert fresh.locator("#sa-table tbody tr").count() == filtered
    assert page.errors == [] and fresh.errors == []


def test_results_view_sorts_by_speedup(open_page, served):
    base, _ = served
    page = open_page()
    page.goto(base + "results/")
    table = page.locator("table.sa-results").first

    def speedups():
        return [float(v) for v in table.locator("tbody tr:not([hidden]) td:nth-child(2)").evaluate_all(
            "cells => cells.map(c => c.dataset.sort)") if v]

    values = speedups()
    assert len(values) >= 2 and values == sorted(values, reverse=True)
    table.locator("th button", has_text="Speedup").click()
    values = speedups()
    assert values == sorted(values) and "dir=asc" in page.url
    shot(page, "results")
    # model sizes in their natural order, not alphabetical
    sizes = page.locator("#sa-results-size option").evaluate_all("options => options.map(o => o.value)")[1:]
    order = ["< 3B", "3–10B", "10–20B", "20–40B", "≥ 40B", "not stated"]
    assert sizes == sorted(sizes, key=order.index)
    assert page.errors == []


def test_leaderboard_overall_column_fits_at_1280_px_and_has_one_row_per_method(open_page, served):
    base, _ = served
    page = open_page()
    page.goto(base + "leaderboard/")
    ranked = page.locator("table:has(th:text-is('Overall speedup')):visible")  # the top rows; every row is folded
    assert ranked.count() >= 1
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280
    for k in range(ranked.count()):
        table = ranked.nth(k)
        overall = table.locator("th", has_text="Overall speedup").bounding_box()
        assert overall["x"] + overall["width"] <= 1280
        # no horizontal scroll: neither the table nor Material's scrolling wrapper around it
        assert table.evaluate("t => [t, t.closest('.md-typeset__scrollwrap') || t].every("
                              "e => e.scrollWidth <= e.clientWidth + 1)")
        keys = table.locator("tbody tr").evaluate_all(
            "rows => rows.map(r => r.cells[1].innerText + ' | ' + r.cells[2].innerText)")
        assert len(keys) == len(set(keys)), keys
    for table in page.locator("details table:has(th:text-is('Overall speedup'))").all():  # every row, folded
        keys = table.locator("tbody tr").evaluate_all(
            "rows => rows.map(r => r.cells[1].textContent + ' | ' + r.cells[2].textContent)")
        assert len(keys) == len(set(keys)), keys
    shot(page, "leaderboard")
    # on a phone the policy sits beside the method, visible before any sideways scroll
    phone = open_page()
    phone.set_viewport_size({"width": 390, "height": 844})
    phone.goto(base + "leaderboard/")
    first = phone.locator("table:has(th:text-is('Overall speedup'))").first
    phone.evaluate("y => window.scrollTo(0, y)", first.evaluate("t => t.getBoundingClientRect().top + window.scrollY - 80"))
    box = first.locator("th", has_text="Policy").bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= 390
    assert page.errors == [] and phone.errors == []


def test_leaderboard_headings_state_the_sample_and_link_the_raw_files(open_page, served):
    from specatlas.bench.aggregate import load_all, tables
    from specatlas.bench.measured import measured_rows

    base, catalog = served
    grouped = [table for table, _ in tables(load_all(catalog.root / "results")[0])]
    assert grouped
    page = open_page()
    page.goto(base + "leaderboard/")
    headings = page.locator("article h2").evaluate_all("hs => hs.map(h => h.textContent.replace('¶', '').trim())")
    # one heading per table, in the page's order, each stating what its numbers depend on
    assert headings[:len(grouped)] == [table.title for table in grouped]
    size = re.compile(r"\d+ questions? × \d+ tokens? × \d+ repeats?$")
    for table, heading in zip(grouped, headings):
        assert size.search(heading) and table.hardware in heading and table.model in heading and table.kernels in heading
        assert table.prompt_set in heading and table.prompt_set != table.prompt_id  # Spec-Bench by name, not "question"
    # each hardware's first table is its largest run, and says so
    first = {}
    for table in grouped:
        first.setdefault(table.hardware, table)
    assert all(first[t.hardware].size >= t.size for t in grouped)
    # it opens with its answer, then says it is the headline table
    assert page.locator("article h2").first.locator("xpath=following-sibling::p[1]").inner_text().startswith(
        "In short: the fastest here is")
    headline = page.locator("article h2").first.locator("xpath=following-sibling::p[starts-with(., 'The largest run')][1]")
    assert headline.inner_text().startswith("The largest run on this hardware: its headline table.")
    raw = headline.locator("a[href*='runs/']").first
    response = page.request.get(raw.evaluate("a => a.href"))
    assert response.ok and "provenance" in response.json()
    # a method's paper-settings and tuned (cost-aware) rows side by side, in the table that measured both
    policies = {}
    for row in measured_rows(catalog.root / "results", load_all(catalog.root / "results")):
        if row.table == grouped[0]:
            policies.setdefault(row.method_id, set()).add(row.policy)
    both = sorted(method for method, found in policies.items() if {"paper", "cost-aware"} <= found)
    assert both, policies  # the committed headline table measured methods under both policies
    pairs = page.locator("article h2").first.locator(
        "xpath=following-sibling::*[.//th[normalize-space()='Paper: speedup']][1]"
        "//table[.//th[normalize-space()='Paper: speedup']]/tbody/tr")
    side_by_side = pairs.evaluate_all("rows => rows.map(r => r.cells[0].querySelector('a').title)")  # the method's id
    assert set(both) <= set(side_by_side), (both, side_by_side)
    assert page.errors == []


def test_ids_and_code_never_break_inside_a_word_at_phone_width(open_page, served):
    """Material lets links and table cells break anywhere: an id such as kirchenbauer2026multi
    came out as "kirchenbauer2" over "026multi". Every word of four or more characters stays on
    one line (a line may break at spaces, hyphens, slashes); code blocks scroll sideways in their
    own box instead of wrapping, and the page itself never scrolls sideways."""
    base, _ = served
    phone = open_page()
    phone.set_viewport_size({"width": 390, "height": 844})
    for path in ("results/", "leaderboard/", "run/", "papers/li2025eagle/"):
        phone.goto(base + path)
        broken = phone.evaluate(BROKEN_WORDS)
        assert broken == [], (path, broken[:10])
        assert phone.evaluate("document.documentElement.scrollWidth") <= 390, path
        blocks = phone.locator("pre > code").evaluate_all(
            "cs => cs.map(c => [getComputedStyle(c).whiteSpace, c.scrollWidth > c.clientWidth])")
        assert all(space == "pre" for space, _ in blocks), (path, blocks)
        if path == "run/":
            assert any(scrolls for _, scrolls in blocks)  # a long command scrolls rather than wraps
    shot(phone, "phone-run")
    assert phone.errors == []


# [the text of a word broken across lines, its element] for every visible word of 4+ characters
# in the article; separators are where a line may break without breaking a word.
BROKEN_WORDS = r"""() => {
  const out = [];
  const walker = document.createTreeWalker(document.querySelector("article"), NodeFilter.SHOW_TEXT);
  for (let node; (node = walker.nextNode());) {
    if (node.parentElement.closest("svg, pre")) continue;
    for (const match of node.textContent.matchAll(/[^\s\-\/–—·,]{4,}/g)) {
      const range = document.createRange();
      range.setStart(node, match.index);
      range.setEnd(node, match.index + match[0].length);
      const lines = new Set([...range.getClientRects()].filter(r => r.width > 0).map(r => Math.round(r.top)));
      if (lines.size > 1) out.push([match[0], node.parentElement.tagName]);
    }
  }
  return out;
}"""


def test_charts_are_readable_in_dark_mode(open_page, served):
    base, _ = served
    page = open_page("dark")
    page.goto(base + "leaderboard/")
    assert page.evaluate("document.body.getAttribute('data-md-color-scheme')") == "slate"
    colours = page.locator("figure.specatlas-chart svg text").evaluate_all(
        "texts => texts.map(t => getComputedStyle(t).fill)")
    assert colours

    def luminance(css: str) -> float:
        r, g, b = (int(x) for x in css[css.index("(") + 1:].split(",")[:3])
        return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255

    assert all(luminance(c) > 0.6 for c in colours), set(colours)  # light text on the dark page
    # every label (the scatter's point names, the bars' method names) drawn whole inside its chart
    clipped = page.locator("figure.specatlas-chart svg").evaluate_all("""svgs => svgs.flatMap(svg => {
        const box = svg.getBoundingClientRect();
        if (!box.width) return [];  // folded away (every row's chart, under the top rows)
        return [...svg.querySelectorAll("text")].filter(t => { const r = t.getBoundingClientRect();
          return r.left < box.left - 0.5 || r.right > box.right + 0.5 || r.top < box.top - 0.5 || r.bottom > box.bottom + 0.5;
        }).map(t => t.textContent); })""")
    assert clipped == []
    page.locator("figure.specatlas-chart").first.scroll_into_view_if_needed()
    shot(page, "dark-leaderboard-chart")
    assert page.errors == []


def test_lineage_is_drawn_and_its_nodes_link_to_papers(open_page, served):
    base, _ = served
    page = open_page()
    page.goto(base + "lineage/")
    assert page.locator("svg.sa-lineage-svg").count() > 0
    node = page.locator("svg.sa-lineage-svg a.sa-node[href*='cai2024medusa']").first
    # each family is a collapsible section: open Medusa's, then its box links to its page
    family = page.locator("details.sa-family", has=node)
    if not family.evaluate("d => d.open"):
        family.locator("summary").click()
    node.hover()  # highlights its edges
    assert page.locator("svg.sa-lineage-svg path.sa-edge.sa-hot").count() >= 1
    shot(page, "lineage")
    node.click()
    page.wait_for_url("**/papers/cai2024medusa/**")
    phone = open_page()
    phone.set_viewport_size({"width": 390, "height": 844})
    phone.goto(base + "lineage/")
    assert phone.evaluate("document.documentElement.scrollWidth") <= 390  # diagrams scroll in their own box
    shot(phone, "lineage-phone")
    assert page.errors == [] and phone.errors == []


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_which_method_has_a_cpu_setting_whose_top_pick_was_measured_on_cpu(open_page, served, scheme):
    from specatlas.bench.aggregate import load_all
    from specatlas.bench.measured import measured_rows

    base, catalog = served
    page = open_page(scheme)
    page.goto(base + "choose/")
    verdict = page.locator("p.sa-verdict[data-setting='cpu']")
    assert verdict.count() == 1 and verdict.is_visible()
    assert verdict.get_attribute("data-measured-here") == "yes" and verdict.get_attribute("data-device") == "cpu"
    method = verdict.get_attribute("data-method")
    # the committed results measured it on CPU, and ranked it above plain decoding
    rows = measured_rows(catalog.root / "results", load_all(catalog.root / "results"))
    assert any(m.method_id == method and m.device == "cpu" and m.speedup > 1 for m in rows), method
    assert f"specatlas run {method}" in verdict.inner_text()
    assert page.locator("h2#cpu").is_visible()
    verdict.scroll_into_view_if_needed()
    shot(page, f"{scheme}-choose-cpu")
    verdict.locator(f"a[href*='papers/{method}']").first.click()
    page.wait_for_url(f"**/papers/{method}/**")
    assert page.errors == []


def test_a_papers_lineage_neighbourhood_reads_at_phone_width(open_page, served, tmp_path):
    base, _ = served
    for scheme in ("light", "dark"):
        phone = open_page(scheme)
        phone.set_viewport_size({"width": 390, "height": 844})
        phone.goto(base + "papers/cai2024medusa/")
        hood = phone.locator(".sa-hood svg")
        hood.scroll_into_view_if_needed()
        assert phone.evaluate("document.documentElement.scrollWidth") <= 390
        box = hood.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= 390
        # Medusa between what it builds on and what builds on it, names readable (not shrunk away)
        assert hood.locator("a.sa-self").count() == 1 and hood.locator("a.sa-node[href*='stern2018blockwise']").count() == 1
        size = hood.locator("a.sa-self text").first.evaluate("t => t.getBoundingClientRect().height")
        assert size >= 10
        path = tmp_path / f"{scheme}-lineage-neighbourhood-390.png"
        hood.screenshot(path=str(path))
        assert path.stat().st_size > 1000
        assert phone.errors == []


def test_reported_results_answer_the_fastest_on_spec_bench_for_a_7b_model(open_page, served):
    # the site is built in a fresh folder from the checkout alone: the Spec-Bench numbers are its own data
    base, _ = served
    page = open_page()
    page.goto(base + "results/")
    page.select_option("#sa-results-size", "3–10B")
    assert "size=" in page.url
    table = page.locator("table.sa-results[data-table='results-spec-bench']")
    rows = table.locator("tbody tr:not([hidden])").evaluate_all(
        "rows => rows.map(r => [...r.cells].map(c => c.innerText.trim()))")
    header = table.locator("thead th").evaluate_all("ths => ths.map(t => t.innerText.trim())")
    method, speedup, target = header.index("Method"), header.index("Speedup (×)"), header.index("Target model")
    seven = [row for row in rows if "7B" in row[target].upper().replace(" ", "")]
    assert seven, rows[:5]
    top = seven[0]  # the table is sorted fastest first
    assert top[method] and top[speedup].endswith("×") and float(top[speedup].rstrip("×")) > 1, top
    assert any(row[header.index("Measured by")] == "third party" for row in seven)  # Spec-Bench's own table
    # the jump-to count follows the filter
    total = table.locator("tbody tr").count()
    jump = page.locator(".sa-jump-count[data-table='results-spec-bench']").inner_text()
    assert jump == (f"{len(rows)} of {total}" if len(rows) < total else str(total))
    shot(page, "results-spec-bench-7b")
    assert page.errors == []


def test_catalog_taxonomy_counts_follow_the_other_filters(open_page, served):
    base, catalog = served
    page = open_page()
    page.goto(base + "catalog/?year=2024")  # an address from before year ranges: from 2024 to 2024
    expected = sum(1 for p in catalog.papers if p.year == 2024 and NODE in catalog.expanded_tags(p))
    assert expected < len(catalog.node_papers[NODE])
    text = page.locator(f"#sa-filter-node option[value='{NODE}']").inner_text()
    assert text.endswith(f"({expected})"), text
    page.select_option("#sa-filter-from", "")
    page.select_option("#sa-filter-to", "")
    text = page.locator(f"#sa-filter-node option[value='{NODE}']").inner_text()
    assert text.endswith(f"({len(catalog.node_papers[NODE])})"), text
    assert page.errors == []


def test_eagle3_page_shows_a_measured_number(open_page, served):
    base, catalog = served
    assert "li2025eagle" in catalog.by_id
    page = open_page()
    page.goto(base + "papers/li2025eagle/")
    # the cells of the "Measured here" and "Measured by Spec-Bench" sections (up to the next heading)
    cells = page.evaluate("""() => {
        const out = [];
        for (const id of ["measured-here", "measured-by-spec-bench"]) {
          let node = document.getElementById(id);
          while (node && (node = node.nextElementSibling) && node.tagName !== "H2") {
            for (const td of node.querySelectorAll("td")) out.push([id, td.innerText.trim()]);
          }
        }
        return out;
      }""")
    speedups = [(section, text) for section, text in cells if text.endswith("×") and text[:-1].replace(".", "", 1).isdigit()]
    assert speedups, cells[:20]
    page.locator("#measured-here").scroll_into_view_if_needed()
    shot(page, "paper-eagle3-measured")
    assert page.errors == []


def test_search_ranks_the_taxonomy_node_first_for_its_phrase(open_page, served):
    base, catalog = served
    node = next(n for n in catalog.taxonomy.all_nodes() if n.name == "Token tree verification")
    page = open_page()
    page.goto(base)
    page.locator("label.md-search__icon, .md-search__input").first.click()
    page.wait_for_function("() => !/initializ/i.test(document.querySelector('.md-search-result__meta')"
                           "?.textContent ?? 'initializing')", timeout=120_000)
    page.locator(".md-search__input").press_sequentially("tree verification", delay=20)
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    first = page.locator(".md-search-result__link").first
    first.wait_for(timeout=60_000)
    try:  # results follow each keystroke: give the last one time to land
        page.wait_for_function("id => document.querySelector('.md-search-result__link')?.href.includes('taxonomy/' + id + '/')",
                               arg=node.id, timeout=20_000)
    except PlaywrightTimeout:
        pass
    assert f"taxonomy/{node.id}/" in (first.get_attribute("href") or ""), first.get_attribute("href")
    shot(page, "search-node-first")
    assert page.errors == []


def test_the_catalog_downloads_the_bibtex_of_the_filtered_rows(open_page, served, tmp_path):
    """A node page opens the catalog filtered to it; a year range narrows it; "BibTeX of these N
    papers" downloads exactly those rows' entries, each as `specatlas bib` writes it."""
    from specatlas.catalog import bibtex

    base, catalog = served
    page = open_page()
    page.goto(base + f"taxonomy/{NODE}/")
    page.locator("a", has_text="Open these").click()
    page.wait_for_url(f"**/catalog/?node={NODE}")
    page.select_option("#sa-filter-from", "2024")
    page.select_option("#sa-filter-to", "2025")
    expected = sorted(p.id for p in catalog.papers if NODE in catalog.expanded_tags(p) and 2024 <= p.year <= 2025)
    assert expected and "from=2024" in page.url and "to=2025" in page.url
    button = page.locator("#sa-bibtex")
    assert button.inner_text() == f"BibTeX of these {len(expected)} papers"
    with page.expect_download() as download:
        button.click()
    path = tmp_path / download.value.suggested_filename
    download.value.save_as(path)
    text = path.read_text(encoding="utf-8")
    entries = pages.bib_entries(bibtex.render(catalog.papers))
    assert sorted(re.findall(r"^@\w+\{([^,]+),", text, re.MULTILINE)) == expected
    assert all(entries[i] in text for i in expected) and path.suffix == ".bib"
    shot(page, "catalog-bibtex")
    assert page.errors == []
