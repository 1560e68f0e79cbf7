"""Kubernetes' `$(VAR)` expansion in command, args and env values (the kubelet's rule,
third_party/forked/ golang/expansion): `$$` is one literal `$`, `$(NAME)` is NAME's value when the
container has it (else left as written), any other `$` is literal. Written text escapes every `$`;
our own references are added after."""

from __future__ import annotations

import re
from collections.abc import Mapping

_REF = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


def escape(text: str) -> str:
    """Text Kubernetes must pass as written."""
    return text.replace("$", "$$")


def reference(name: str) -> str:
    return f"$({name})"


def expand(text: str, env: Mapping[str, str]) -> str:
    """What the container receives for `text`, given its environment."""

    def sub(m: re.Match) -> str:
        if m.group() == "$$":
            return "$"
        name = m.group(1)
        return env[name] if name in env else m.group()

    return _REF.sub(sub, text)
