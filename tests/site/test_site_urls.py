"""The site's addresses come from the project's configuration, never from a guess: mkdocs.yml (its
environment variables), pyproject.toml's [project.urls], the git remote `origin`; with none of
them, no canonical URL, no source link, no edit link and no placeholder address."""

import re
import subprocess

import pytest

from sitecatalog import make_root
from specatlas.site.catalog import load_catalog
from specatlas.site.mkdocs_build import build
from specatlas.site.urls import Addresses, resolve

ENVIRONMENT = ("SPECATLAS_SITE_URL", "SPECATLAS_REPO_URL", "SPECATLAS_EDIT_URI")
GUESSES = ("specatlas.dev", "github.com/specatlas", "example.com")


@pytest.fixture
def unconfigured(monkeypatch):
    for name in ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)


def git(root, *args):
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


def with_remote(root, url, default_branch=None):
    git(root, "init", "-q")
    git(root, "remote", "add", "origin", url)
    if default_branch:
        git(root, "symbolic-ref", "refs/remotes/origin/HEAD", f"refs/remotes/origin/{default_branch}")
    return root


def test_nothing_configured_gives_nothing(tmp_path):
    assert resolve(tmp_path, Addresses()) == Addresses(None, None, None)


def test_pyproject_urls(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\n[project.urls]\nRepository = "https://git.example.org/team/atlas"\n'
        'Documentation = "https://docs.example.org/atlas"\n')
    # no branch is known for an unknown host: no edit links rather than a guessed path
    assert resolve(tmp_path, Addresses()) == Addresses("https://docs.example.org/atlas/", "https://git.example.org/team/atlas", None)


@pytest.mark.parametrize("remote, web", [
    ("git@github.com:someone/fork.git", "https://github.com/someone/fork"),
    ("ssh://git@gitlab.com/group/atlas.git", "https://gitlab.com/group/atlas"),
    ("https://user:secret-token@github.com/someone/fork.git", "https://github.com/someone/fork"),
    ("/srv/git/atlas.git", None),  # a local path is no web address
])
def test_git_remote_origin(tmp_path, remote, web):
    with_remote(tmp_path, remote, "trunk")
    found = resolve(tmp_path, Addresses())
    assert found.repo_url == web and found.site_url is None
    assert found.edit_uri == {"github.com": "edit/trunk/", "gitlab.com": "-/edit/trunk/"}.get(web.split("/")[2] if web else "")


def test_configured_addresses_win_and_no_default_branch_means_no_edit_links(tmp_path):
    with_remote(tmp_path, "git@github.com:someone/fork.git")
    assert resolve(tmp_path, Addresses()).edit_uri is None
    mine = Addresses("https://atlas.example.org/", "https://github.com/me/atlas", "edit/dev/")
    assert resolve(tmp_path, mine) == mine


def test_a_site_without_configured_addresses_links_nowhere(tmp_path, unconfigured):
    out = tmp_path / "site"
    build(out, load_catalog(make_root(tmp_path / "root")))
    for page in out.rglob("*.html"):
        html = page.read_text(encoding="utf-8")
        assert 'rel="canonical"' not in html and "/edit/" not in html and 'class="md-source"' not in html, page
        assert not [guess for guess in GUESSES if guess in html], page
    assert "<loc>" not in (out / "sitemap.xml").read_text(encoding="utf-8")


def test_a_site_takes_its_addresses_from_the_project(tmp_path, unconfigured):
    root = with_remote(make_root(tmp_path / "root"), "git@github.com:someone/fork.git", "trunk")
    (root / "pyproject.toml").write_text('[project]\nname = "x"\n[project.urls]\nDocumentation = "https://docs.example.org/atlas/"\n')
    out = tmp_path / "site"
    build(out, load_catalog(root))
    medusa = (out / "papers" / "cai2024medusa" / "index.html").read_text(encoding="utf-8")
    assert '<link rel="canonical" href="https://docs.example.org/atlas/papers/cai2024medusa/">' in medusa
    assert 'href="https://github.com/someone/fork/edit/trunk/papers/cai2024medusa.yaml"' in medusa
    assert '<a href="https://github.com/someone/fork" title=' in medusa


def test_the_repository_names_its_own_addresses_and_a_fork_overrides_them(tmp_path, monkeypatch, unconfigured):
    """pyproject.toml [project.urls] is the one configured place; SPECATLAS_* variables override it."""
    from specatlas.paths import repo_root
    from specatlas.site import project_pages

    found = resolve(repo_root(), Addresses())
    assert (found.site_url, found.repo_url) == ("https://specatlas.github.io/specatlas/", "https://github.com/specatlas/specatlas")
    assert resolve(repo_root(), Addresses("https://fork.example.org/", "https://github.com/someone/fork")).repo_url == \
        "https://github.com/someone/fork"
    catalog = load_catalog(make_root(tmp_path / "root"))
    run = project_pages.run_page(catalog, found.repo_url, found.site_url)
    assert "git clone https://github.com/specatlas/specatlas specatlas" in run
    assert "- This site: [https://specatlas\\.github\\.io/specatlas/](https://specatlas.github.io/specatlas/)" in run
    contributing = project_pages.contributing_page(catalog, found.repo_url, found.site_url)
    assert "(https://github.com/specatlas/specatlas/pulls)" in contributing
    assert "Where the project lives" not in project_pages.contributing_page(catalog)  # nothing configured: no address


def test_a_configured_site_gets_a_sitemap_and_the_header_links_the_repository(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECATLAS_SITE_URL", "https://fork.example.org/atlas/")
    monkeypatch.setenv("SPECATLAS_REPO_URL", "https://github.com/someone/fork")
    out = tmp_path / "site"
    build(out, load_catalog(make_root(tmp_path / "root")))
    assert "<loc>https://fork.example.org/atlas/catalog/</loc>" in (out / "sitemap.xml").read_text(encoding="utf-8")
    home = (out / "index.html").read_text(encoding="utf-8")
    assert 'href="https://github.com/someone/fork"' in home and 'class="md-source"' in home
    run = re.sub(r"<[^>]+>", "", (out / "run" / "index.html").read_text(encoding="utf-8"))  # code is highlighted
    assert "git clone https://github.com/someone/fork specatlas" in run
    assert "https://github.com/someone/fork/pulls" in (out / "contributing" / "index.html").read_text(encoding="utf-8")
