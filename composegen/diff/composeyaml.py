"""Compose YAML text as composegen's diff reads it: bounded in size, aliases refused (a few lines of
nested aliases expand to gigabytes when the diff walks them), compose's `!reset`/`!override` tags
taken as their plain values, and every service's keys checked for shapes compose would refuse, so
comparing never meets them. Problems are BadInput `label:line: field: problem`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from composegen.diff.normalise import normalise_service
from composegen.errors import BadInput

MAX_COMPOSE_CHARS = 1 << 20  # a compose file is a few kB; a megabyte is a mistake or a bomb


def load_yaml(text: str, label: str) -> Any:
    """YAML text → data, bounded, aliases refused (a few lines of nested aliases expand to gigabytes
    when the diff walks them); errors become `label:line: yaml: problem`."""
    if len(text) > MAX_COMPOSE_CHARS:
        raise BadInput(
            f"{label}:1: diff input: larger than {MAX_COMPOSE_CHARS >> 20} MiB; not a compose file"
        )
    try:
        return yaml.load(text, Loader=_ComposeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line = mark.line + 1 if mark is not None else 1
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise BadInput(f"{label}:{line}: yaml: {problem}") from None
    except RecursionError:
        raise BadInput(f"{label}:1: yaml: nested too deeply") from None


def parse_compose_text(text: str, label: str) -> dict:
    """Compose YAML text → dict (load_yaml), with every service's shape checked."""
    data = load_yaml(text, label)
    if not isinstance(data, dict):
        kind = "an empty document" if data is None else type(data).__name__
        raise BadInput(f"{label}:1: top level: expected a Compose mapping, got {kind}")
    services = data.get("services", {})
    if services is not None and not isinstance(services, dict):
        raise BadInput(
            f"{label}:{_line_of(text, 'services')}: services: expected a mapping of services"
        )
    for name, service in (services or {}).items():
        if service is not None and not isinstance(service, dict):
            raise BadInput(
                f"{label}:{_line_of(text, 'services', name)}: services.{name}: expected a mapping"
            )
        _check_service_shape(service or {}, text, label, str(name))
    return data


_SHAPE_ERRORS = (TypeError, AttributeError, ValueError, KeyError, IndexError, ArithmeticError)


def _check_service_shape(service: dict, text: str, label: str, name: str) -> None:
    """A hand-written service whose keys have shapes compose would refuse (`ports: true`) is bad
    input naming the key, found once here so that comparing never meets it."""
    try:
        normalise_service(service)
        return
    except _SHAPE_ERRORS:
        pass
    for key, value in service.items():
        try:
            normalise_service(
                {key: value, "image": service.get("image")} if key != "image" else {key: value}
            )
        except _SHAPE_ERRORS:
            line = _line_of(text, "services", name, key)
            raise BadInput(
                f"{label}:{line}: services.{name}.{key}: not a value compose accepts here"
            ) from None
    raise BadInput(
        f"{label}:{_line_of(text, 'services', name)}: services.{name}: keys that do not fit together"
    )


class _ComposeLoader(yaml.SafeLoader):
    """SafeLoader that accepts the compose merge tags `!reset` / `!override` as their plain values,
    and refuses aliases (`*name`)."""

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            mark = self.peek_event().start_mark
            raise yaml.composer.ComposerError(
                None,
                None,
                "YAML aliases (*name) are not supported in diff inputs; write the value out",
                mark,
            )
        return super().compose_node(parent, index)


MAX_INT_TEXT = 72  # an integer written longer than 2**63 in binary is out of range for compose too


def _bounded_int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int:
    """YAML 1.1 hex, octal, binary and base-60 integers have no digit limit (base-60 costs quadratic
    time): refused by length before they are built, and kept within int64 after."""
    too_long = len(node.value.replace("_", "")) > MAX_INT_TEXT  # not built: its time is quadratic
    value = 0 if too_long else loader.construct_yaml_int(node)
    if too_long or abs(value) > 2**63 - 1:
        raise yaml.constructor.ConstructorError(
            None, None, "integer out of range (at most 2**63-1)", node.start_mark
        )
    return value


def _finite_float(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> float:
    value = loader.construct_yaml_float(node)
    if value != value or value in (float("inf"), float("-inf")):
        raise yaml.constructor.ConstructorError(
            None, None, "NaN and infinities are not compose values", node.start_mark
        )
    return value


_ComposeLoader.add_constructor("tag:yaml.org,2002:int", _bounded_int)
_ComposeLoader.add_constructor("tag:yaml.org,2002:float", _finite_float)

for _tag in ("!reset", "!override"):
    _ComposeLoader.add_constructor(
        _tag,
        lambda loader, node: (
            loader.construct_mapping(node)
            if isinstance(node, yaml.MappingNode)
            else loader.construct_sequence(node)
            if isinstance(node, yaml.SequenceNode)
            else loader.construct_scalar(node)  # type: ignore[arg-type]
        ),
    )


def _line_of(text: str, *keys: str) -> int:
    """1-based line of a nested key (for error messages); 1 when it cannot be found."""
    node = yaml.compose(text, Loader=_ComposeLoader)
    for key in keys:
        if not isinstance(node, yaml.MappingNode):
            return 1
        match = next(((k, v) for k, v in node.value if k.value == key), None)
        if match is None:
            return 1
        key_node, node = match
    return key_node.start_mark.line + 1 if keys else 1


def read_file(path: Path, spec: str) -> str:
    """The text of a diff input file (bounded, UTF-8)."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_COMPOSE_CHARS + 1)  # bounded, whatever the file is
        if len(data) > MAX_COMPOSE_CHARS:
            raise BadInput(
                f"{spec}:1: diff input: larger than {MAX_COMPOSE_CHARS >> 20} MiB; not a compose file"
            )
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInput(f"{spec}: diff input: not UTF-8 text ({exc.reason})") from None
    except OSError as exc:
        raise BadInput(f"{spec}: diff input: cannot read ({exc.strerror})") from None
