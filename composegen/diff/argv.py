"""The `vllm serve` argv, normalised with the flag catalog of the side's vLLM version
(vllm/catalog.py; 0.33.0 when a file does not say, or names a version without a catalog), for
`composegen.diff.semantic`. The spellings that count as one are listed in docs/diff.md."""

from __future__ import annotations

import dataclasses
import json
import re
import shlex
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from composegen.units import parse_human_int
from composegen.vllm.catalog import FlagError, load_catalog

CATALOG_VERSION = "0.33.0"  # the default: the newest catalog composegen ships
_VLLM_MODULES = {"vllm.entrypoints.openai.api_server", "vllm.entrypoints.api_server"}
_NEGATIVE_NUMBER = re.compile(r"-\.?\d")


@dataclass(frozen=True)
class FlagSpec:
    name: str  # canonical spelling: the first long option (the positive one for booleans)
    takes_value: bool
    nargs: Any
    type: str | None
    append: bool
    negative: bool  # this spelling sets a boolean to false (--no-x, --disable-x)
    default: Any


@lru_cache(maxsize=8)
def flag_catalog(version: str = CATALOG_VERSION) -> dict[str, FlagSpec]:
    """Every option spelling of `vllm serve` (aliases included) → its FlagSpec."""
    try:
        catalog = load_catalog(version)
    except FlagError:  # no catalog for that version: the default one is the best guess
        catalog = load_catalog(CATALOG_VERSION)
    table: dict[str, FlagSpec] = {}
    for flag in catalog.flags.values():
        canonical = flag.options[0]
        for option in flag.spellings:
            # The catalog lists the positive spelling first (it matches `dest`); other long ones
            # negate.
            negative = flag.kind == "bool" and option.startswith("--") and option != canonical
            table[option] = FlagSpec(
                canonical,
                flag.takes_value,
                flag.nargs,
                flag.type_name,
                flag.append,
                negative,
                flag.default,
            )
    return table


def lookup_flag(option: str, version: str = CATALOG_VERSION) -> FlagSpec | None:
    table = flag_catalog(version)
    spec = table.get(option) or table.get(_long_spelling(option))
    if spec is None and _long_spelling(option).startswith("--no-"):
        # Older vLLM (argparse BooleanOptionalAction) spelled every negation `--no-x`;
        # 0.33 uses `--disable-x` for some. Accept both for a boolean flag.
        positive = table.get("--" + _long_spelling(option)[5:])
        if positive is not None and not positive.takes_value:
            return dataclasses.replace(positive, negative=not positive.negative)
    return spec


def flag_default(name: str, version: str = CATALOG_VERSION) -> Any:
    """vLLM's default for a flag when a plain scalar; None when unknown or not simple."""
    spec = lookup_flag(name, version)
    default = spec.default if spec else None
    if isinstance(default, (bool, int, float, str)) and default != "==SUPPRESS==":
        return default
    return None


# ---------------------------------------------------------------- vLLM argv


def parse_vllm_args(args: list[str], version: str = CATALOG_VERSION) -> dict:
    flags: dict[str, Any] = {}
    positionals: list[str] = []
    index = 0
    while index < len(args):
        token = args[index]
        index += 1
        if token == "--":
            positionals.extend(args[index:])
            break
        if not is_option(token):
            positionals.append(token)
            continue
        option, has_inline, inline = token.partition("=")
        option, _, subkey = option.partition(".")  # `-cc.mode=3`: JSON keys passed one at a time
        spec = lookup_flag(option, version)
        name = spec.name if spec else _long_spelling(option)
        value, index = _take_value(spec, bool(subkey), args, index, inline if has_inline else None)
        if subkey:
            current = flags.get(name)
            flags[name] = _merge(
                current if isinstance(current, dict) else {}, _nest(subkey.split("."), value)
            )
        elif spec is not None and spec.append:
            flags[name] = [*flags.get(name, []), value]
        else:
            flags[name] = value  # as in argparse, the last occurrence wins
    model = flags.pop("--model", None)
    if positionals:
        model = positionals.pop(0)  # `vllm serve MODEL` takes precedence over --model
    return {"model": model, "flags": flags, "args": positionals}


def _take_value(
    spec: FlagSpec | None, dotted: bool, args: list[str], index: int, inline: str | None
) -> tuple[Any, int]:
    """(value, next index) for the option just read."""
    if dotted:
        raw = inline if inline is not None else (args[index] if index < len(args) else "")
        return _json_or_text(raw), index + (inline is None and index < len(args))
    if spec is not None and not spec.takes_value:
        return (not spec.negative) if inline is None else inline, index
    if spec is not None and spec.nargs in ("+", "*"):
        values = [] if inline is None else [inline]
        while index < len(args) and not is_option(args[index]):
            values.append(args[index])
            index += 1
        return [_typed(spec, v) for v in values], index
    if inline is not None:
        return _typed(spec, inline), index
    if index < len(args) and not is_option(args[index]):
        return _typed(spec, args[index]), index + 1
    return True, index  # a bare unknown flag (or an optional value left out)


def _typed(spec: FlagSpec | None, raw: str) -> Any:
    text = raw.strip()
    if text[:1] in ("{", "["):
        parsed = _json_or_text(text)
        if parsed is not text:
            return parsed
    kind = spec.type if spec else None
    try:
        if kind == "int":
            return int(text)
        if kind == "float":
            return float(text)
    except ValueError:
        return raw
    if kind in ("human_readable_int", "human_readable_int_or_auto"):
        if kind.endswith("auto") and text.lower() == "auto":
            return -1
        number = parse_human_int(text)
        return raw if number is None else number
    return raw


def _json_or_text(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: a 100,000-deep value stays text
        return text


def is_option(token: str) -> bool:
    return token.startswith("-") and len(token) > 1 and not _NEGATIVE_NUMBER.match(token)


def _long_spelling(option: str) -> str:
    return "--" + option[2:].replace("_", "-") if option.startswith("--") else option


def _nest(keys: list[str], value: Any) -> dict:
    for key in reversed(keys):
        value = {key: value}
    return value


def _merge(base: dict, extra: dict) -> dict:
    merged = dict(base)
    for key, value in extra.items():
        both_maps = isinstance(merged.get(key), dict) and isinstance(value, dict)
        merged[key] = _merge(merged[key], value) if both_maps else value
    return merged


def argv_words(value: Any) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        try:
            return shlex.split(value)  # compose splits a string command the same way
        except ValueError:
            return [value]
    items = value if isinstance(value, list) else [value]
    return [compose_str(item) for item in items]


def split_vllm_argv(
    entrypoint: list[str] | None, command: list[str] | None, image: Any
) -> tuple[list[str], list[str]] | None:
    """(launcher words, vLLM args) when the service runs vLLM; None otherwise."""
    argv = (entrypoint or []) + (command or [])
    for index, token in enumerate(argv):
        launches_serve = token == "serve" and (index == 0 or Path(argv[index - 1]).name == "vllm")
        if launches_serve or token in _VLLM_MODULES:
            return argv[: index + 1], argv[index + 1 :]
    # A vLLM image with its own entrypoint and a command of just the model and flags.
    if (
        entrypoint is None
        and "vllm" in str(image or "").lower()
        and (not argv or is_option(argv[0]) or "/" in argv[0])
    ):
        return [], argv
    return None


def compose_str(value: Any) -> str:
    """A YAML scalar as compose passes it to the container (true → "true", 1 → "1")."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True, default=str)
    return str(value)
