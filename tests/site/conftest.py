from pathlib import Path

import pytest

from sitecatalog import make_root
from specatlas.site.catalog import Catalog, load_catalog


@pytest.fixture(scope="session")
def fixture_root(tmp_path_factory) -> Path:
    return make_root(tmp_path_factory.mktemp("catalog"))


@pytest.fixture(scope="session")
def fixture_catalog(fixture_root) -> Catalog:
    return load_catalog(fixture_root)
