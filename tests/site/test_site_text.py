import json
import re

import markdown

from specatlas.escaping import code_fence, md, md_prose, safe_url, script_json


def render(text: str) -> str:
    return markdown.markdown(text, extensions=["tables", "attr_list", "md_in_html"])


def test_md_renders_punctuation_literally():
    text = "A *b* _c_ [d](e) `f` #g 1. h | i {: .j} \\k <l> & m"
    html = render(md(text))
    assert html == "<p>A *b* _c_ [d](e) `f` #g 1. h | i {: .j} \\k &lt;l&gt; &amp; m</p>"


def test_md_prose_keeps_emphasis_only():
    html = render(md_prose("*fast* and _exact_ [x](javascript:alert(1)) <b>y</b> {: onclick=z}"))
    assert "<em>fast</em>" in html and "<em>exact</em>" in html
    assert "<a" not in html and "<b>" not in html
    assert re.search(r"<[^>]*onclick", html) is None


def test_safe_url_allows_only_http_links():
    assert safe_url("https://arxiv.org/abs/2401.10774") == "https://arxiv.org/abs/2401.10774"
    assert safe_url("https://x.org/a_(b)") == "https://x.org/a_%28b%29"
    for bad in ("javascript:alert(1)", "JAVASCRIPT:alert(1)", "data:text/html,x", "https://x.org/\"onmouseover=1", "//x.org", None):
        assert safe_url(bad) is None


def test_script_json_cannot_close_the_script_element():
    data = {"title": "</script><script>alert(1)</script> & more"}
    text = script_json(data)
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text) == data


def test_code_fence_outlasts_backticks_inside():
    fence = code_fence("a ``` b ```` c", "bibtex")
    assert fence.startswith("`````bibtex\n") and fence.endswith("\n`````")


def test_short_name_renders_tex_superscripts():
    from types import SimpleNamespace

    from specatlas.site.catalog import short_name

    paper = SimpleNamespace(title="S$^4$C: Speculative Sampling", aliases=[], id="he2025s")
    assert short_name(paper) == "S⁴C"
    assert short_name(SimpleNamespace(title="SD$^{2}$: Sparse Drafters", aliases=[], id="x")) == "SD²"
