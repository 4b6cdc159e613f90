"""`specatlas site build|serve`: the website (`specatlas.site.mkdocs_build` builds it), built beside
the output folder and swapped in, or served with live reload."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from specatlas.fsutil import WriteError, build_dir, output_dir
from specatlas.paths import repo_root
from specatlas.site.mkdocs_build import build, config_file


def configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    build_parser = sub.add_parser("build", help="generate the catalog pages and build the site")
    build_parser.add_argument("--out", type=Path, default=None, help="output folder: new, empty or an earlier site build (default: site/ in the repository)")
    serve = sub.add_parser("serve", help="serve the site with live reload")
    serve.add_argument("--addr", default="127.0.0.1:8000", help="address to serve on (default: 127.0.0.1:8000)")


def execute(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)-7s -  %(message)s")
    if args.action == "serve":
        from mkdocs.commands.serve import serve

        serve(str(config_file()), dev_addr=args.addr)
        return 0
    from mkdocs.exceptions import Abort

    # Built beside the target, then swapped in (fsutil.build_dir): a failed or killed build leaves the old site whole.
    requested = args.out or repo_root() / "site"
    try:
        out = output_dir(requested, "the site", SITE_MARKER, legacy=_older_build)
        build_dir(requested, build, SITE_MARKER, "the site", legacy=_older_build)
    except (Abort, WriteError) as exc:
        logging.error("%s", exc)
        return 1
    print(f"site written to {out}")
    return 0


# Written into every site folder a build makes: a later build replaces only a folder holding it.
SITE_MARKER = ".specatlas-site"


def _older_build(folder: Path) -> bool:
    """A site built before the marker existed: MkDocs's index.html and sitemap.xml are there. It
    is replaced only if the new build writes every name it holds (fsutil.install_dir)."""
    return (folder / "index.html").is_file() and (folder / "sitemap.xml").is_file()
