"""Layers import downward only, imports inside functions included: the engine knows no drafter,
family or method (they compose it); the bench library knows no other command and not the site;
no command knows another, and the site's library modules know no command."""

import ast

import pytest

from specatlas.cli import COMMANDS
from tests.test_import_cycles import imported, module_imports

ENGINE = "specatlas.impls.engine"
ABOVE_ENGINE = ("specatlas.impls.drafters", "specatlas.impls.families", "specatlas.impls.methods",
                "specatlas.impls.registry")
BENCH, SITE = "specatlas.bench", "specatlas.site"
ABOVE_BENCH = ("specatlas.cli", SITE,
               *(module for module, _ in COMMANDS.values() if not module.startswith(BENCH + ".")))


def under(module: str, packages) -> bool:
    return any(module == package or module.startswith(package + ".") for package in packages)


COMMAND_MODULES = {module for module, _ in COMMANDS.values()}


def upward(layer: str, above) -> list[str]:
    """`module -> imported` for each import of a module in `layer` from a module in `above`; a
    command's own module in the layer (`specatlas bench`'s, `results check`'s) may import the CLI's
    shared checks, as every command does."""
    return sorted(f"{module} -> {other}" for module, others in module_imports().items() if under(module, [layer])
                  for other in others if under(other, above)
                  and not (module in COMMAND_MODULES and other == "specatlas.cli"))


@pytest.mark.parametrize("layer, above", [(ENGINE, ABOVE_ENGINE), (BENCH, ABOVE_BENCH)],
                         ids=["engine", "bench"])
def test_no_layer_imports_upward(layer, above):
    assert not upward(layer, above), f"{layer} imports from above it: " + "; ".join(upward(layer, above))


def command_imports(graph: dict[str, set[str]]) -> list[str]:
    """`module -> imported` for each import of a command's module from another command's, or from a
    module of the site that is no command (its pages, timeline, benchmark: libraries below `specatlas site`)."""
    importers = COMMAND_MODULES | {module for module in graph if under(module, [SITE])}
    return sorted(f"{module} -> {other}" for module in importers for other in graph.get(module, ())
                  if other in COMMAND_MODULES)


def test_no_command_imports_another():
    """A command's module imports libraries and `specatlas.cli` (errors, argument checks), never
    another command's: what two commands share belongs in a library below them (`specatlas.head_training`,
    `specatlas.bench_arguments`) or in cli. The site's modules are such libraries: what they share with
    a command (BibTeX, the recall estimate, the MkDocs build) is a library both import
    (`specatlas.catalog.bibtex`, `specatlas.catalog.capture_recapture`, `specatlas.site.mkdocs_build`)."""
    found = command_imports(module_imports())
    assert not found, "a command (or the site) imports a command (move what they share to a library): " + "; ".join(found)


def test_a_command_importing_another_is_seen():
    graph = {"specatlas.gpu_check": {"specatlas.bench.run", "specatlas.cli", "specatlas.bench_arguments"},
             "specatlas.train_curve": {"specatlas.head_training", "specatlas.train_eval"}, "specatlas.head_training": {"specatlas.cli"},
             "specatlas.site.pages": {"specatlas.bib", "specatlas.catalog.bibtex"},
             "specatlas.site.timeline": {"specatlas.catalog.capture_recapture"},
             "specatlas.site.build": {"specatlas.site.mkdocs_build"}}
    assert command_imports(graph) == ["specatlas.gpu_check -> specatlas.bench.run",
                                      "specatlas.site.pages -> specatlas.bib",
                                      "specatlas.train_curve -> specatlas.train_eval"]


def test_every_import_form_is_seen():
    """An import hidden in a function, a relative one or an `importlib` call still counts."""
    source = """
import specatlas.impls.engine.kv
def lazy():
    from specatlas.impls.families import FAMILIES
    from .. import methods
    from .drafting import Draft
    importlib.import_module("specatlas.impls.drafters.model_free.retrieval")
"""
    names = imported(ast.parse(source), "specatlas.impls.engine.decoding")
    assert {"specatlas.impls.engine.kv", "specatlas.impls.families", "specatlas.impls.methods",
            "specatlas.impls.engine.drafting", "specatlas.impls.drafters.model_free.retrieval"} <= names
    assert under("specatlas.impls.families.checkpoints", ABOVE_ENGINE) and not under("specatlas.impls.engine.kv", ABOVE_ENGINE)
    assert "specatlas.run_command" in ABOVE_BENCH and "specatlas.bench.results" not in ABOVE_BENCH
