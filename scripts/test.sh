#!/usr/bin/env bash
# The test command: set up everything the tests need (project venv, engine, compose v2, base image, then
# the test areas' extras: registry, chromium, tmux, sshd, prometheus), check lint, format and types, then
# run the whole suite against the real Docker engine.
# Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/provision-tests.sh
bin=.venv/bin
"$bin/ruff" check composegen tests
"$bin/ruff" format --check composegen tests
"$bin/mypy" composegen
"$bin/python" -m composegen render --check >/dev/null
exec "$bin/python" -m pytest "$@"
