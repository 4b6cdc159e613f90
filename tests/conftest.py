import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture
def make_catalog(tmp_path):
    """Build a throwaway catalog root (real taxonomy + the given record files) and return it."""

    def build(*sources: Path, base: bool = True) -> Path:
        root = tmp_path / "catalog"
        (root / "papers").mkdir(parents=True)
        shutil.copytree(REPO / "taxonomy", root / "taxonomy")
        for source in ([FIXTURES / "base"] if base else []) + list(sources):
            files = sorted(source.glob("*.yaml")) if source.is_dir() else [source]
            for file in files:
                shutil.copy(file, root / "papers" / file.name)
        return root

    return build
