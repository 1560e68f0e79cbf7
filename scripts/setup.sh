#!/usr/bin/env bash
# Install composegen (editable, with test extras) from this checkout and make the engine ready.
# Shared by test.sh and demo.sh; idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/provision.sh
here="$(pwd -P)"
installed="$(python3 -c 'import composegen, os; print(os.path.dirname(os.path.dirname(os.path.realpath(composegen.__file__))))' 2>/dev/null || true)"
# Reinstall when missing or installed from another checkout (cwd would mask that for `python -m`).
if [ "$installed" != "$here" ] || ! (cd / && python3 -c 'import pytest, compose, composegen' >/dev/null 2>&1); then
    echo "setup: pip install -e '.[test]'" >&2
    python3 -m pip install -q --disable-pip-version-check -e '.[test]' >&2
fi
