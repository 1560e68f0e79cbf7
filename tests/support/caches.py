"""A rendered environment without the compile caches' variables composegen adds (docs/caches.md)."""

from __future__ import annotations

from composegen.profiles import caches


def own(env: dict) -> dict:
    """The variables the profile itself set."""
    return {k: v for k, v in env.items() if k not in caches.VARIABLES and k != "HF_HOME"}
