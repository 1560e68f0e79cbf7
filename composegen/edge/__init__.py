"""The edge: one authenticated, TLS-terminating door in front of the vLLM stacks (docs/edge.md).

config.py (edge.yaml) → render.py (out/edge/) · keys.py (per-client keys) · routes.py (aliases, the
switch state the gatekeeper reads) · service.py (the edge's own containers) · switch.py (promote,
rollback; journal.py and recovery.py: a killed switch undone) · standby.py (resident stacks switched
by sleep mode; standbyplan.py: do they fit in memory) · proofarm.py (`qualify --emulate`,
`qualify --alias`: proof while another stack serves the alias; proofsteps.py: one run's steps and
their undo, shared with recovery.py) · exposure.py (the exposure gate) ·
benchvia.py (`bench --via-edge`) · gatekeeper.py (runs inside the edge; stdlib only).
"""

# What other rooms may import (tests/test_architecture.py checks every entry).
__all__ = [
    "asleep",
    "benchvia",
    "config",
    "exposure",
    "keys",
    "proofarm",
    "recovery",
    "render",
    "reports",
    "routes",
    "service",
    "standby",
    "standbyplan",
    "status",
    "switch",
]
