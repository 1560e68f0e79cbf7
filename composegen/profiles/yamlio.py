"""Safe YAML loading that remembers the line of every key, so errors can say `file:line: field`."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from composegen.errors import BadInput

Path_ = tuple  # a key path such as ("vllm", "max-num-batched-tokens")


@dataclass
class Marked:
    """A loaded document plus where each key path was written (file, 1-based line)."""

    data: Any
    marks: dict[tuple, tuple[str, int]] = field(default_factory=dict)

    def where(self, path: tuple) -> tuple[str, int] | None:
        """The mark of `path`, or of its nearest marked parent."""
        path = tuple(path)
        while True:
            if path in self.marks:
                return self.marks[path]
            if not path:
                return None
            path = path[:-1]


INT_LIMIT = 2**63 - 1  # what compose and the engine (Go int64) can hold; beyond it is a typo or an attack

_PLAIN_TAGS = {f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null")} | {"!"}


class _StrictLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """The safe loader (libyaml's when present: render --check parses every profile, so speed shows);
    merge keys and duplicates are refused in _to_python."""


MAX_PROFILE_BYTES = 1 << 20  # a profile is a page of YAML; a megabyte is a mistake or an attack
MAX_DEPTH = 64


def load_marked(path: Path, display: str) -> Marked:
    try:
        if path.stat().st_size > MAX_PROFILE_BYTES:
            raise BadInput(f"{display}: larger than {MAX_PROFILE_BYTES >> 20} MiB; not a profile")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BadInput(f"{display}: no such file") from None
    except OSError as exc:
        raise BadInput(f"{display}: cannot read ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        raise BadInput(f"{display}: not UTF-8 text ({exc.reason})") from None
    return loads_marked(text, display)


def loads_marked(text: str, display: str) -> Marked:
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


def _to_python(node: yaml.Node, path: tuple, marked: Marked, display: str, loader, seen: set) -> Any:
    line = node.start_mark.line + 1
    if len(path) > MAX_DEPTH:
        raise BadInput(f"{display}:{line}: {'.'.join(map(str, path[:3]))}…: nested deeper than {MAX_DEPTH} levels")
    # An alias is the same node again: refused, since expanding nested aliases can take exponential memory
    # (a few lines can ask for gigabytes) and a profile has `extends:` for reuse.
    if id(node) in seen:
        raise BadInput(
            f"{display}:{line}: {'.'.join(map(str, path)) or 'document'}: "
            "YAML aliases (*name) are not supported; use extends:"
        )
    seen.add(id(node))
    marked.marks.setdefault(path, (display, line))
    if isinstance(node, yaml.MappingNode):
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                raise BadInput(
                    f"{display}:{key_node.start_mark.line + 1}: YAML merge keys (<<) are not supported; use extends:"
                )
            key = loader.construct_object(key_node)
            if not isinstance(key, str):
                raise BadInput(f"{display}:{key_node.start_mark.line + 1}: keys must be strings, got {key!r}")
            if key in out:
                raise BadInput(f"{display}:{key_node.start_mark.line + 1}: {'.'.join((*path, key))}: duplicate key")
            child = (*path, key)
            marked.marks[child] = (display, key_node.start_mark.line + 1)
            out[key] = _to_python(value_node, child, marked, display, loader, seen)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_to_python(item, (*path, i), marked, display, loader, seen) for i, item in enumerate(node.value)]
    if node.tag in _PLAIN_TAGS:
        where = f"{display}:{line}: {'.'.join(map(str, path)) or 'document'}"
        try:
            value = loader.construct_object(node)
        except (yaml.YAMLError, ValueError) as exc:  # ValueError: an int past Python's digit limit
            raise BadInput(f"{where}: {str(exc).splitlines()[0]}") from None
        return _sane_number(value, where)
    raise BadInput(f"{display}:{line}: {'.'.join(map(str, path))}: YAML tag {node.tag} is not allowed")


def _sane_number(value: Any, where: str) -> Any:
    """NaN and infinities are not values any profile field means; integers stop at int64."""
    if isinstance(value, float) and not math.isfinite(value):
        raise BadInput(f"{where}: {value} is not a number a profile can use (NaN and infinities are refused)")
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > INT_LIMIT:
        raise BadInput(f"{where}: {len(str(abs(value)))}-digit integer is out of range (at most 2**63-1)")
    return value
