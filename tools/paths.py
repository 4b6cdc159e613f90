"""Where the catalog lives.

The catalog (papers/, taxonomy/, docs/, results/) is data in the repository, not package data:
it is found from SPECATLAS_ROOT, else the working directory or one of its parents, else the
checkout this package was installed from (editable install).
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path


def is_catalog_root(path: Path) -> bool:
    return (path / "taxonomy").is_dir() and (path / "papers").is_dir()


def source_checkout() -> Path | None:
    """The checkout this code runs from (an editable install), None for an installed copy."""
    root = Path(__file__).resolve().parent.parent
    return root if is_catalog_root(root) else None


@lru_cache(maxsize=None)
def repo_root() -> Path:
    env = os.environ.get("SPECATLAS_ROOT")
    if env:
        return Path(env).resolve()
    cwd = Path.cwd().resolve()
    for candidate in (cwd, *cwd.parents):
        if is_catalog_root(candidate):
            return candidate
    if checkout := source_checkout():
        return checkout
    raise SystemExit(
        "specatlas: cannot find the catalog (a folder with papers/ and taxonomy/). "
        "Run from a SpecAtlas checkout or set SPECATLAS_ROOT."
    )


def papers_dir() -> Path:
    return repo_root() / "papers"


def taxonomy_dir() -> Path:
    return repo_root() / "taxonomy"


def training_results_dir() -> Path:
    """results/training/: what `train-curve` and `train-eval` measure of the heads (beside the
    bench's results, which the leaderboard reads)."""
    return repo_root() / "results" / "training"
