#!/usr/bin/env bash
# The main job on the emulated backend: render the stacks, bring the 4,096-token candidate up with the
# emulated vLLM (a test double: no GPU here), show its status, startup report and gates, then take it down.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
NAME="${1:-4096-131k}"
trap '.venv/bin/composegen down "$NAME" >/dev/null 2>&1 || true' EXIT
set -x
.venv/bin/composegen render
.venv/bin/composegen up "$NAME" --emulate --down-on-failure
.venv/bin/composegen status "$NAME"
.venv/bin/composegen startup "$NAME"
.venv/bin/composegen gate "$NAME" --tools 20
.venv/bin/composegen down "$NAME"
