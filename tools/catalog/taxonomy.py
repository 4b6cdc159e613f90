"""The taxonomy: one YAML file per facet in taxonomy/, hierarchical nodes with stable ids."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from specatlas.catalog.yamlio import YamlProblem, load_yaml

FACETS = ("drafting", "verification", "alignment", "scope")
_NODE_ID = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


@dataclass(frozen=True)
class Node:
    id: str
    facet: str
    name: str
    description: str
    parent: str | None
    reserved: str | None  # why an unused node is kept, if it is
    line: int


@dataclass
class Facet:
    id: str
    name: str
    description: str
    nodes: dict[str, Node] = field(default_factory=dict)

    def children(self, node_id: str | None) -> list[Node]:
        return [n for n in self.nodes.values() if n.parent == node_id]

    def ancestors(self, node_id: str) -> list[str]:
        chain, parent = [], self.nodes[node_id].parent
        while parent:
            chain.append(parent)
            parent = self.nodes[parent].parent
        return chain


@dataclass
class Taxonomy:
    facets: dict[str, Facet]
    problems: list[tuple[Path, int, str, str]]  # (file, line, field, message)

    def node(self, node_id: str) -> Node | None:
        for facet in self.facets.values():
            if node_id in facet.nodes:
                return facet.nodes[node_id]
        return None

    def all_nodes(self) -> list[Node]:
        return [n for f in self.facets.values() for n in f.nodes.values()]


def load_taxonomy(directory: Path) -> Taxonomy:
    facets: dict[str, Facet] = {}
    problems: list[tuple[Path, int, str, str]] = []
    seen: dict[str, Path] = {}
    for facet_id in FACETS:
        path = directory / f"{facet_id}.yaml"
        if not path.exists():
            problems.append((path, 1, "(file)", f"missing taxonomy facet file {path.name}"))
            continue
        try:
            loaded = load_yaml(path.read_text(encoding="utf-8"))
        except YamlProblem as exc:
            problems.append((path, exc.line, exc.field, exc.message))
            continue
        data = loaded.data if isinstance(loaded.data, dict) else {}
        facet = Facet(facet_id, str(data.get("name", facet_id)), str(data.get("description", "")))
        if data.get("facet") != facet_id:
            problems.append((path, loaded.line_of(("facet",)), "facet", f"must be '{facet_id}' (the file name)"))
        for index, raw in enumerate(data.get("nodes") or []):
            line = loaded.line_of(("nodes", index))
            if not isinstance(raw, dict):
                problems.append((path, line, f"nodes[{index}]", "must be a mapping with id, name, description"))
                continue
            node_id = str(raw.get("id", ""))
            unknown = set(raw) - {"id", "name", "description", "parent", "reserved"}
            if unknown:
                problems.append((path, line, f"nodes[{index}]", f"unknown keys {sorted(unknown)}"))
            if not _NODE_ID.match(node_id):
                problems.append((path, line, f"nodes[{index}].id", f"'{node_id}' is not a kebab-case id"))
                continue
            if node_id in seen:
                problems.append((path, line, f"nodes[{index}].id", f"'{node_id}' is already defined in {seen[node_id].name}"))
                continue
            seen[node_id] = path
            for key in ("name", "description"):
                if not str(raw.get(key) or "").strip():
                    problems.append((path, line, f"{node_id}.{key}", "is empty; every node is named and described"))
            facet.nodes[node_id] = Node(
                node_id, facet_id, str(raw.get("name", "")).strip(), " ".join(str(raw.get("description", "")).split()),
                raw.get("parent"), raw.get("reserved"), line,
            )
        for node in facet.nodes.values():
            if node.parent is not None and node.parent not in facet.nodes:
                problems.append((path, node.line, f"{node.id}.parent", f"'{node.parent}' is not a node of this facet"))
        facets[facet_id] = facet
        for node in facet.nodes.values():
            if node.parent in facet.nodes and node.id in _ancestors_safe(facet, node.id):
                problems.append((path, node.line, f"{node.id}.parent", "parent chain loops back to this node"))
    return Taxonomy(facets, problems)


def _ancestors_safe(facet: Facet, node_id: str) -> list[str]:
    chain, parent = [], facet.nodes[node_id].parent
    while parent in facet.nodes and parent not in chain:
        chain.append(parent)
        parent = facet.nodes[parent].parent
    return chain


@lru_cache(maxsize=4)
def cached_taxonomy(directory: Path) -> Taxonomy:
    return load_taxonomy(directory)
