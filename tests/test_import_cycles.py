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


# train-curve is train and train-eval run for each data size: it reuses their training and
# measuring steps. The list may only shrink.
COMMAND_IMPORTS_LEFT = {"specatlas.train_curve": {"specatlas.train", "specatlas.train_eval"}}


def test_commands_do_not_import_one_another():
    """A command's module imports libraries and `specatlas.cli` (errors, argument checks), never
    another command's: what two commands share belongs in a library or in cli."""
    from specatlas.cli import COMMANDS

    graph, commands = module_imports(), {module for module, _ in COMMANDS.values()}
    found = {module: {other for other in graph[module] if other in commands} for module in sorted(commands)}
    found = {module: others for module, others in found.items() if others}
    assert found == COMMAND_IMPORTS_LEFT
