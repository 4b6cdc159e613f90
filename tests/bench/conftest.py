"""Fixtures over synthetic result files (see benchruns.py)."""

import pytest
from benchruns import build_run, sample, turn

from specatlas.bench.result_files import dumps


@pytest.fixture
def two_method_run():
    """baseline: 4 tokens/s everywhere; "fast" is 2x on qa, 1x on rag, and diverges at token 2 on rag."""
    return build_run([
        sample("baseline", "1", "qa", turn([1, 2, 3, 4], 1.0)),
        sample("baseline", "2", "rag", turn([5, 6, 7, 8], 1.0)),
        sample("fast", "1", "qa", turn([1, 2, 3, 4], 0.5, steps=2, widths={4: 2}, drafted=[2, 2], accepted=[2, 1])),
        sample("fast", "2", "rag", turn([5, 6, 9, 8], 1.0, steps=4, widths={2: 4}, drafted=[4], accepted=[0])),
    ])


@pytest.fixture
def write_run(tmp_path):
    def write(run, name="run.json", folder=None):
        folder = folder or tmp_path / "results"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(dumps(run))
        return folder / name

    return write
