"""pyproject.toml lists every import package explicitly (tools/ -> specatlas, reference_impls/ ->
specatlas.impls), so a new subfolder must be added there or it will be missing from installs."""

import tomllib
from fnmatch import fnmatch

from specatlas.paths import repo_root

MAPPING = {"tools": "specatlas", "reference_impls": "specatlas.impls"}


def test_every_package_folder_is_listed():
    root = repo_root()
    listed = set(tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = set()
    for folder, package in MAPPING.items():
        for init in (root / folder).rglob("__init__.py"):
            relative = init.parent.relative_to(root / folder).parts
            found.add(".".join((package, *relative)))
    assert found == listed


def test_the_site_templates_are_package_data():
    root = repo_root()
    globs = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["specatlas.site"]
    site = root / "tools" / "site"
    templates = [p.relative_to(site).as_posix() for p in (site / "templates").rglob("*") if p.is_file()]
    assert templates and [t for t in templates if not any(fnmatch(t, g) for g in globs)] == []
