"""/dev/shm: who holds what (listing.py, scan.py, procscan.py), the compact JSON route
(fastjson.py), the safe reclaim of leftovers (reclaim.py), their models (reports.py) and text
(text.py)."""

# What other rooms may import (tests/test_architecture.py checks every entry).
__all__ = ["fastjson", "procscan", "reclaim", "reports", "scan", "text"]
