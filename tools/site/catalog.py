"""The catalog as the site sees it: valid records, the taxonomy and the derived indexes every
page needs (node -> papers, lineage both ways, implemented methods), computed once."""

from __future__ import annotations

import logging
import re
from collections import defaultdict
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path

from specatlas.catalog.schema import Paper
from specatlas.catalog.taxonomy import FACETS, Taxonomy
from specatlas.catalog.validate import validate

log = logging.getLogger("mkdocs.plugins.specatlas")

_ARXIV_YYMM = re.compile(r"^(\d{2})(\d{2})\.\d{4,5}$")


@dataclass
class Catalog:
    root: Path
    papers: list[Paper]  # sorted by id
    taxonomy: Taxonomy
    implemented: frozenset[str] = field(default_factory=frozenset)  # paper ids with a reference implementation

    @cached_property
    def by_id(self) -> dict[str, Paper]:
        return {p.id: p for p in self.papers}

    @cached_property
    def runnable(self) -> list[tuple[str, Paper]]:
        """(method id, its record) of every method `specatlas run` runs by id: the registry's, a
        labelled variant (SAM-Decoding[EAGLE-2]) under its paper's record, then records naming an
        implementation the registry lacks. The one count of runnable methods every page shows."""
        out = [(spec.id, self.by_id[spec.record_id]) for spec in registry_methods() if spec.record_id in self.by_id]
        ids = {method_id for method_id, _ in out}
        return out + [(p.id, p) for p in self.papers if p.id in self.implemented and p.id not in ids]

    @cached_property
    def built_upon_by(self) -> dict[str, list[str]]:
        children: dict[str, list[str]] = defaultdict(list)
        for paper in self.papers:
            for parent in paper.builds_on:
                children[parent].append(paper.id)
        return dict(children)

    @cached_property
    def node_papers(self) -> dict[str, list[str]]:
        """Node id -> ids of papers tagged with the node or any node below it, in paper order."""
        out: dict[str, list[str]] = {n.id: [] for n in self.taxonomy.all_nodes()}
        for paper in self.papers:
            for node_id in self.expanded_tags(paper):
                out.setdefault(node_id, []).append(paper.id)
        return out

    def tags(self, paper: Paper, facet: str) -> list[str]:
        return list(getattr(paper.taxonomy, facet, None) or [])

    def expanded_tags(self, paper: Paper) -> list[str]:
        """The paper's tags plus all their ancestors, each once (computed once per paper: pages
        ask for them many times)."""
        cached = self._expanded.get(paper.id)
        if cached is None:
            cached = self._expanded[paper.id] = self._expand(paper)
        return list(cached)

    @cached_property
    def _expanded(self) -> dict[str, tuple[str, ...]]:
        return {}

    def _expand(self, paper: Paper) -> tuple[str, ...]:
        seen: dict[str, None] = {}
        for facet_id in FACETS:
            facet = self.taxonomy.facets.get(facet_id)
            for tag in self.tags(paper, facet_id):
                seen[tag] = None
                if facet and tag in facet.nodes:
                    seen.update(dict.fromkeys(facet.ancestors(tag)))
        return tuple(seen)

    def family(self, paper: Paper) -> str | None:
        """The drafting family: the top-level drafting node of the paper's first drafting tag."""
        facet = self.taxonomy.facets.get("drafting")
        first = next(iter(self.tags(paper, "drafting")), None)
        if facet is None or first not in facet.nodes:
            return None
        return ([first, *facet.ancestors(first)])[-1]


def newest_first(papers) -> list[Paper]:
    return sorted(papers, key=chronological, reverse=True)


def posted(paper: Paper) -> tuple[int, int | None]:
    """(year, month) the work appeared: the arXiv id's yymm when there is one, else year/month."""
    return _posted(paper.arxiv, paper.year, paper.month)


@lru_cache(maxsize=1 << 14)  # every page sorts or dates papers by it
def _posted(arxiv: str | None, year: int, month: int | None) -> tuple[int, int | None]:
    match = _ARXIV_YYMM.match(arxiv or "")
    if match:
        return 2000 + int(match.group(1)), int(match.group(2))
    return year, month


def chronological(paper: Paper) -> tuple[int, int, str]:
    """Sort key: when the work appeared, then id."""
    year, month = posted(paper)
    return year, month or 0, paper.id


_SUPERSCRIPTS = str.maketrans("0123456789+-n", "⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻ⁿ")


def short_name(paper: Paper) -> str:
    """A short name for the method: the title's head before a colon when it is short (Medusa,
    EAGLE-2; TeX superscripts as in S$^4$C shown as S⁴C), else the first alias, else the id."""
    head, colon, _ = paper.title.partition(":")
    if colon and len(head.strip()) <= 24:
        return re.sub(r"\$\^\{?([0-9+\-n]+)\}?\$", lambda m: m.group(1).translate(_SUPERSCRIPTS), head.strip())
    return paper.aliases[0] if paper.aliases else paper.id


def registry_methods() -> list:
    """The registry's methods that implement a paper (`MethodSpec`s, variants included); empty when
    the registry cannot be imported."""
    try:
        from specatlas.impls.registry import METHODS
    except ImportError:
        return []
    return [spec for spec in METHODS.values() if spec.has_paper]


def implemented_ids() -> frozenset[str]:
    """Paper ids with a method the reference-implementation registry runs (a variant's under its
    paper's); empty when the registry is missing or cannot be imported."""
    return frozenset(spec.record_id for spec in registry_methods())


def trainable_families() -> list[tuple[str, str]]:
    """(family name, paper id) of every head family `specatlas train` trains; empty when the
    families cannot be imported (they need torch: the engine extra)."""
    try:
        from specatlas.impls.families import FAMILIES
    except ImportError:
        return []
    return [(name, family.paper) for name, family in FAMILIES.items()]


def load_catalog(root: Path) -> Catalog:
    """The valid records under `root`. Invalid ones are left out with a warning (an error under
    `mkdocs build --strict`); `specatlas validate` explains them."""
    problems, records, taxonomy = validate(root=root)
    bad = sorted({p.file for p in problems})
    for shown in bad:
        log.warning("%s is invalid and left out of the site; run `specatlas validate %s`", shown, shown)
    bad_files = set(bad)
    papers = sorted((r.paper for r in records if r.paper and r.display not in bad_files), key=lambda p: p.id)
    explicit = {p.id for p in papers if p.implementation}
    return Catalog(root, papers, taxonomy, frozenset(explicit | (implemented_ids() & {p.id for p in papers})))
