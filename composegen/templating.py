"""The Jinja environment of templates/ and the escapes every value passes through on its way into a
generated file: JSON scalars for values, YAML-safe keys, `$` doubled where compose must not
interpolate."""

from __future__ import annotations

import json
import re
from functools import lru_cache
from types import ModuleType
from typing import TYPE_CHECKING

from composegen import usercache
from composegen.project import templates_dir

if TYPE_CHECKING:
    import jinja2


@lru_cache(maxsize=4)
def template(name: str = "compose.yaml.j2") -> jinja2.Template:
    # why: stack/, k8s/ and edge/ import the escapes (and render) and never compile a template
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        bytecode_cache=_bytecode_cache(jinja2),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )
    # JSON scalars and flow collections are valid YAML and need no further quoting rules. Every
    # value and key reaches the file through one of these two emitters, never as pasted text.
    env.filters["j"] = lambda v: _yaml_safe(json.dumps(v, ensure_ascii=False))
    env.filters["k"] = yaml_key
    # comment stays on its line
    env.filters["c"] = lambda v: re.sub(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]", "?", str(v))
    return env.get_template(name)


def _bytecode_cache(jinja2: ModuleType) -> jinja2.FileSystemBytecodeCache | None:
    """Compiled templates in the user's cache (usercache.py): a template compiles once per source,
    not once per command. Jinja keys each entry by the template's source checksum."""
    if not usercache.enabled():
        return None
    directory = usercache.cache_dir() / "templates"
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        return None
    if directory.is_symlink():
        return None
    return jinja2.FileSystemBytecodeCache(str(directory))


_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
# Plain words YAML 1.1 or 1.2 would read as something other than a string key.
_YAML_WORDS = {"y", "yes", "n", "no", "true", "false", "on", "off", "null"}


def yaml_key(key: str) -> str:
    """A mapping key: plain if YAML reads that word back as the string, else JSON-quoted."""
    plain = _PLAIN_KEY.fullmatch(key) and key.lower() not in _YAML_WORDS
    return key if plain else _yaml_safe(json.dumps(key, ensure_ascii=False))


# JSON leaves these raw inside a string; YAML 1.1 readers (PyYAML: diff, render --check) fold them
# as line breaks. Written as escapes, every reader gets the character itself.
_YAML_1_1_BREAKS = {0x85: "\\u0085", 0x2028: "\\u2028", 0x2029: "\\u2029"}


def _yaml_safe(json_text: str) -> str:
    return json_text.translate(_YAML_1_1_BREAKS)


# A reference compose should interpolate: ${VAR}, ${VAR:-default}, ${VAR-default}, ${VAR:?why},
# ${VAR?why}.
_REFERENCE = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*(?::?[-?][^}$]*)?\}")


def literal(text: str) -> str:
    """Text compose must pass as written: compose interpolates every `$`, so each becomes `$$`."""
    return text.replace("$", "$$")


def with_references(text: str) -> str:
    """Text whose `${VAR…}` references compose resolves (where the schema allows them); any other
    `$` is literal."""
    out, last = [], 0
    for match in _REFERENCE.finditer(text):
        out += [literal(text[last : match.start()]), match.group()]
        last = match.end()
    return "".join([*out, literal(text[last:])])
