"""The site builds strictly (every link checked, tags from the taxonomy only) on the real catalog,
with plain `mkdocs build` at the repository root."""

import os
import subprocess
import sys
from pathlib import Path

from specatlas.catalog.validate import validate
from specatlas.paths import repo_root


# The addresses a deployment configures (tests/site/test_site_urls.py: and those it does not)
ADDRESSES = {"SPECATLAS_SITE_URL": "https://atlas.example.org/", "SPECATLAS_REPO_URL": "https://github.com/someone/atlas",
             "SPECATLAS_EDIT_URI": "edit/main/"}


def test_mkdocs_build_strict_on_the_real_catalog(tmp_path):
    out = tmp_path / "site"
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
                            cwd=repo_root(), capture_output=True, text=True, timeout=300,
                            env={**os.environ, "NO_MKDOCS_2_WARNING": "1", **ADDRESSES})
    assert result.returncode == 0, result.stderr[-4000:]
    assert "WARNING -" not in result.stderr, result.stderr[-4000:]
    ids = [r.paper.id for r in validate()[1]]
    built = {p.parent.name for p in (out / "papers").glob("*/index.html")}
    assert built == set(ids)
    assert (out / "papers.bib").read_text(encoding="utf-8").count("\n@") + 1 == len(ids)
    assert {p.stem for p in (out / "papers").glob("*.bib")} == set(ids)
    for page in ("catalog", "taxonomy", "timeline", "lineage", "leaderboard", "results", "choose", "contributing"):
        assert (out / page / "index.html").is_file()
    assert not list(Path(repo_root(), "docs").glob("**/*.md")), "generated pages must not land in docs/"
    # Light pages: no graph library anywhere (lineage is drawn at build time), every page well
    # under a megabyte, and the search index no larger than the pages it indexes need. The catalog
    # lists every record on one page (filtered in the browser), so it is held to 1,600 bytes a record.
    for html in out.rglob("*.html"):
        bound = 1_600 * len(ids) if html == out / "catalog" / "index.html" else 1_000_000
        assert html.stat().st_size < bound, html
    assert "mermaid" not in (out / "lineage" / "index.html").read_text(encoding="utf-8")
    assert not list(out.rglob("mermaid*.js"))
    # Site basics: a sitemap of every page, a favicon, edit links to each page's source.
    sitemap = (out / "sitemap.xml").read_text(encoding="utf-8")
    assert sitemap.count("<loc>") >= len(ids) and "<loc>https://" in sitemap
    assert (out / "assets" / "favicon.svg").is_file()
    medusa = (out / "papers" / "cai2024medusa" / "index.html").read_text(encoding="utf-8")
    assert 'rel="icon" href="../../assets/favicon.svg"' in medusa
    assert "/edit/main/papers/cai2024medusa.yaml" in medusa
    assert 'data-md-component="source"' not in medusa  # no request to the GitHub API
    assert "/edit/" not in (out / "catalog" / "index.html").read_text(encoding="utf-8")  # generated from everything
    assert "/edit/main/taxonomy/drafting.yaml" in (out / "taxonomy" / "extra-heads" / "index.html").read_text(encoding="utf-8")


def test_a_tag_outside_the_taxonomy_fails_the_build(tmp_path):
    """tags_allowed comes from the taxonomy: a page tagged with anything else is refused."""
    from mkdocs.config import load_config

    from specatlas.site.mkdocs_build import config_file

    config = load_config(str(config_file()), site_dir=str(tmp_path))
    config.plugins.run_event("config", config)
    tags = config.plugins["material/tags"].config.tags_allowed
    assert {t.name for t in tags} >= {"Extra decoding heads", "Speculative sampling"}
    assert "Made-up tag" not in {t.name for t in tags}
