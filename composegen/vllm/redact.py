"""Secrets out of vLLM's own log text: its `non-default args` line prints `'api_key': ['sk-…']` in
clear (recorded: tests/data/real-0.26.0-h200-apikey-routes/). Every log composegen reads from a
container goes through `mask` (stack/engine.py), so `logs`, startup.log in bundles, failure tails
and reports never carry the value."""

from __future__ import annotations

import re

from composegen.vllm.startup_rules import SECRET_ARGS

MASK = "***"
_NAMES = "|".join(sorted(SECRET_ARGS))
_VALUE = r"(?:\[[^\]\n]*\]|'[^'\n]*'|\"[^\"\n]*\")"
# 'api_key': ['sk-test']   (the dict repr of `non-default args`)
_DICT = re.compile(rf"""(['"](?:{_NAMES})['"]\s*:\s*){_VALUE}""")
# api_key=['sk-test']      (a Namespace repr)
_KWARG = re.compile(rf"""(\b(?:{_NAMES})\s*=\s*){_VALUE}""")
# --api-key sk-test / --api-key=sk-test   (an argv echoed in the log)
_FLAG = re.compile(rf"""(--(?:{_NAMES.replace("_", "-")})(?:=|\s+))(?!-)[^\s'",\]]+""")


def mask(text: str) -> str:
    if "key" not in text and "token" not in text and "password" not in text:
        return text  # the common line: nothing to look for
    text = _DICT.sub(rf"\1'{MASK}'", text)
    text = _KWARG.sub(rf"\1'{MASK}'", text)
    return _FLAG.sub(rf"\1{MASK}", text)
