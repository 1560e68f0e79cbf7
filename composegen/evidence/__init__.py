"""Evidence of a running stack: gates, context ladder, bundles (bundle.py), their capture from a
live stack (capture.py), comparisons, plans and reports. The load benchmark is its own room: bench/."""

# What other rooms may import (tests/test_architecture.py checks every entry).
__all__ = [
    "bundle",
    "capture",
    "compare",
    "estimate",
    "gatecheck",
    "gates",
    "ladder",
    "plan",
    "qualify",
    "reportpage",
    "reportpng",
    "reports",
    "runreport",
    "sleepcycles",
]
