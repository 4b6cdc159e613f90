"""Where the site is published and the repository it is built from, as the project configures
them; never guessed.

In order: mkdocs.yml (`site_url`, `repo_url`, `edit_uri`, which read SPECATLAS_SITE_URL,
SPECATLAS_REPO_URL and SPECATLAS_EDIT_URI), then pyproject.toml's [project.urls] at the catalog
root (`Repository` or `Source`; `Documentation` or `Homepage` for the site), then, for the
repository only, the root's git remote `origin`. Edit links need the branch as well: the remote's
default branch (`origin/HEAD`) on GitHub or GitLab, unless `edit_uri` is set. What none of them
gives stays unset: no canonical URLs without a site URL, no source or edit links without a
repository.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

REPOSITORY_KEYS = ("repository", "source", "source code", "code")
SITE_KEYS = ("documentation", "docs", "homepage")
EDIT_PATHS = {"github.com": "edit/{branch}/", "gitlab.com": "-/edit/{branch}/"}


@dataclass(frozen=True)
class Addresses:
    site_url: str | None = None
    repo_url: str | None = None
    edit_uri: str | None = None  # relative to repo_url, ends in "/"


def resolve(root: Path, configured: Addresses) -> Addresses:
    """The addresses `configured` sets, completed from the project at `root`."""
    project = _project_urls(root)
    repo = _web(configured.repo_url or _first(project, REPOSITORY_KEYS) or _origin(root))
    site = _web(configured.site_url or _first(project, SITE_KEYS))
    edit = configured.edit_uri or None
    if repo and not edit:
        template = EDIT_PATHS.get(urlsplit(repo).netloc.lower())
        branch = _default_branch(root) if template else None
        edit = template.format(branch=branch) if branch else None
    return Addresses(site if not site or site.endswith("/") else site + "/", repo, edit)


def _first(urls: dict[str, str], keys: tuple[str, ...]) -> str | None:
    return next((urls[key] for key in keys if key in urls), None)


def _project_urls(root: Path) -> dict[str, str]:
    """pyproject.toml's [project.urls], keys lower-cased; empty when absent or unreadable."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        return {}
    try:
        project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8")).get("project", {})
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return {}
    urls = project.get("urls", {}) if isinstance(project, dict) else {}
    return {str(k).lower(): v for k, v in urls.items() if isinstance(v, str)} if isinstance(urls, dict) else {}


def _git(root: Path, *args: str) -> str | None:
    if not (root / ".git").exists():  # only the root's own checkout, never a folder above it
        return None
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (done.stdout.strip() or None) if done.returncode == 0 else None


def _origin(root: Path) -> str | None:
    """The web address of the remote `origin`: git@host:o/r.git and ssh://git@host/o/r.git become https://host/o/r."""
    url = _git(root, "remote", "get-url", "origin")
    if not url:
        return None
    if "://" not in url and ":" in url:  # scp-like: [user@]host:path
        host, _, path = url.partition(":")
        url = f"https://{host.rpartition('@')[2]}/{path}"
    parts = urlsplit(url)
    if parts.scheme in ("ssh", "git"):
        parts = parts._replace(scheme="https")
    path = parts.path.removesuffix("/").removesuffix(".git")
    return urlunsplit(parts._replace(path=path))


def _default_branch(root: Path) -> str | None:
    ref = _git(root, "symbolic-ref", "--short", "refs/remotes/origin/HEAD")
    return ref.removeprefix("origin/") if ref and ref.startswith("origin/") else None


def _web(url: str | None) -> str | None:
    """`url` if it is an http(s) address, without any user name or token in it; else None."""
    if not url:
        return None
    parts = urlsplit(url.strip())
    try:
        port = parts.port
    except ValueError:  # a port that is not a number
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    return urlunsplit(parts._replace(netloc=parts.hostname + (f":{port}" if port else "")))
