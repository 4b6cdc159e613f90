"""YAML loading that keeps line numbers and refuses what plain `yaml.safe_load` lets through.

`load_yaml` returns the data plus a map from key path (('taxonomy', 'drafting', 0)) to the
1-based line where that value starts, so every problem can be reported as file:line.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

Path_ = tuple  # a key path: str keys and int list indexes


class YamlProblem(Exception):
    def __init__(self, line: int, field: str, message: str):
        super().__init__(message)
        self.line, self.field, self.message = line, field, message


@dataclass
class LoadedYaml:
    data: object
    lines: dict[Path_, int] = field(default_factory=dict)
    # key path -> the scalar's original text where YAML read an unquoted number (for hints)
    raw_numbers: dict[Path_, str] = field(default_factory=dict)

    def line_of(self, path: Path_) -> int:
        """Line of the deepest known prefix of `path` (1 when nothing is known)."""
        path = tuple(path)
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return self.lines.get((), 1)


# libyaml's parser keeps the same marks and is several times faster on the full catalog.
class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    pass


def _convert(loader: _Loader, node: Node, path: Path_, out: LoadedYaml):
    out.lines[path] = node.start_mark.line + 1
    if isinstance(node, MappingNode):
        loader.flatten_mapping(node)
        result: dict = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            if not isinstance(key, (str, int, float, bool)) or key is None:
                raise YamlProblem(key_node.start_mark.line + 1, ".".join(map(str, path)) or "(top)", "mapping keys must be plain text")
            if key in result:
                first = out.lines.get(path + (key,), "?")
                raise YamlProblem(
                    key_node.start_mark.line + 1,
                    ".".join(map(str, path + (key,))),
                    f"duplicate key (first set on line {first}); keep one",
                )
            out.lines[path + (key,)] = key_node.start_mark.line + 1
            result[key] = _convert(loader, value_node, path + (key,), out)
            out.lines[path + (key,)] = key_node.start_mark.line + 1
        return result
    if isinstance(node, SequenceNode):
        return [_convert(loader, item, path + (i,), out) for i, item in enumerate(node.value)]
    assert isinstance(node, ScalarNode)
    value = loader.construct_object(node, deep=True)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and not node.style:  # plain (unquoted) scalar; libyaml says '', PyYAML None
        out.raw_numbers[path] = node.value
    return value


def load_yaml(text: str) -> LoadedYaml:
    """Parse one YAML document. Raises YamlProblem with a line for syntax errors, duplicate
    keys and multi-document files."""
    loader = _Loader(text)
    try:
        root = loader.get_single_node()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 1
        message = f"not valid YAML: {exc.problem or exc.context}"
        if exc.context_mark and exc.problem_mark and exc.context_mark.line != exc.problem_mark.line:
            message += f" (the construct started on line {exc.context_mark.line + 1})"
        raise YamlProblem(line, "(yaml)", message) from None
    except yaml.YAMLError as exc:
        raise YamlProblem(1, "(yaml)", f"not valid YAML: {exc}") from None
    finally:
        loader.dispose()
    out = LoadedYaml(data=None)
    if root is None:
        return out
    try:
        out.data = _convert(loader, root, (), out)
    except yaml.constructor.ConstructorError as exc:
        mark = exc.problem_mark or exc.context_mark
        raise YamlProblem(mark.line + 1 if mark else 1, "(yaml)", f"cannot read value: {exc.problem}") from None
    return out
