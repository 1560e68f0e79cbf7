"""The `vllm serve` flag catalog of a pinned vLLM version: lookup, value checks, argv building.

The one reader of the catalogs (composegen/vllm/data/vllm-<version>-serve-flags.json, read off
vLLM's own argument parser): profiles, the startup mismatch check and the compose diff all go
through load_catalog. Profiles spell flags exactly as the catalog's first long option, without the
dashes; vLLM's parser would also take abbreviations and underscores, we do not (a typo must fail
here, not become another flag)."""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from composegen import units
from composegen.output import show_value

DATA_DIR = Path(__file__).resolve().parent / "data"

# Parser types whose value is JSON (vLLM parses a JSON string into a config dataclass or dict).
_JSON_TYPES = {"parse_dataclass", "loads", "_parse_type", "union_dict_and_str"}
# `_optional_type` hides the wrapped type in the catalog; these are the numeric ones we check
# (read from each flag's help text in serve-help-all.txt). Others are strings or, per help, JSON.
_INT_OPTIONAL = (
    "num-gpu-blocks-override max-parallel-loading-workers max-cpu-loras max-log-len grpc-port "
    "distributed-timeout-seconds cpu-distributed-timeout-seconds mamba-block-size "
    "max-num-scheduled-tokens max-num-active-seqs max-num-queued-reqs max-num-queued-tokens"
)
_OPTIONAL_TYPES = {
    "kv-offloading-size": "float",
    "kv-cache-memory-bytes": "human_readable_int",
    "prefix-cache-retention-interval": "float",
    "video-pruning-rate": "float",
    **dict.fromkeys(_INT_OPTIONAL.split(), "int"),
}
# `_optional_type` flags whose help in serve-help-all.txt says "Should either be a valid JSON
# string".
_JSON_FLAGS = (
    "pooler-config quantization-config mm-processor-kwargs default-mm-loras "
    "custom-histogram-buckets diffusion-config ec-transfer-config engram-config "
    "kv-events-config kv-transfer-config reasoning-config speculative-config watermark-config "
    "weight-transfer-config"
)
_OPTIONAL_JSON = set(_JSON_FLAGS.split())


class FlagError(ValueError):
    """A flag name or value the catalog does not accept; the message is user-facing."""


@dataclass(frozen=True)
class Flag:
    name: str  # canonical spelling without dashes, e.g. "max-num-batched-tokens"
    dest: str
    kind: str  # int, float, human_int, human_int_or_auto, bool, store_true, json, list, choice, str
    options: tuple[str, ...]
    choices: tuple[str, ...] | None
    open_choices: bool  # metavar lists known values but vLLM also accepts plugin names
    default: Any
    help: str
    spellings: tuple[str, ...] = ()  # every option string vLLM accepts, short ones (`-tp`) included
    nargs: Any = None
    # the parser's type as the catalog records it (int, float, human_readable_int…)
    type_name: str | None = None
    append: bool = False  # repeated options accumulate (argparse's append action)

    @property
    def takes_value(self) -> bool:
        return self.kind not in ("bool", "store_true")

    @property
    def negative(self) -> str | None:
        """The option that sets a boolean flag to false (`--no-x` or `--disable-x`)."""
        return self.options[1] if self.kind == "bool" and len(self.options) > 1 else None


class Catalog:
    def __init__(self, version: str, flags: dict[str, Flag]):
        self.version = version
        self.flags = flags
        self.aliases = {opt.lstrip("-"): f for f in flags.values() for opt in f.options}

    def get(self, name: str) -> Flag:
        if name in self.flags:
            return self.flags[name]
        if name.startswith("-"):
            raise FlagError(f"write flags without leading dashes: {name.lstrip('-')!r}")
        alias = self.aliases.get(name) or self.aliases.get(name.replace("_", "-"))
        if alias is not None:
            if alias.kind == "bool" and name == (alias.negative or "").lstrip("-"):
                raise FlagError(f"unknown flag {name!r}; write '{alias.name}: false'")
            raise FlagError(f"unknown flag {name!r}; the catalog spells it {alias.name!r}")
        close = difflib.get_close_matches(name, list(self.flags), n=1, cutoff=0.75)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise FlagError(f"unknown flag {name!r} for vLLM {self.version}{hint}")

    def check(self, name: str, value: Any) -> Any:
        """The value normalised for rendering (int, float, bool, str, list or JSON text)."""
        return check_value(self.get(name), value)

    def argv(self, name: str, value: Any) -> list[str]:
        """Command-line items for one checked flag value: `--x=v`, `--x`, `--no-x`, or `--x a b`."""
        flag = self.get(name)
        opt = flag.options[0]
        if flag.kind in ("bool", "store_true"):
            if value:
                return [opt]
            return [flag.negative] if flag.negative else []
        if flag.kind == "list":
            return [opt, *map(str, value)]
        return [f"{opt}={format_scalar(value)}"]


class ArgparseEntry(TypedDict):
    """One option of the catalog file as vLLM's argparse declares it (the fields read here)."""

    options: list[str]
    action: str
    type: str | None
    nargs: str | int | None
    choices: NotRequired[list[object] | None]
    metavar: NotRequired[str | list[str] | None]


def format_scalar(value: Any) -> str:
    return repr(value) if isinstance(value, float) else str(value)


def _kind(entry: ArgparseEntry) -> str:
    name = entry["options"][0].lstrip("-")
    action, typ = entry["action"], entry["type"]
    if action == "EnableDisableAction":
        return "bool"
    if action == "_StoreTrueAction":
        return "store_true"
    if entry["nargs"] in ("+", "*"):
        return "list"
    if typ in _JSON_TYPES or name in _OPTIONAL_JSON:
        return "json"
    if typ == "_optional_type" and name in _OPTIONAL_TYPES:
        typ = _OPTIONAL_TYPES[name]
    return {
        "int": "int",
        "float": "float",
        "human_readable_int": "human_int",
        "human_readable_int_or_auto": "human_int_or_auto",
    }.get(typ or "", "str")


def _choices(entry: ArgparseEntry) -> tuple[tuple[str, ...] | None, bool]:
    if choices := entry.get("choices"):
        return tuple(str(c) for c in choices if c != "None"), False
    metavar = entry.get("metavar")
    if isinstance(metavar, list):  # vLLM validates these later, but the list is the accepted set
        return tuple(metavar), False
    if isinstance(metavar, str) and metavar.startswith("{") and "}" in metavar:
        return tuple(metavar[1 : metavar.index("}")].split(",")), " or " in metavar
    return None, False


@cache
def load_catalog(version: str) -> Catalog:
    path = DATA_DIR / f"vllm-{version}-serve-flags.json"
    if not path.is_file():
        known = sorted(p.name.split("-")[1] for p in DATA_DIR.glob("vllm-*-serve-flags.json"))
        raise FlagError(f"no flag catalog for vLLM {version}; known: {', '.join(known)}")
    raw = json.loads(path.read_text(encoding="utf-8"))
    flags: dict[str, Flag] = {}
    for entry in raw["flags"]:
        long_opts = tuple(o for o in entry["options"] if o.startswith("--"))
        if not long_opts:
            continue
        choices, open_choices = _choices(entry)
        flag = Flag(
            name=long_opts[0][2:],
            dest=entry["dest"],
            kind=_kind(entry),
            options=long_opts,
            choices=choices,
            open_choices=open_choices,
            default=entry.get("default"),
            help=entry.get("help") or "",
            spellings=tuple(entry["options"]),
            nargs=entry.get("nargs"),
            type_name=entry.get("type"),
            append=entry.get("action") == "_AppendAction",
        )
        flags[flag.name] = flag
    return Catalog(raw.get("vllm_version", version), flags)


def parse_human_int(value: Any) -> int:
    """vLLM's human-readable ints: 4096, '4k' (=4000), '4K' (=4096), '1.5M'."""
    if isinstance(value, bool):
        raise FlagError(f"must be an integer, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        number = units.parse_human_int(value)
        if number is not None and number >= 0:
            return number
    raise FlagError(f"must be an integer or a size like 4k / 4K, got {value!r}")


def check_value(flag: Flag, value: Any) -> Any:
    kind = flag.kind
    if kind in ("bool", "store_true"):
        if not isinstance(value, bool):
            raise FlagError(f"must be true or false, got {value!r}")
        return value
    if value is None:
        raise FlagError(
            "has no value (to drop an inherited flag, leave it out of the base profile)"
        )
    check = _KIND_CHECKS.get(kind, _check_str)
    return check(flag, value)


def _check_int(flag: Flag, value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, int):
        raise FlagError(f"must be an integer, got {show_value(value)}")
    return value


def _check_human_int(flag: Flag, value: Any) -> Any:
    if flag.kind == "human_int_or_auto" and value in ("auto", -1):
        return value
    return parse_human_int(value)


def _check_float(flag: Flag, value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise FlagError(f"must be a number, got {show_value(value)}")
    return float(value)


def _check_list(flag: Flag, value: Any) -> Any:
    items = value if isinstance(value, list) else [value]
    for item in items:
        _check_str(flag, item)
    return [str(i) for i in items]


def _check_json(value: Any) -> str:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise FlagError(
                f"must be a YAML map (rendered as JSON), got {show_value(value)}"
            ) from None
    if not isinstance(value, (dict, list)):
        raise FlagError(f"must be a YAML map (rendered as JSON), got {show_value(value)}")
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _check_str(flag: Flag, value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise FlagError(f"must be a string, got {show_value(value)}")
    text = str(value)
    if flag.choices and not flag.open_choices and text not in flag.choices:
        close = difflib.get_close_matches(text, flag.choices, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise FlagError(f"must be one of {', '.join(flag.choices)}; got {text!r}{hint}")
    return text


# flag kind -> its check (a kind not listed is a string, maybe one of the flag's choices)
_KIND_CHECKS: dict[str, Callable[[Flag, Any], Any]] = {
    "int": _check_int,
    "human_int": _check_human_int,
    "human_int_or_auto": _check_human_int,
    "float": _check_float,
    "json": lambda _flag, value: _check_json(value),
    "list": _check_list,
}
