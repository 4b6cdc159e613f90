"""`specatlas bib`: the catalog as BibTeX (`specatlas.catalog.bibtex` renders it), filtered by taxonomy
node, year and losslessness, written to a file only this command wrote before, or to stdout."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import bibtexparser

from specatlas.catalog.bibtex import render, select
from specatlas.catalog.validate import validate
from specatlas.fsutil import ReadError, WriteError, atomic_write, output_file, read_limited


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", type=Path, default=Path("papers.bib"),
                        help="where to write the BibTeX file, new or an earlier output of this command "
                             "(default: papers.bib; '-' for stdout)")
    parser.add_argument("--node", metavar="NODE", help="only papers tagged with this taxonomy node or a node below it "
                                                       "(an id of taxonomy/*.yaml, e.g. extra-heads)")
    parser.add_argument("--since", type=int, metavar="YEAR", help="only papers whose cited version is from YEAR or later")
    parser.add_argument("--until", type=int, metavar="YEAR", help="only papers whose cited version is from YEAR or earlier")
    kind = parser.add_mutually_exclusive_group()
    kind.add_argument("--lossless", dest="lossless", action="store_const", const=True,
                      help="only methods whose output distribution is exactly the target's")
    kind.add_argument("--lossy", dest="lossless", action="store_const", const=False,
                      help="only methods that change the output distribution")


def execute(args: argparse.Namespace) -> int:
    problems, records, taxonomy = validate()
    if problems:
        for problem in problems:
            print(problem, file=sys.stderr)
        print("specatlas bib: fix the catalog first (specatlas validate)", file=sys.stderr)
        return 1
    if args.node is not None and args.node not in {n.id for n in taxonomy.all_nodes()}:
        print(f"specatlas bib: --node {args.node}: no such taxonomy node (the ids are in taxonomy/*.yaml)", file=sys.stderr)
        return 1
    papers = select([r.paper for r in records], taxonomy, args.node, args.since, args.until, args.lossless)
    if not papers:
        print("specatlas bib: no paper matches these filters; nothing written", file=sys.stderr)
        return 1
    text = render(papers)
    if str(args.output) == "-":
        sys.stdout.write(text)
        return 0
    try:
        if args.output.is_dir():
            raise WriteError(f"cannot write {args.output}: it is a folder; name a file such as {args.output / 'papers.bib'}")
        if args.output.exists() and not args.output.is_file():  # /dev/full, a FIFO: not replaced by a file
            args.output.write_text(text, encoding="utf-8")
        else:
            ids = {r.paper.id for r in records}
            atomic_write(output_file(args.output, "the BibTeX", lambda path: _earlier_output(path, ids)), text)
    except WriteError as exc:
        print(f"specatlas bib: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"specatlas bib: cannot write {args.output}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    print(f"wrote {len(papers)} entries to {args.output}", file=sys.stderr)
    return 0


def _earlier_output(path: Path, ids: set[str]) -> bool:
    """Whether `path` is BibTeX this command wrote: entries only, each keyed by a record of the
    catalog. Someone's own .bib (or any other file) is never overwritten."""
    try:
        library = bibtexparser.parse_string(read_limited(path, 64 << 20).decode("utf-8"))
    except (ReadError, UnicodeDecodeError):
        return False
    return (bool(library.entries) and not library.failed_blocks and len(library.blocks) == len(library.entries)
            and all(e.key in ids for e in library.entries))
