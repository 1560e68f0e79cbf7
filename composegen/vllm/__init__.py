"""What composegen knows of vLLM: its flag catalog, its startup log (startup.py, startup_rules.py,
stages.py)."""

# What other rooms may import (tests/test_architecture.py checks every entry).
__all__ = ["catalog", "redact", "reports", "stages", "startup", "startup_rules"]
