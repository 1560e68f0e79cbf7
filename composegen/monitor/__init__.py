"""Live figures of a serving stack from its engine's /metrics (`composegen top`), and the optional
Prometheus/Grafana files a profile renders with `monitoring: {prometheus: true}`."""
