"""Making a machine ready for composegen's stacks, from the installed package (no checkout needed).

doctor.py checks (engine, compose v2, the emulator's base image, python) and says the exact fix, in
the shape of reports.py; steps.py does what is missing (`composegen provision`); base.py knows where
the emulator's base image comes from; debootstrap.py builds one when no registry answers; system.py
runs commands. Engine access goes through composegen.stack.driver (the stack room's door: what `up`
uses) or the `docker` CLI, which honour DOCKER_HOST."""

# What other rooms may import (tests/test_architecture.py checks every entry).
__all__ = [
    "doctor",
    "reports",
    "steps",
]
