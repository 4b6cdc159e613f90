"""No import cycles inside specatlas, counting imports inside functions too: a cycle hidden
behind a function-level import is still a cycle (the shared piece belongs in one module)."""

import ast
from pathlib import Path

from specatlas.paths import repo_root

PACKAGES = {"tools": "specatlas", "reference_impls": "specatlas.impls"}


def imported(tree: ast.AST, module: str, is_package: bool = False) -> set[str]:
    """Every module name `module`'s source imports, wherever the import stands (in a function too):
    `import a.b`, `from a import b` (a and a.b), relative imports resolved, and
    `importlib.import_module` / `__import__` of a literal name."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = module.split(".")[: len(module.split(".")) - node.level + is_package]
                base = ".".join(parts + ([base] if base else []))
            names |= {base, *(f"{base}.{alias.name}" for alias in node.names)}
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str) and _callee(node.func) in ("import_module", "__import__"):
            names.add(node.args[0].value)
    return names - {""}


def _callee(func: ast.expr) -> str:
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def module_files() -> dict[str, Path]:
    """specatlas's modules by import name, and their files."""
    root = repo_root()
    files = {}
    for folder, package in PACKAGES.items():
        for path in (root / folder).rglob("*.py"):
            parts = path.relative_to(root / folder).with_suffix("").parts
            files[".".join((package, *(p for p in parts if p != "__init__")))] = path
    return files


def module_imports() -> dict[str, set[str]]:
    """Each specatlas module -> the specatlas modules it imports (see `imported`)."""
    files = module_files()
    graph = {}
    for name, path in files.items():
        names = imported(ast.parse(path.read_text(encoding="utf-8")), name, path.name == "__init__.py")
        graph[name] = {other for other in names if other in files and other != name}
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
