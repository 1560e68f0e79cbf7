"""Bounded HTTP: deadlines, size caps and typed reply checks for every network read (http.py)."""

# What other rooms may import (tests/test_architecture.py checks every entry).
__all__ = [
    "http",
    "replies",
    "transport",
]
