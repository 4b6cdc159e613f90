import os
import shutil
from pathlib import Path

import pytest

# Under pytest-xdist each worker gets one math thread: two workers with two OpenMP threads each on
# a 2-core machine spin against each other and run the model tests several times slower. Set
# before any test imports torch, which reads it once.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")

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


@pytest.fixture
def spec_bench_questions() -> Path:
    """Spec-Bench's question.jsonl (not shipped: its texts are theirs), for the tests that check
    ours share none of it: $SPEC_BENCH_QUESTIONS, else the copy in a shared/ folder beside the
    checkout; skipped when neither exists."""
    default = REPO.parent / "shared" / "data" / "spec_bench" / "question.jsonl"
    path = Path(os.environ.get("SPEC_BENCH_QUESTIONS") or default)
    if not path.is_file():
        pytest.skip("Spec-Bench questions are not available here (set SPEC_BENCH_QUESTIONS)")
    return path
