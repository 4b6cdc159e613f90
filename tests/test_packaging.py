"""pyproject.toml lists every import package explicitly (tools/ -> specatlas, reference_impls/ ->
specatlas.impls), so a new subfolder must be added there or it will be missing from installs."""

import tomllib
from fnmatch import fnmatch

import pytest

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


@pytest.mark.parametrize("package, data", [("site", "templates"), ("bench", "templates"), ("catalog", "internal_words.yaml")])
def test_the_files_read_at_run_time_are_package_data(package, data):
    root = repo_root()
    globs = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"][f"specatlas.{package}"]
    folder = root / "tools" / package
    paths = [folder / data] if (folder / data).is_file() else [p for p in (folder / data).rglob("*") if p.is_file()]
    files = [p.relative_to(folder).as_posix() for p in paths]
    assert files and [f for f in files if not any(fnmatch(f, g) for g in globs)] == []
