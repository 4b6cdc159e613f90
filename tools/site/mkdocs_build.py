"""The website built with MkDocs from mkdocs.yml at the repository root: what `specatlas site`, the
tests and the site benchmark build with."""

from __future__ import annotations

from pathlib import Path

from specatlas.site.catalog import Catalog


def config_file() -> Path:
    """mkdocs.yml of this checkout (the site's templates, not data, so not under SPECATLAS_ROOT)."""
    return Path(__file__).resolve().parent.parent.parent / "mkdocs.yml"


def build(site_dir: Path, catalog: Catalog | None = None) -> None:
    """Build the site into `site_dir` (strictly, as mkdocs.yml says), from `catalog` if given,
    else from the repository."""
    from mkdocs.commands.build import build as mkdocs_build
    from mkdocs.config import load_config

    config = load_config(str(config_file()), site_dir=str(site_dir))
    if catalog is not None:
        config.plugins["specatlas"].catalog = catalog
    config.plugins.on_startup(command="build", dirty=False)
    try:
        mkdocs_build(config)
    finally:
        config.plugins.on_shutdown()
