"""A profile's flags against what the engine logged it got (`non-default args`), read with the flag
catalog of the profile's vLLM version (vllm/catalog.py, the one catalog reader)."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

from pydantic import JsonValue

from composegen.vllm.catalog import Catalog, load_catalog
from composegen.vllm.pyliteral import same_value
from composegen.vllm.reports import Mismatch

DEFAULT_VERSION = "0.33.0"


@cache
def _index(version: str) -> dict[str, tuple[str, Any, bool]]:
    """option without dashes -> (dest, catalog default, the option negates the dest)."""
    index = {}
    for flag in load_catalog(version).flags.values():
        for position, option in enumerate(flag.options):
            negates = position > 0 and option.startswith(("--no-", "--disable-"))
            index[option[2:]] = (flag.dest, flag.default, negates)
    return index


def mismatches(
    profile_flags: Mapping[str, JsonValue],
    effective_args: Mapping[str, object] | None,
    catalog: Catalog | str = DEFAULT_VERSION,
) -> list[Mismatch]:
    """Every profile flag whose value the engine did not get (flag, profile, engine).

    A flag missing from `effective_args` ran with the catalog default ("engine" is that default), so
    it is a mismatch only if the profile asked for something else. Values are compared normalised:
    4096 == "4096", dicts == their JSON/repr text, a profile dict matches when every key it sets has
    the engine's value (the engine fills in the rest), an enum repr matches its name or value, and a
    scalar matches a one-element list (`served_model_name`). Redacted values ('***') are skipped."""
    if effective_args is None:
        raise ValueError("effective_args is None: the log had no readable `non-default args` line")
    index = _index(catalog.version if isinstance(catalog, Catalog) else catalog)
    found = []
    for flag, wanted in profile_flags.items():
        name = flag.lstrip("-").replace("_", "-")
        dest, default, negates = index.get(name, (name.replace("-", "_"), None, False))
        expected = (not wanted) if negates and isinstance(wanted, bool) else wanted
        if dest in effective_args:
            engine = effective_args[dest]
        elif dest == "model" and "model_tag" in effective_args:
            engine = effective_args["model_tag"]
        else:
            engine = default
        if engine == "***" or same_value(expected, engine):
            continue
        found.append(Mismatch(flag=flag, profile=wanted, engine=engine))
    return found
