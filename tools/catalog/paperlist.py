"""Coverage of the public hand-edited paper list (../shared/data/speculative_decoding_papers_list.json).

Every row of the list maps to one record (by normalized title, then arXiv id) or to a reasoned
exclusion in paperlist_exclusions.yaml. Rows repeated under several sections map to one record,
which must carry the facet each section stands for.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from specatlas.catalog.records import normalize_title
from specatlas.paths import shared_dir

EXCLUSIONS_FILE = Path(__file__).with_name("paperlist_exclusions.yaml")

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


def list_path() -> Path | None:
    shared = shared_dir()
    path = shared / "data" / "speculative_decoding_papers_list.json" if shared else None
    return path if path and path.exists() else None


def load_rows(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["papers"]


def _exclusions() -> dict:
    return yaml.safe_load(EXCLUSIONS_FILE.read_text(encoding="utf-8")) or {}


def matched_rows() -> dict[int, str]:
    """source_line of a row matched by hand -> record id."""
    return {int(e["source_line"]): str(e["id"]) for e in _exclusions().get("matched_rows") or []}


def load_exclusions() -> dict[int, str]:
    """source_line of an excluded row -> why it has no record."""
    return {int(e["source_line"]): str(e["reason"]) for e in _exclusions().get("excluded_rows") or []}


def section_disagreements() -> dict[str, str]:
    """record id -> why it does not carry the facet of a section the list files it under."""
    return {str(e["id"]): str(e["reason"]) for e in _exclusions().get("section_disagreements") or []}


def map_rows(rows: list[dict], papers) -> dict[int, str | None]:
    """source_line -> record id (None when no record matches)."""
    by_title = {normalize_title(p.title): p.id for p in papers}
    by_arxiv = {p.arxiv: p.id for p in papers if p.arxiv}
    by_hand = matched_rows()
    # Titles first: the list links at least one row to the wrong arXiv paper.
    return {
        row["source_line"]: by_title.get(normalize_title(row["title"])) or by_arxiv.get(row.get("arxiv_id"))
        or by_hand.get(row["source_line"])
        for row in rows
    }
