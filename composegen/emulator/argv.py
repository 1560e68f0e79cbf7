"""`vllm serve` argv parsing for the emulator, built from the vLLM 0.33 flag catalog
(serve-flags.json).

Behaves like vLLM's parser where a test can see it: `prog` is `vllm serve`, unknown/misspelled flags
and bad values exit 2 with `vllm serve: error: …` on stderr, unique prefixes are accepted
(argparse's allow_abbrev), `--max_model_len` is read as `--max-model-len`, and JSON-valued config
flags also take `--speculative-config.method mtp` style keys."""

from __future__ import annotations

import argparse
import json
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PROG = "vllm serve"
CATALOG_ENV = "EMU_FLAG_CATALOG"
_HERE = Path(__file__).resolve().parent
# Inside the image the catalog sits next to the package root; in a checkout it lives in
# composegen/vllm/data.
_CATALOG_CANDIDATES = (
    _HERE.parent.parent / "serve-flags.json",
    _HERE.parent / "vllm" / "data" / "vllm-0.33.0-serve-flags.json",
)

# `_optional_type(X)` flags whose inner type X the catalog does not record; everything else is a
# string.
_INT_INNER = (
    "num_gpu_blocks_override max_log_len grpc_port distributed_timeout_seconds "
    "cpu_distributed_timeout_seconds max_parallel_loading_workers prefix_cache_retention_interval "
    "mamba_block_size prefix_match_unit max_cpu_loras max_lora_cls_labels max_num_scheduled_tokens "
    "max_num_active_seqs max_num_queued_reqs max_num_queued_tokens numa_bind_nodes"
)
_OPTIONAL_INNER = {
    "kv_offloading_size": "float",
    "video_pruning_rate": "float",
    "kv_cache_memory_bytes": "human_readable_int",
    **dict.fromkeys(_INT_INNER.split(), "int"),
}
_JSON_TYPES = {"parse_dataclass", "loads", "_parse_type"}
_JSON_OPTIONAL = {
    "speculative_config",
    "kv_transfer_config",
    "custom_histogram_buckets",
    "mm_processor_kwargs",
    "default_mm_loras",
}


def catalog_path() -> Path:
    override = os.environ.get(CATALOG_ENV)
    if override:
        return Path(override)
    for candidate in _CATALOG_CANDIDATES:
        if candidate.is_file():
            return candidate
    return _CATALOG_CANDIDATES[-1]


def load_catalog(path: Path | None = None) -> list[dict]:
    with open(path or catalog_path(), encoding="utf-8") as fh:
        return json.load(fh)["flags"]


# --- value types (their __name__ shows up in argparse's "invalid <type> value" messages, as in
# vLLM) ---


def human_readable_int(value: str) -> int:
    """`4k` = 4000 (decimal suffix), `4K` = 4096 (binary suffix, no decimals), else a plain int."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kmgtKMGT])", value.strip())
    if not match:
        return int(value)
    number, suffix = match.groups()
    if suffix.islower():
        return int(float(number) * 1000 ** ("kmgt".index(suffix) + 1))
    if "." in number:
        raise argparse.ArgumentTypeError(
            f"Decimals are not allowed with binary suffixes like {suffix}. "
            f"Did you mean to use {number}{suffix.lower()} instead?"
        )
    return int(number) * 1024 ** ("KMGT".index(suffix) + 1)


def human_readable_int_or_auto(value: str) -> int:
    """Like human_readable_int; `auto` or `-1` mean "fit the memory" and become -1."""
    if value.strip().lower() in ("auto", "-1"):
        return -1
    return human_readable_int(value)


def _json_value(value: str) -> Any:
    return json.loads(value)


def union_dict_and_str(value: str) -> Any:
    """vLLM's rule: text that looks like a JSON object is parsed (and must be valid), else kept as a
    string."""
    if re.fullmatch(r"(?s)\s*\{.*\}\s*", value):
        return json.loads(value)
    return value


# An argparse `type`: text in, the parsed value (JSON flags give whatever the JSON holds) out.
Convert = Callable[[str], Any]

_NAMED_TYPES: dict[str, Convert] = {
    "int": int,
    "float": float,
    "str": str,
    "human_readable_int": human_readable_int,
    "human_readable_int_or_auto": human_readable_int_or_auto,
    "union_dict_and_str": union_dict_and_str,
}


def _named(func: Convert, name: str) -> Convert:
    def convert(value: str) -> Any:
        return func(value)

    convert.__name__ = name
    return convert


def _optional(inner: Convert) -> Convert:
    def convert(value: str) -> Any:
        return None if value in ("", "None") else inner(value)

    convert.__name__ = "_optional_type"
    return convert


def _is_json_flag(flag: dict) -> bool:
    if flag["type"] in _JSON_TYPES or flag["dest"] in _JSON_OPTIONAL:
        return True
    return flag["type"] == "_optional_type" and "valid JSON string" in (flag.get("help") or "")


def _value_type(flag: dict) -> Convert:
    kind, dest = flag["type"], flag["dest"]
    if _is_json_flag(flag):
        inner = _named(_json_value, kind if kind in _JSON_TYPES else "loads")
        return _optional(inner) if kind == "_optional_type" else inner
    if kind == "_optional_type":
        return _optional(_NAMED_TYPES[_OPTIONAL_INNER.get(dest, "str")])
    return _NAMED_TYPES.get(kind, str)


class _EnableDisable(argparse.Action):
    """One dest, several spellings: the dest's own spelling and short aliases set True, the others
    False."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        kwargs["nargs"] = 0
        super().__init__(option_strings, dest, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        assert option_string is not None  # an option (never a positional) calls this action
        positive = (
            not option_string.startswith("--") or option_string[2:].replace("-", "_") == self.dest
        )
        setattr(namespace, self.dest, positive)


def _converted_choice(convert: Convert, choice: object) -> object:
    try:
        return convert(choice) if isinstance(choice, str) else choice
    except (ValueError, TypeError, argparse.ArgumentTypeError):
        return choice


def _add_flag(parser: argparse.ArgumentParser, flag: dict) -> None:
    opts, dest = flag["options"], flag["dest"]
    action = flag["action"]
    if action == "EnableDisableAction":
        parser.add_argument(*opts, dest=dest, action=_EnableDisable, default=argparse.SUPPRESS)
        return
    if action == "_StoreTrueAction":
        parser.add_argument(*opts, dest=dest, action="store_true", default=argparse.SUPPRESS)
        return
    # SUPPRESS: argparse would run string defaults (e.g. compilation_config's repr) through `type`.
    kwargs: dict = {"dest": dest, "default": argparse.SUPPRESS, "type": _value_type(flag)}
    if action == "_AppendAction":
        kwargs["action"] = "append"
    if flag["nargs"] in ("+", "*", "?"):
        kwargs["nargs"] = flag["nargs"]
        if flag["nargs"] == "?":
            kwargs["const"] = True  # `--hf-token` alone: use the cached login
    if flag["choices"]:
        kwargs["choices"] = [_converted_choice(kwargs["type"], c) for c in flag["choices"]]
    parser.add_argument(*opts, **kwargs)


def build_parser(flags: list[dict] | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        usage=f"{PROG} [model_tag] [options]",
        description="composegen vLLM emulator: an OpenAI-compatible test double, not a real engine.",
    )
    parser.add_argument("model_tag", nargs="?", default=None, help="The model tag to serve.")
    for flag in flags if flags is not None else load_catalog():
        _add_flag(parser, flag)
    return parser


def _normalize(argv: list[str], json_opts: set[str]) -> list[str]:
    """`--max_model_len` -> `--max-model-len`; `--x-config.a.b v` keys folded into one `--x-config
    {json}`."""
    out: list[str] = []
    dotted: dict[str, dict] = {}
    i = 0
    while i < len(argv):
        token = argv[i]
        i += 1
        if not token.startswith("--") or token == "--":
            out.append(token)
            continue
        name, eq, value = token.partition("=")
        base, dot, keys = name.partition(".")
        # keys after the dot are JSON field names: keep their underscores
        base = base.replace("_", "-")
        name = base + dot + keys
        if dot and base in json_opts:
            if not eq:
                if i >= len(argv):
                    out.append(name)  # let argparse report the missing value
                    continue
                value = argv[i]
                i += 1
            try:
                parsed = json.loads(value)
            except ValueError:
                parsed = value
            node = dotted.setdefault(base, {})
            *parents, leaf = keys.split(".")
            for key in parents:
                node = node.setdefault(key, {})
            node[leaf] = parsed
            continue
        out.append(name + eq + value)
    for base, tree in dotted.items():
        out += [base, json.dumps(tree)]
    return out


@dataclass
class ServeArgs:
    values: dict
    non_default: dict

    def get(self, dest: str, default: Any = None) -> Any:
        value = self.values.get(dest)
        return default if value is None else value


def parse_serve_args(argv: list[str], flags: list[dict] | None = None) -> ServeArgs:
    flags = flags if flags is not None else load_catalog()
    parser = build_parser(flags)
    json_flags = [flag for flag in flags if _is_json_flag(flag)]
    json_opts = {opt for flag in json_flags for opt in flag["options"] if opt.startswith("--")}
    given = vars(parser.parse_args(_normalize(list(argv), json_opts)))
    defaults = {"model_tag": None, **{flag["dest"]: flag["default"] for flag in flags}}
    values = {dest: given.get(dest, default) for dest, default in defaults.items()}
    if values["model_tag"]:
        values["model"] = values["model_tag"]  # vLLM: the positional wins over --model
    non_default = {dest: value for dest, value in values.items() if value != defaults.get(dest)}
    return ServeArgs(values=values, non_default=non_default)
