"""Safe YAML loading that remembers the line of every key, so errors can say `file:line: field`."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from composegen.errors import BadInput
from composegen.project import read_input

# a path into the document (keys and list indexes) -> (file as shown, line)
Marks = dict[tuple, tuple[str, int]]


@dataclass
class Marked:
    """A loaded document plus where each key path was written (file, 1-based line)."""

    data: Any
    marks: Marks = field(default_factory=dict)

    def where(self, path: tuple) -> tuple[str, int] | None:
        """The mark of `path`, or of its nearest marked parent."""
        path = tuple(path)
        while True:
            if path in self.marks:
                return self.marks[path]
            if not path:
                return None
            path = path[:-1]


# what compose and the engine (Go int64) can hold; beyond it is a typo or an attack
INT_LIMIT = 2**63 - 1

_PLAIN_TAGS = {f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null")} | {"!"}
_COLLECTION_TAGS = {"tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"}
# 2**63 in binary is 64 digits and a prefix; any longer integer text is out of range
MAX_INT_TEXT = 72


class _StrictLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """The safe loader (libyaml's when present: render --check parses every profile, so speed
    shows); merge keys and duplicates are refused in _to_python."""


MAX_PROFILE_BYTES = 1 << 20  # a profile is a page of YAML; a megabyte is a mistake or an attack
MAX_DEPTH = 64
_REUSE = "; use extends:"  # a profile's way to reuse another's keys


def load_marked(path: Path, display: str) -> Marked:
    noun, rule = "a project file", f"{display} is a regular file at the project root"
    if "/" in display:  # a profile (its path), not composegen.yaml or edge.yaml at the root
        noun, rule = "a profile", "profiles are regular files inside profiles/"
    try:
        data = read_input(path, display, MAX_PROFILE_BYTES, noun, rule)
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInput(f"{display}: not UTF-8 text ({exc.reason})") from None
    return loads_marked(text, display)


# Characters YAML 1.1 reads as line breaks although no editor shows one (a value would change
# silently, a comment would end early), and those it refuses with a two-line error: named here
# with their line.
_YAML_BREAKS = {
    "\x85": "U+0085 (NEXT LINE)",
    "\u2028": "U+2028 (LINE SEPARATOR)",
    "\u2029": "U+2029 (PARAGRAPH SEPARATOR)",
}
_UNREADABLE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x84\x86-\x9f\ud800-\udfff\ufffe\uffff]")
_BREAKS = re.compile("[\x85\u2028\u2029]")


def _refuse_invisible(text: str, display: str) -> None:
    for found in (_BREAKS.search(text), _UNREADABLE.search(text)):
        if found:
            line = text.count("\n", 0, found.start()) + 1
            char = found[0]
            if char in _YAML_BREAKS:
                raise BadInput(
                    f"{display}:{line}: {_YAML_BREAKS[char]}: YAML reads it as a line break and would change the "
                    f"text; write it as \\u{ord(char):04x} inside a double-quoted string"
                )
            name = "NUL" if char == "\x00" else f"U+{ord(char):04X}"
            raise BadInput(
                f"{display}:{line}: {name}: control characters are not allowed in a profile"
            )


def loads_marked(text: str, display: str) -> Marked:
    _refuse_invisible(text, display)
    try:
        node = yaml.compose(text, Loader=_StrictLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 0
        raise BadInput(f"{display}:{line}: invalid YAML: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise BadInput(f"{display}: invalid YAML: {exc}") from None
    except RecursionError:
        raise BadInput(f"{display}: invalid YAML: nested too deeply") from None
    marked = Marked(data=None)
    if node is None:
        marked.data = {}
        return marked
    loader = _StrictLoader("")
    marked.data = _to_python(node, (), marked, display, loader, set())
    return marked


def _to_python(
    node: yaml.Node,
    path: tuple,
    marked: Marked,
    display: str,
    loader: _StrictLoader,
    seen: set[int],
) -> Any:
    line = node.start_mark.line + 1
    if len(path) > MAX_DEPTH:
        raise BadInput(
            f"{display}:{line}: {'.'.join(map(str, path[:3]))}…: nested deeper than {MAX_DEPTH} levels"
        )
    # An alias is the same node again: refused, since expanding nested aliases can take
    # exponential memory (a few lines can ask for gigabytes); a profile has `extends:` for reuse.
    if id(node) in seen:
        raise BadInput(
            f"{display}:{line}: {'.'.join(map(str, path)) or 'document'}: "
            f"YAML aliases (*name) are not supported{_REUSE * ('/' in display)}"
        )
    seen.add(id(node))
    marked.marks.setdefault(path, (display, line))
    if isinstance(node, yaml.MappingNode | yaml.SequenceNode) and node.tag not in _COLLECTION_TAGS:
        raise BadInput(
            f"{display}:{line}: {'.'.join(map(str, path)) or 'document'}: YAML tag {node.tag} is not allowed"
        )
    if isinstance(node, yaml.MappingNode):
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                raise BadInput(
                    f"{display}:{key_node.start_mark.line + 1}: YAML merge keys (<<) are not supported"
                    + _REUSE * ("/" in display)
                )
            key = loader.construct_object(key_node)
            if not isinstance(key, str):
                raise BadInput(
                    f"{display}:{key_node.start_mark.line + 1}: keys must be strings, got {key!r}"
                )
            if key in out:
                raise BadInput(
                    f"{display}:{key_node.start_mark.line + 1}: {'.'.join((*path, key))}: duplicate key"
                )
            child = (*path, key)
            marked.marks[child] = (display, key_node.start_mark.line + 1)
            out[key] = _to_python(value_node, child, marked, display, loader, seen)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [
            _to_python(item, (*path, i), marked, display, loader, seen)
            for i, item in enumerate(node.value)
        ]
    if node.tag in _PLAIN_TAGS:
        where = f"{display}:{line}: {'.'.join(map(str, path)) or 'document'}"
        _plain_as_written(node, loader, where)
        try:
            value = loader.construct_object(node)
        except (yaml.YAMLError, ValueError) as exc:  # ValueError: an int past Python's digit limit
            raise BadInput(f"{where}: {str(exc).splitlines()[0]}") from None
        return _sane_number(value, where)
    raise BadInput(
        f"{display}:{line}: {'.'.join(map(str, path))}: YAML tag {node.tag} is not allowed"
    )


def _plain_as_written(node: yaml.Node, loader: _StrictLoader, where: str) -> None:
    """A scalar means what it says: an explicit tag other than `!!str` (`!!null 5`, `!!int "5"`) is
    refused, and an integer too long to be in range is refused before it is built (YAML 1.1 hex,
    octal, binary and base-60 integers have no digit limit, and base-60 costs quadratic time)."""
    plain = getattr(node, "style", None) in (None, "")
    implicit = loader.resolve(yaml.ScalarNode, node.value, (plain, not plain))
    if node.tag != implicit and node.tag not in ("tag:yaml.org,2002:str", "!"):
        raise BadInput(f"{where}: YAML tag {node.tag} is not allowed (write the value itself)")
    if node.tag == "tag:yaml.org,2002:int" and len(node.value.replace("_", "")) > MAX_INT_TEXT:
        raise BadInput(
            f"{where}: a {len(node.value)}-character integer is out of range (at most 2**63-1)"
        )


def _sane_number(value: Any, where: str) -> Any:
    """NaN and infinities are not values any profile field means; integers stop at int64."""
    if isinstance(value, float) and not math.isfinite(value):
        raise BadInput(
            f"{where}: {value} is not a number a profile can use (NaN and infinities are refused)"
        )
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > INT_LIMIT:
        raise BadInput(
            f"{where}: a {value.bit_length()}-bit integer is out of range (at most 2**63-1)"
        )
    return value
