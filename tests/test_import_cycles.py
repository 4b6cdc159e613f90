"""No import cycles inside specatlas, counting imports inside functions too: a cycle hidden
behind a function-level import is still a cycle (the shared piece belongs in one module)."""

import ast

from specatlas.paths import repo_root

PACKAGES = {"tools": "specatlas", "reference_impls": "specatlas.impls"}


def module_imports() -> dict[str, set[str]]:
    root = repo_root()
    files = {}
    for folder, package in PACKAGES.items():
        for path in (root / folder).rglob("*.py"):
            parts = path.relative_to(root / folder).with_suffix("").parts
            files[".".join((package, *(p for p in parts if p != "__init__")))] = path
    graph = {}
    for name, path in files.items():
        imported = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                imported |= {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
        graph[name] = {other for other in imported if other in files and other != name}
    return graph


def test_no_import_cycles():
    graph = module_imports()
    for start in graph:
        stack, seen = [(start, (start,))], set()
        while stack:
            module, path = stack.pop()
            for other in graph[module]:
                assert other != start, "import cycle: " + " -> ".join((*path, start))
                if other not in seen:
                    seen.add(other)
                    stack.append((other, (*path, other)))
