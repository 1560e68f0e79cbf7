"""Driving stacks on Docker engines. Its door, the only modules other rooms may import:

  driver     every operation on a profile's stack (up, attach, down, status, logs, shm, weights on
             every node, what runs) and the few engine facts other rooms need (provision, edge)
  reports    the JSON shapes of up, down, status (`composegen schema --report up|down|status`)
  progress   ProgressSink, the events a start reports while it runs
  readiness  Endpoint and the HTTP polls of a running API

One documented exception: cli/fastpath.py reaches `engine.label_lookup` directly, so `shm` answers
without importing the driver (start-up time). tests/test_architecture.py enforces both.
docs/stack.md walks a profile through `up`."""

__all__ = ["driver", "progress", "readiness", "reports"]
