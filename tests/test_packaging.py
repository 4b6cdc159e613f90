"""pyproject.toml lists every import package explicitly (tools/ -> specatlas, reference_impls/ ->
specatlas.impls), so a new subfolder must be added there or it will be missing from installs."""

import tomllib

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
