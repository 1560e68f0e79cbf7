"""Build a JSON value that validates against a JSON Schema (for json_schema outputs and tool
arguments).

Supported: type (single or list), const, enum, default, examples, properties/required (every
declared property is filled), additionalProperties/minProperties,
items/prefixItems/minItems/maxItems/uniqueItems, string formats (date-time, date, time, email, uri,
uuid, ipv4, ipv6, hostname) and min/maxLength, numeric minimum/maximum/exclusive bounds/multipleOf,
allOf (merged), anyOf/oneOf (first non-null branch), local $ref (#/$defs/…, #/definitions/…). Not
supported: `pattern`, `not`, if/then/else. String values come from `hints` (property name -> text,
"*" for any property) when given, so tool arguments can reuse words from the user's message;
everything is deterministic."""

from __future__ import annotations

import math
from typing import Any

_FORMATS = {
    "date-time": "2026-01-01T00:00:00Z",
    "date": "2026-01-01",
    "time": "00:00:00Z",
    "email": "user@example.com",
    "uri": "https://example.com/",
    "url": "https://example.com/",
    "uuid": "00000000-0000-4000-8000-000000000000",
    "ipv4": "127.0.0.1",
    "ipv6": "::1",
    "hostname": "example.com",
}
_MAX_DEPTH = 12


def instance_for(
    schema: object,
    hints: dict | None = None,
    *,
    root: dict | None = None,
    name: str = "value",
    depth: int = 0,
    index: int = 0,
) -> Any:
    """A JSON value (whatever the schema's const, enum or default holds) that `schema` accepts."""
    if schema is True or schema is None or not isinstance(schema, dict):
        return name if index == 0 else f"{name}-{index}"
    root = schema if root is None else root
    schema = _resolve(schema, root)
    if "allOf" in schema:
        schema = _merge(
            [_resolve(s, root) for s in schema["allOf"]]
            + [{k: v for k, v in schema.items() if k != "allOf"}]
        )
    for key in ("anyOf", "oneOf"):
        if key in schema:
            branches = [_resolve(b, root) for b in schema[key]]
            chosen = next(
                (b for b in branches if b.get("type") != "null"), branches[0] if branches else {}
            )
            rest = {k: v for k, v in schema.items() if k != key}
            return instance_for(
                _merge([rest, chosen]), hints, root=root, name=name, depth=depth, index=index
            )
    given = _given(schema, index)
    if given is not _NOT_GIVEN:
        return given
    return _of_kind(schema, hints, root, name, depth, index)


_NOT_GIVEN = object()


def _given(schema: dict, index: int) -> Any:
    """The value the schema names itself (const, enum, default, first example), or _NOT_GIVEN."""
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][index % len(schema["enum"])]
    if "default" in schema and index == 0:
        return schema["default"]
    if isinstance(schema.get("examples"), list) and schema["examples"] and index == 0:
        return schema["examples"][0]
    return _NOT_GIVEN


def _of_kind(
    schema: dict, hints: dict | None, root: dict, name: str, depth: int, index: int
) -> Any:
    """A value made for the schema's type."""
    kind = _kind(schema)
    if kind == "object":
        return _object(schema, hints, root, depth)
    if kind == "array":
        return _array(schema, hints, root, name, depth)
    if kind == "integer":
        return int(_number(schema, integer=True) + index)
    if kind == "number":
        return _number(schema, integer=False) + index
    if kind == "boolean":
        return index % 2 == 0
    if kind == "null":
        return None
    return _string(schema, hints, name, index)


def _resolve(schema: object, root: dict) -> dict:
    seen = 0
    while isinstance(schema, dict) and "$ref" in schema and seen < 32:
        ref = schema["$ref"]
        if not ref.startswith("#"):
            return {k: v for k, v in schema.items() if k != "$ref"}
        target: Any = root  # a JSON pointer walk: each step may reach any JSON value
        for part in [p for p in ref[1:].split("/") if p]:
            target = target[part.replace("~1", "/").replace("~0", "~")]
        schema = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
        seen += 1
    return schema if isinstance(schema, dict) else {}


def _merge(schemas: list[dict]) -> dict:
    merged: dict = {}
    for schema in schemas:
        for key, value in schema.items():
            if key == "properties":
                merged["properties"] = {**merged.get("properties", {}), **value}
            elif key == "required":
                merged["required"] = list(dict.fromkeys(merged.get("required", []) + list(value)))
            else:
                merged.setdefault(key, value)
    return merged


def _kind(schema: dict) -> str:
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind:
        return kind
    if "properties" in schema or "additionalProperties" in schema:
        return "object"
    if "items" in schema or "prefixItems" in schema:
        return "array"
    if any(
        k in schema
        for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
    ):
        return "number"
    return "string"


def _object(schema: dict, hints: dict | None, root: dict, depth: int) -> dict:
    props = schema.get("properties") or {}
    required = schema.get("required") or []
    keys = list(props) if depth < _MAX_DEPTH else [k for k in props if k in required]
    keys += [k for k in required if k not in keys]
    value = {
        key: instance_for(props.get(key, {}), hints, root=root, name=key, depth=depth + 1)
        for key in keys
    }
    extra = schema.get("additionalProperties")
    while len(value) < int(schema.get("minProperties") or 0) and extra is not False:
        key = f"key{len(value) + 1}"
        value[key] = instance_for(
            extra if isinstance(extra, dict) else {}, hints, root=root, name=key, depth=depth + 1
        )
    return value


def _array(schema: dict, hints: dict | None, root: dict, name: str, depth: int) -> list:
    prefix = schema.get("prefixItems") or []
    low = int(schema.get("minItems") or 0)
    high = schema.get("maxItems")
    count = max(low, len(prefix), 1 if depth < _MAX_DEPTH else 0)
    if high is not None:
        count = min(count, int(high))
    items = schema.get("items") if isinstance(schema.get("items"), dict) else {}
    # only then vary items: a varied number could leave its bounds
    unique = bool(schema.get("uniqueItems"))
    out = []
    for i in range(count):
        sub, at = prefix[i] if i < len(prefix) else items, i if unique else 0
        out.append(instance_for(sub, hints, root=root, name=name, depth=depth + 1, index=at))
    return out


def _number(schema: dict, *, integer: bool) -> float:
    low, high = schema.get("minimum"), schema.get("maximum")
    ex_low, ex_high = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    step = schema.get("multipleOf")
    if isinstance(ex_low, bool):  # draft-04 boolean form
        ex_low = low if ex_low else None
    if isinstance(ex_high, bool):
        ex_high = high if ex_high else None
    nudge = step or (1 if integer else 0.5)
    if ex_low is not None:
        low = max(low, ex_low + nudge) if low is not None else ex_low + nudge
    if ex_high is not None:
        high = min(high, ex_high - nudge) if high is not None else ex_high - nudge
    if low is not None and high is not None:
        value = (low + high) / 2
    elif low is not None:
        value = low
    elif high is not None:
        value = min(high, 1)
    else:
        value = 1
    if step:
        value = math.ceil(value / step) * step
        if high is not None and value > high:
            value -= step
    if integer:
        value = math.ceil(value) if low is not None else math.floor(value)
        return int(value)
    return float(value)


def _string(schema: dict, hints: dict | None, name: str, index: int) -> str:
    fmt = schema.get("format")
    if fmt in _FORMATS:
        return _FORMATS[fmt]
    hints = hints or {}
    text = hints.get(name) or hints.get("*") or f"example {name}"
    if index:
        text = f"{text} {index}"
    low, high = int(schema.get("minLength") or 0), schema.get("maxLength")
    if len(text) < low:
        text += "x" * (low - len(text))
    if high is not None:
        text = text[: int(high)]
    return text
