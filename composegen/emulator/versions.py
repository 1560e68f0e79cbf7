"""Which vLLM release the emulator imitates: EMU_VLLM_VERSION (0.33.0 by default; 0.26.0 as recorded
on a real H200 server, tests/data/real-0.26.0-h200). The HTTP API is the same for both (the 0.26.0
recording is its reference); what differs is what each release logs
(shared/reference/facts-vllm-compose.md §1):

  0.26.0  the version only in the logo banner; KV size and maximum concurrency on two separate lines
  0.33.0  a `vLLM server version` line too; one `GPU KV cache size: …, Maximum concurrency …` line
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

ENV = "EMU_VLLM_VERSION"
DEFAULT = "0.33.0"
SUFFIX = "+composegen-emulator"  # /version and --version say what answers: never mistaken for vLLM


@dataclass(frozen=True)
class Flavour:
    version: str
    kv_two_lines: bool  # ≤0.27: `GPU KV cache size: N tokens` and `Maximum concurrency …` apart
    server_version_line: bool  # `vLLM server version X, serving model M` besides the logo

    @property
    def reported(self) -> str:
        return self.version + SUFFIX

    @property
    def fingerprint(self) -> str:
        return f"vllm-{self.version}-nohash"


FLAVOURS = {
    "0.26.0": Flavour("0.26.0", kv_two_lines=True, server_version_line=False),
    "0.33.0": Flavour("0.33.0", kv_two_lines=False, server_version_line=True),
}


def flavour(env: Mapping[str, str] | None = None) -> Flavour:
    """The imitated release; ValueError (a usage error, exit 2) for one the emulator does not
    know."""
    wanted = (os.environ if env is None else env).get(ENV) or DEFAULT
    if wanted not in FLAVOURS:
        raise ValueError(f"{ENV}={wanted!r}: expected one of {', '.join(FLAVOURS)}")
    return FLAVOURS[wanted]


def active() -> Flavour:
    """The flavour of this process (an unknown EMU_VLLM_VERSION is refused at start-up, see
    runner.Settings)."""
    try:
        return flavour()
    except ValueError:
        return FLAVOURS[DEFAULT]


def logo(version: str, model: str) -> list[str]:
    """vLLM's start banner (api_utils.py), where 0.26 prints its version."""
    return [
        "",
        "       █     █     █▄   ▄█",
        f" ▄▄ ▄█ █     █     █ ▀▄▀ █  version {version}",
        f"  █▄█▀ █     █     █     █  model   {model}",
        "   ▀▀  ▀▀▀▀▀ ▀▀▀▀▀ ▀     ▀",
        "",
    ]
