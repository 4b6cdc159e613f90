"""Coverage of a public hand-edited paper list (a JSON export of an awesome-list, with a `papers`
array of rows: section, title, arxiv_id, source_line), given by path: `specatlas list-coverage --list PATH`.

Every row of the list maps to one record (by normalized title, then arXiv id, then a hand match)
or to a reasoned exclusion in paperlist_exclusions.yaml. Rows repeated under several sections map
to one record, which must carry the facet each section stands for.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import yaml

from specatlas.catalog.records import normalize_title
from specatlas.catalog.schema import Paper
from specatlas.catalog.taxonomy import Taxonomy
from specatlas.catalog.yamlio import shorten
from specatlas.fsutil import ReadError, read_json

EXCLUSIONS_FILE = Path(__file__).with_name("paperlist_exclusions.yaml")
MIN_REASON = 16  # characters: a reason says why, not just "no"

# A list section -> (facet, nodes): a record listed there carries one of the nodes or a descendant.
SECTION_FACETS = {
    "Multimodal Speculative Decoding": ("scope", ("multimodal",)),
    "Speculative Decoding for Diffusion LMs": ("scope", ("diffusion-models",)),
    "Long-Context Speculative Decoding": ("scope", ("long-context",)),
    "Speculative Decoding for Mixture-of-Experts": ("scope", ("mixture-of-experts",)),
    "Speculative Decoding for Seq2Seq": ("scope", ("seq2seq",)),
    "Survey": ("scope", ("survey",)),
    "Tutorial": ("scope", ("survey",)),
    "Benchmarks": ("scope", ("benchmark",)),
    "Analysis": ("scope", ("analysis",)),
    # "Applications" is left out: the list files plain LLM methods, deployments and real
    # applications there alike, so the section implies no facet.
    "Multi-Token Prediction": ("drafting", ("multi-token-prediction",)),
}
ALIGNMENT_SECTION = "Alignment"  # any alignment tag will do


class PaperListError(ValueError):
    """The list or the exclusions file cannot be read (the message is one line)."""


@dataclass(frozen=True)
class Exclusions:
    """How rows that cannot be matched automatically are accounted for (see the YAML file)."""

    matched: dict[int, str]  # source_line of a row matched by hand -> record id
    excluded: dict[int, str]  # source_line of a row without a record -> why
    disagreements: dict[str, str]  # record id -> why it lacks the facet of a section listing it


MAX_LIST_BYTES = 64 << 20  # the public list is ~0.5 MB


def load_rows(path: Path) -> list[dict]:
    try:
        data = read_json(path, MAX_LIST_BYTES)
    except ReadError as exc:
        raise PaperListError(f"{path}: {exc}") from None
    rows = data.get("papers") if isinstance(data, dict) else None
    if not isinstance(rows, list):
        raise PaperListError(f"{path}: not a paper list (a JSON object whose 'papers' is an array of rows)")
    for i, row in enumerate(rows):
        problem = _row_problem(row)
        if problem:
            line = row.get("source_line") if isinstance(row, dict) else None
            shown = f" (source_line {line})" if type(line) is int else ""
            raise PaperListError(f"{path}: papers[{i}]{shown}: {problem}")
    return rows


# A row's fields: JSON type(s) and how a message names them.
_ROW_FIELDS = {"title": ((str,), "text"), "section": ((str,), "text"), "source_line": ((int,), "a whole number"),
               "arxiv_id": ((str, type(None)), "text or null")}
_JSON_TYPES = {dict: "an object", list: "an array", str: "text", bool: "a boolean", int: "a number",
               float: "a number", type(None): "null"}


def _row_problem(row) -> str | None:
    """Why `row` is not a row of the list (one line), or None."""
    if not isinstance(row, dict):
        return f"is {_JSON_TYPES.get(type(row), 'a value')}, not an object with {', '.join(_ROW_FIELDS)}"
    for name, (types, wanted) in _ROW_FIELDS.items():
        if name not in row:
            if type(None) not in types:
                return f"'{name}' is missing"
        elif type(row[name]) not in types:  # type(): a boolean is no source line
            return f"'{name}' must be {wanted}, not {_JSON_TYPES.get(type(row[name]), 'a value')}"
    return None


def load_exclusions(path: Path = EXCLUSIONS_FILE) -> Exclusions:
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    return Exclusions(
        matched={int(e["source_line"]): str(e["id"]) for e in data.get("matched_rows") or []},
        excluded={int(e["source_line"]): str(e["reason"]) for e in data.get("excluded_rows") or []},
        disagreements={str(e["id"]): str(e["reason"]) for e in data.get("section_disagreements") or []},
    )


def map_rows(rows: list[dict], papers: Iterable[Paper], matched: dict[int, str]) -> dict[int, str | None]:
    """source_line -> record id (None when no record matches)."""
    papers = list(papers)
    by_title = {normalize_title(p.title): p.id for p in papers}
    by_arxiv = {p.arxiv: p.id for p in papers if p.arxiv}
    # Titles first: the list links at least one row to the wrong arXiv paper.
    return {
        row["source_line"]: by_title.get(normalize_title(row["title"])) or by_arxiv.get(row.get("arxiv_id"))
        or matched.get(row["source_line"])
        for row in rows
    }


def coverage_problems(rows: list[dict], papers: dict[str, Paper], taxonomy: Taxonomy,
                      exclusions: Exclusions) -> list[str]:
    """Everything that keeps the list and the catalog from agreeing, one line each."""
    mapping = map_rows(rows, papers.values(), exclusions.matched)
    problems = [f"line {r['source_line']}: no record and no exclusion: {shorten(r['title'], 200)}" for r in rows
                if mapping[r["source_line"]] is None and r["source_line"] not in exclusions.excluded]
    problems += [f"line {line}: excluded, but record {mapping[line]} matches it now"
                 for line in exclusions.excluded if mapping.get(line)]
    problems += [f"line {line}: the exclusion's reason is too short to say why" for line, why in exclusions.excluded.items()
                 if len(why) < MIN_REASON]
    problems += [f"matched_rows names {i}, which is not a record" for i in exclusions.matched.values() if i not in papers]
    problems += [f"section_disagreements names {i}, which is not a record" for i in exclusions.disagreements
                 if i not in papers]
    titles = {normalize_title(p.title) for p in papers.values()}
    arxivs = {p.arxiv for p in papers.values() if p.arxiv}
    problems += [f"line {r['source_line']}: matched by hand, but its title or arXiv id already matches" for r in rows
                 if r["source_line"] in exclusions.matched
                 and (normalize_title(r["title"]) in titles or r.get("arxiv_id") in arxivs)]
    for row in rows:
        paper = papers.get(mapping[row["source_line"]] or "")
        if paper is None or paper.id in exclusions.disagreements:
            continue
        if row["section"] in SECTION_FACETS:
            facet, nodes = SECTION_FACETS[row["section"]]
            if not _reached(paper, facet, taxonomy) & set(nodes):
                problems.append(f"{paper.id}: listed under {shorten(row['section'], 80)!r} but has no {facet} tag in {nodes}")
        elif row["section"] == ALIGNMENT_SECTION and not paper.taxonomy.alignment:
            problems.append(f"{paper.id}: listed under '{ALIGNMENT_SECTION}' but has no alignment tag")
    return list(dict.fromkeys(problems))  # a row listed twice is one problem


def _reached(paper: Paper, facet_id: str, taxonomy: Taxonomy) -> set[str]:
    """The paper's tags on the facet and every node above them."""
    facet = taxonomy.facets[facet_id]
    return {node for tag in getattr(paper.taxonomy, facet_id) if tag in facet.nodes
            for node in (tag, *facet.ancestors(tag))}


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--list", type=Path, required=True, dest="list_path", metavar="PATH",
                        help="the paper list as JSON (a `papers` array of rows with section, title, arxiv_id, source_line)")


def execute(args: argparse.Namespace) -> int:
    from specatlas.catalog.validate import validate

    try:
        rows = load_rows(args.list_path)
    except PaperListError as exc:
        print(f"specatlas list-coverage: {exc}", file=sys.stderr)
        return 2
    _, records, taxonomy = validate()
    problems = coverage_problems(rows, {r.paper.id: r.paper for r in records if r.paper}, taxonomy, load_exclusions())
    for problem in problems:  # one line each; none may read as a CI runner's command ("::error ...")
        print(" " + problem if problem.startswith("::") else problem)
    print(f"{len(rows)} rows, {len(problems)} problems", file=sys.stderr)
    return 1 if problems else 0
