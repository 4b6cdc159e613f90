"""Record text is data: markup in a record renders as inert text everywhere on the built site.

The validator refuses such records, so the catalog here is loaded without validation."""

import json
from html.parser import HTMLParser

import pytest
import yaml

from sitecatalog import FIXTURE_PAPERS, load_unvalidated, make_root
from specatlas.site.mkdocs_build import build

TITLE = 'Evil <script>alert("title")</script><img src=x onerror=alert(1)> Decoding'
EVIL = {
    "id": "evil2024decoding",
    "title": TITLE,
    "authors": ["Mallory <script>alert('author')</script>", "Eve"],
    "year": 2024,
    "venue": "arXiv",
    "venue_note": '<b onmouseover="alert(5)">Oral</b>',
    "arxiv": '2401.00001"><script>alert(9)</script>',
    "url": "javascript:alert(3)",
    "pdf": "JaVaScRiPt:alert(3)",
    "doi": '10.1/x"onmouseover="alert(8)',
    "code": ["javascript:alert(4)"],
    "links": {"home": "data:text/html,<script>alert(4)</script>"},
    "aliases": ['"><svg onload=alert(6)>'],
    "taxonomy": {"drafting": ["extra-heads"], "scope": ["llm-text-generation"]},
    "lossless": True,
    "builds_on": ["cai2024medusa"],
    "summary": ("A summary with <iframe src=javascript:alert(2)></iframe>, a [link](javascript:alert(2)), "
                "an ![image](x onerror=alert(2)) and {: onclick=alert(2) } attributes."),
    "reported_results": [{"metric": "speedup", "value": 2.0, "target_model": "</td><script>alert(7)</script>",
                          "benchmark": "<a href=javascript:alert(7)>MT-Bench</a>", "source": "Table | 1"}],
}

# A summary and a node description that would open Material's boxes (a collapsible details block,
# an admonition) at a line start, and a node name that is markup: each must stay inert text.
BOXES = {**EVIL, "id": "evil2024boxes", "title": "Boxes", "aliases": [],
         "summary": '??? danger "Your session expired: sign in again"'}
NODE_NAME = 'Heads <img src=x onerror=alert("tag")>'
NODE_DESCRIPTION = '!!! danger "Your session expired: sign in again"'


class Collector(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.scripts: list[tuple[dict, str]] = []
        self.text: list[str] = []
        self._script: dict | None = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append((tag, attrs))
        if tag == "script":
            self._script = attrs
            self.scripts.append((attrs, ""))

    def handle_endtag(self, tag):
        if tag == "script":
            self._script = None

    def handle_data(self, data):
        if self._script is not None:
            attrs, body = self.scripts[-1]
            self.scripts[-1] = (attrs, body + data)
        else:
            self.text.append(data)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = make_root(tmp_path_factory.mktemp("evil-catalog"))
    for record in (EVIL, BOXES):
        (root / "papers" / f"{record['id']}.yaml").write_text(yaml.safe_dump(record, allow_unicode=True), encoding="utf-8")
    drafting = yaml.safe_load((root / "taxonomy" / "drafting.yaml").read_text(encoding="utf-8"))
    node = next(n for n in drafting["nodes"] if n["id"] == "extra-heads")
    node.update(name=NODE_NAME, description=NODE_DESCRIPTION)
    (root / "taxonomy" / "drafting.yaml").write_text(yaml.safe_dump(drafting, allow_unicode=True), encoding="utf-8")
    out = tmp_path_factory.mktemp("evil-site")
    build(out, load_unvalidated(root))
    return out


def parsed(path) -> Collector:
    collector = Collector()
    collector.feed(path.read_text(encoding="utf-8"))
    return collector


def test_no_page_carries_live_markup_from_a_record(site):
    pages = sorted(site.rglob("*.html"))
    assert len(pages) > 60
    for page in pages:
        doc = parsed(page)
        for tag, attrs in doc.tags:
            assert tag not in ("iframe", "svg") or "alert" not in json.dumps(attrs), (page, tag, attrs)
            for name, value in attrs.items():
                assert not (name.startswith("on") and "alert" in (value or "")), (page, tag, attrs)
                if name in ("href", "src", "action"):
                    assert not (value or "").strip().lower().startswith(("javascript:", "data:")), (page, tag, attrs)
        for attrs, body in doc.scripts:
            assert "alert" not in body or attrs.get("type") == "application/json", (page, body[:200])


def test_the_paper_page_shows_the_text_literally(site):
    doc = parsed(site / "papers" / "evil2024decoding" / "index.html")
    text = "".join(doc.text)
    assert TITLE in text
    assert "[link](javascript:alert(2))" in text and "{: onclick=alert(2) }" in text
    assert "</td><script>alert(7)</script>" in text
    assert not [a for t, a in doc.tags if "alert(" in json.dumps(a)]


def test_catalog_json_is_data(site):
    doc = parsed(site / "catalog" / "index.html")
    (body,) = [b for a, b in doc.scripts if a.get("id") == "sa-catalog-data"]
    assert "<" not in body
    titles = {row["id"]: row["title"] for row in json.loads(body)["papers"]}
    assert titles["evil2024decoding"] == TITLE


def test_search_index_holds_escaped_text(site):
    index = json.loads((site / "search" / "search_index.json").read_text(encoding="utf-8"))
    for doc in index["docs"]:
        for value in (doc["title"], doc["text"]):
            assert "<script" not in value and "<img" not in value and "<iframe" not in value, value[:300]


def test_fixture_papers_still_render(site):
    assert {p.stem for p in FIXTURE_PAPERS.glob("*.yaml")} <= {p.name for p in (site / "papers").iterdir()}


def test_results_and_lineage_show_record_text_literally(site):
    results = "".join(parsed(site / "results" / "index.html").text)
    assert "</td><script>alert(7)</script>" in results
    lineage = parsed(site / "lineage" / "index.html")
    assert TITLE in "".join(lineage.text)  # the node's tooltip
    assert all(not (a.get("href") or "").startswith("javascript") for _, a in lineage.tags)


def test_a_node_name_is_text_in_tags_and_search_results(site):
    """Material prints tag names unescaped (its tags partial, and its search results through
    innerHTML), so the name reaches both already escaped."""
    for page in ("papers/evil2024decoding/index.html", "papers/cai2024medusa/index.html", "taxonomy/extra-heads/index.html"):
        doc = parsed(site / page)
        assert not [a for t, a in doc.tags if t == "img" and "onerror" in a], page
        assert NODE_NAME in "".join(doc.text), page
    index = json.loads((site / "search" / "search_index.json").read_text(encoding="utf-8"))
    tags = [tag for doc in index["docs"] for tag in doc.get("tags", [])]
    assert "Heads &lt;img src=x onerror=alert(&quot;tag&quot;)&gt;" in tags and not [t for t in tags if "<" in t]


def test_record_and_taxonomy_text_cannot_open_a_box(site):
    for page, text in (("papers/evil2024boxes/index.html", BOXES["summary"]), ("taxonomy/extra-heads/index.html", NODE_DESCRIPTION)):
        doc = parsed(site / page)
        classes = " ".join(a.get("class") or "" for _, a in doc.tags)
        assert "admonition" not in classes and "details" not in {t for t, _ in doc.tags}, page
        assert text in "".join(doc.text), page


def test_templates_escape_every_value_they_insert_as_it_is():
    """Page markup lives in templates rendered with autoescape: a value inserted without a filter
    is HTML-escaped, a filtered one is escaped once for where it lands, and no template opts out."""
    from specatlas.bench.leaderboard_page import TEMPLATES as LEADERBOARD_TEMPLATES
    from specatlas.site.templating import TEMPLATES
    from specatlas.templating import environment

    hostile = '<img src=x onerror=alert(1)> "q" & [x](javascript:y)'
    env = environment(TEMPLATES, LEADERBOARD_TEMPLATES)
    out = env.from_string('<a title="{{ v }}">{{ v }}</a> {{ v|html }} {{ v|md }}').render(v=hostile)
    assert "<img" not in out and "&amp;lt;" not in out
    assert out.count("&lt;img src=x onerror=alert(1)&gt;") == 3  # the attribute, the body, |html
    assert "&lt;img src=x onerror=alert\\(1\\)&gt;" in out and "\\[x\\]\\(javascript:y\\)" in out  # |md
    templates = sorted([*TEMPLATES.glob("*.j2"), *LEADERBOARD_TEMPLATES.glob("*.j2")])
    assert len(templates) >= 10
    for path in templates:
        env.get_template(path.name)  # every template compiles
        assert "|safe" not in path.read_text(encoding="utf-8").replace(" ", ""), path.name
