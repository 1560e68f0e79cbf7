"""Model weights: where a stack's cache is (cache.py), what the pinned revision needs (check.py,
snapshot.py), the `weights` report's shape (reports.py)."""

# What other rooms may import (tests/test_architecture.py checks every entry).
__all__ = ["cache", "check", "reports", "snapshot"]
