"""Profiles: the schema, resolution of a profile and its ancestors (resolve.py, resolved.py), the
rules."""

# What other rooms may import (tests/test_architecture.py checks every entry).
__all__ = [
    "caches",
    "identity",
    "kubernetes",
    "reports",
    "resolve",
    "resolved",
    "rules",
    "schema",
    "service",
    "yamlio",
]
