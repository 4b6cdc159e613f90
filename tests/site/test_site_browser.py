"""The built site in headless Chromium: search, the catalog filter, the lineage diagram, and no
console error anywhere. Screenshots are kept in test-artifacts/site/."""

import functools
import http.server
import os
import shutil
import threading

import pytest

from sitecatalog import make_root
from specatlas.paths import repo_root
from specatlas.site.build import build
from specatlas.site.catalog import load_catalog

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
        catalog = load_catalog(make_root(tmp_path_factory.mktemp("catalog")))
    site = tmp_path_factory.mktemp("site")
    build(site, catalog)

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/", catalog
    server.shutdown()


def mermaid_svgs(page) -> int:
    """How many .mermaid containers hold a rendered <svg>. Material renders into a closed shadow
    root, which only the DevTools protocol's pierce option can see into."""
    session = page.context.new_cdp_session(page)
    try:
        root = session.send("DOM.getDocument", {"depth": -1, "pierce": True})["root"]
    finally:
        session.detach()

    def has_svg(node) -> bool:
        children = node.get("children", []) + node.get("shadowRoots", [])
        return any(c.get("nodeName") == "svg" or has_svg(c) for c in children)

    def containers(node):
        classes = dict(zip(node.get("attributes", [])[::2], node.get("attributes", [])[1::2])).get("class", "")
        if "mermaid" in classes.split():
            yield node
        for child in node.get("children", []) + node.get("shadowRoots", []):
            yield from containers(child)

    return sum(has_svg(c) for c in containers(root))


def test_search_filter_and_lineage(browser, served):
    base, catalog = served
    artifacts = repo_root() / "test-artifacts" / "site"
    artifacts.mkdir(parents=True, exist_ok=True)
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.set_default_timeout(15_000)
    errors: list[str] = []
    page.on("console", lambda message: message.type == "error" and errors.append(message.text))
    page.on("pageerror", lambda error: errors.append(str(error)))
    # The site must work offline: any request off this server is an error.
    page.route("**/*", lambda route: route.continue_() if route.request.url.startswith(base)
               else (errors.append(f"external request {route.request.url}"), route.abort()))

    page.goto(base)
    assert page.locator("h1").first.inner_text().startswith("SpecAtlas")
    page.screenshot(path=str(artifacts / "home.png"))

    page.locator("label.md-search__icon, .md-search__input").first.click()
    page.locator(".md-search__input").fill("Medusa")
    result = page.locator(".md-search-result__link[href*='papers/cai2024medusa']").first
    result.wait_for()
    page.screenshot(path=str(artifacts / "search.png"))
    result.click()
    page.wait_for_url("**/papers/cai2024medusa/**")
    assert "Medusa" in page.locator("h1").first.inner_text()
    page.screenshot(path=str(artifacts / "paper.png"), full_page=True)

    page.goto(base + "catalog/")
    rows = page.locator("#sa-table tbody tr")
    assert rows.count() == len(catalog.papers)
    page.select_option("#sa-filter-node", NODE)
    expected = len(catalog.node_papers[NODE])
    assert 0 < expected < len(catalog.papers)
    assert rows.count() == expected
    assert page.locator("#sa-count").inner_text() == f"Showing {expected} of {len(catalog.papers)} records"
    assert "cai2024medusa" in rows.evaluate_all("rows => rows.map(r => r.dataset.id)")
    page.screenshot(path=str(artifacts / "catalog.png"))

    page.goto(base + "lineage/")
    diagrams = page.locator(".mermaid").count()
    for _ in range(30):  # Mermaid renders asynchronously
        if mermaid_svgs(page) == diagrams:
            break
        page.wait_for_timeout(500)
    assert diagrams > 0 and mermaid_svgs(page) == diagrams
    page.screenshot(path=str(artifacts / "lineage.png"))

    assert errors == []
