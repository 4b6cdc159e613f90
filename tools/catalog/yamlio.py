"""YAML loading that keeps line numbers and refuses what plain `yaml.safe_load` lets through.

`load_yaml` returns the data plus a map from key path (('taxonomy', 'drafting', 0)) to the
1-based line where that value starts, so every problem can be reported as file:line.

Records are data typed by hand, so anchors/aliases and merge keys are refused: nothing needs them,
and nine nested aliases in 342 bytes expand to a billion values (a "billion laughs" bomb). Values
YAML cannot construct (an impossible date such as 2024-02-30) and absurd nesting are reported
like syntax errors, with their line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

Path_ = tuple  # a key path: str keys and int list indexes
MAX_DEPTH = 32  # records nest 3 levels; this only stops runaway input before Python's recursion limit


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


def shorten(text: str, limit: int = 60) -> str:
    """A value as quoted in a one-line message: `one_line`, at most `limit` characters."""
    text = " ".join(str(text).split())
    return one_line(text if len(text) <= limit else text[: limit - 1] + "…")


def one_line(text: str) -> str:
    """`text` as one line of output: line breaks and runs of spaces as one space, and what does not
    print (escape sequences, bidirectional overrides) written as its code."""
    text = " ".join(str(text).split())
    return text if text.isprintable() else "".join(c if c.isprintable() else f"\\u{ord(c):04x}" for c in text)


def _where(path: Path_) -> str:
    return ".".join(map(str, path)) or "(top)"


def _convert(loader: _Loader, node: Node, path: Path_, out: LoadedYaml, seen: set[int]):
    line = out.lines.get(path, node.start_mark.line + 1)
    if id(node) in seen:  # the composer hands back the anchored node itself for every alias
        raise YamlProblem(line, _where(path), "YAML aliases (*name) are not allowed in records; write the value out")
    seen.add(id(node))
    if len(path) > MAX_DEPTH:
        raise YamlProblem(line, _where(path), f"is nested more than {MAX_DEPTH} levels deep")
    out.lines[path] = node.start_mark.line + 1
    if isinstance(node, MappingNode):
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                raise YamlProblem(key_node.start_mark.line + 1, _where(path),
                                  "YAML merge keys (<<) are not allowed in records; write the fields out")
        result: dict = {}
        for key_node, value_node in node.value:
            key = _scalar(loader, key_node, path, out, seen) if isinstance(key_node, ScalarNode) else None
            if not isinstance(key, (str, int, float, bool)) or (isinstance(key, str) and not key.isprintable()):
                raise YamlProblem(key_node.start_mark.line + 1, ".".join(map(str, path)) or "(top)", "mapping keys must be plain text")
            if key in result:
                first = out.lines.get(path + (key,), "?")
                raise YamlProblem(
                    key_node.start_mark.line + 1,
                    ".".join(map(str, path + (key,))),
                    f"duplicate key (first set on line {first}); keep one",
                )
            out.lines[path + (key,)] = key_node.start_mark.line + 1
            result[key] = _convert(loader, value_node, path + (key,), out, seen)
            out.lines[path + (key,)] = key_node.start_mark.line + 1
        return result
    if isinstance(node, SequenceNode):
        return [_convert(loader, item, path + (i,), out, seen) for i, item in enumerate(node.value)]
    assert isinstance(node, ScalarNode)
    return _scalar(loader, node, path, out, seen)


def _scalar(loader: _Loader, node: ScalarNode, path: Path_, out: LoadedYaml, seen: set[int]):
    seen.add(id(node))
    try:
        value = loader.construct_object(node, deep=True)
    except (ValueError, OverflowError, TypeError, AttributeError, LookupError) as exc:  # 2024-02-30, 5000 digits, "!!timestamp "
        reason = shorten(str(exc), 80)
        raise YamlProblem(node.start_mark.line + 1, _where(path),
                          f"YAML cannot read {shorten(node.value)!r} ({reason}); quote it if it is text") from None
    if isinstance(value, bytes):
        raise YamlProblem(node.start_mark.line + 1, _where(path), "binary values (!!binary) are not allowed; write text")
    if not node.style:  # plain (unquoted) scalar; libyaml says '', PyYAML None
        problem = _yaml11_spelling(node.value, value)
        if problem:
            raise YamlProblem(node.start_mark.line + 1, _where(path), problem)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out.raw_numbers[path] = node.value
    return value


# What YAML 1.2 reads as booleans and numbers. PyYAML follows YAML 1.1, which also reads on/off/
# yes/no as booleans, 0x7e8 and 0o17 as integers and 1:20 as the sexagesimal 80: a record written
# for one reader would mean something else to another, so only the spellings both agree on pass.
_BOOLEAN = re.compile(r"true|True|TRUE|false|False|FALSE")
_INTEGER = re.compile(r"[-+]?(0|[1-9][0-9]*)")  # 017 is octal 15 in YAML 1.1, 17 in YAML 1.2
_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?|[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN)")


def _yaml11_spelling(text: str, value) -> str | None:
    """Why the plain scalar `text`, which YAML 1.1 read as `value`, must be written otherwise."""
    if isinstance(value, bool) and not _BOOLEAN.fullmatch(text):
        return f"{shorten(text)!r} is a boolean only in YAML 1.1; write {str(value).lower()}, or quote it if it is text"
    if isinstance(value, int) and not isinstance(value, bool) and not _INTEGER.fullmatch(text):
        return f"{shorten(text)!r} is read as the number {value} (YAML 1.1 hex, octal or base-60); write {value}, or quote it if it is text"
    if isinstance(value, float) and not _FLOAT.fullmatch(text):
        return f"{shorten(text)!r} is read as the number {value:g} (YAML 1.1 base-60 or digit groups); write {value:g}, or quote it if it is text"
    return None


def load_yaml(text: str) -> LoadedYaml:
    """Parse one YAML document. Raises YamlProblem with a line for syntax errors, duplicate
    keys and multi-document files."""
    loader = _Loader(text)
    try:
        root = loader.get_single_node()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 1
        message = f"not valid YAML: {shorten(exc.problem or exc.context or 'unreadable', 200)}"
        if exc.context_mark and exc.problem_mark and exc.context_mark.line != exc.problem_mark.line:
            message += f" (the construct started on line {exc.context_mark.line + 1})"
        raise YamlProblem(line, "(yaml)", message) from None
    except yaml.reader.ReaderError as exc:  # a control character: no mark, a position
        char = exc.character if isinstance(exc.character, int) else ord(exc.character[:1] or "\0")
        raise YamlProblem(text.count("\n", 0, exc.position) + 1, "(yaml)",
                          f"not valid YAML: the control character U+{char:04X} is not allowed") from None
    except yaml.YAMLError as exc:
        raise YamlProblem(1, "(yaml)", f"not valid YAML: {shorten(str(exc), 200)}") from None
    finally:
        loader.dispose()
    out = LoadedYaml(data=None)
    if root is None:
        return out
    try:
        out.data = _convert(loader, root, (), out, set())
    except yaml.constructor.ConstructorError as exc:
        mark = exc.problem_mark or exc.context_mark
        raise YamlProblem(mark.line + 1 if mark else 1, "(yaml)", f"cannot read value: {exc.problem}") from None
    return out
