"""The load benchmark: closed-loop sweeps (closed.py), open-loop rates and --find-max (rates.py),
via the edge (viaedge.py), their figures (stats.py), vLLM's result shape (vllmresult.py), the
frontier, the per-level deltas of two runs (deltas.py), their text and their JSON shapes
(reports.py)."""

# What other rooms may import (tests/test_architecture.py checks every entry).
__all__ = [
    "closed",
    "deltas",
    "frontier",
    "opentext",
    "prompts",
    "rates",
    "reports",
    "schedule",
    "spec",
    "stats",
    "viaedge",
    "viaedgetext",
]
