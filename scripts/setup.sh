#!/usr/bin/env bash
# Install composegen (editable, with test extras) and make the engine ready. Shared by test.sh and demo.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/provision.sh
if ! python3 -c 'import composegen, pytest, compose' >/dev/null 2>&1 || [ "${COMPOSEGEN_REINSTALL:-0}" = 1 ]; then
    echo "setup: pip install -e '.[test]'" >&2
    python3 -m pip install -q -e '.[test]' >&2
fi
