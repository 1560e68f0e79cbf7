"""Evidence of a running stack: gates, context ladder, bench, bundles (bundle.py), their capture
from a live stack (capture.py), comparisons, plans and reports."""

# What other rooms may import (tests/test_architecture.py checks every entry).
__all__ = [
    "bench",
    "benchedge",
    "benchedgetext",
    "benchopentext",
    "benchrates",
    "benchschedule",
    "benchslo",
    "benchstats",
    "bundle",
    "capture",
    "compare",
    "estimate",
    "frontier",
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
