"""Comparing rendered stacks: semantic (what a change does), composeyaml, argv, targets (compose vs
k8s); reports.py holds their JSON shapes."""

# What other rooms may import (tests/test_architecture.py checks every entry).
__all__ = ["composeyaml", "reports", "semantic", "targets"]
