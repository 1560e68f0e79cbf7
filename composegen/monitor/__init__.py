"""Live figures of a serving stack from its engine's /metrics (`composegen top`: sample.py computes,
watch.py polls, reports.py is the JSON shape), and the optional Prometheus/Grafana files a profile
renders with `monitoring: {prometheus: true}`."""

# What other rooms may import (tests/test_architecture.py checks every entry).
__all__ = ["reports", "sample", "watch"]
