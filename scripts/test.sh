#!/usr/bin/env bash
# The test command: set up everything the tests need (engine, compose v2, base image, package), then
# run the whole suite against the real Docker engine. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
python3 -m composegen render --check >/dev/null
exec python3 -m pytest "$@"
