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


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Under CI=true a skip is a failure: a missing shipped head, input or browser must be seen,
    not silently pass (locally a skip stays a skip, with its reason in the summary)."""
    outcome = yield
    report = outcome.get_result()
    if os.environ.get("CI") == "true" and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome, report.longrepr = "failed", f"skipped under CI=true, which runs every test: {reason}"


@pytest.fixture(scope="session")
def embedded():
    """The embedded SmolLM2-135M-Instruct, loaded once per test process (converted once per machine)."""
    from specatlas.impls.engine.models import load_model, machine_kernels, pick_device

    return load_model(None, device=pick_device("cpu"), kernels=machine_kernels())  # as the commands load it
