#!/usr/bin/env bash
# Create the project venv (.venv) and install composegen into it (editable, with the test and dev
# extras), then make the engine, compose and the base image ready (scripts/provision.sh). Shared by test.sh
# and demo.sh; idempotent. The test areas' extras are scripts/provision-tests.sh (test.sh only).
# Nothing is installed into the system python (PEP 668) or into another checkout's environment.
set -euo pipefail
cd "$(dirname "$0")/.."
here="$(pwd -P)"
VENV="$here/.venv"
PY="$VENV/bin/python"

log() { printf 'setup: %s\n' "$*" >&2; }

if ! "$PY" -c 'import sys' >/dev/null 2>&1; then
    base="$(command -v python3 || true)"
    [ -n "$base" ] || { log "error: python3 (3.11 or newer) is needed"; exit 1; }
    "$base" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
        || { log "error: $base is $("$base" --version 2>&1); composegen needs 3.11 or newer"; exit 1; }
    rm -rf "$VENV"
    log "creating $VENV with $base"
    if ! "$base" -m venv "$VENV" >/dev/null 2>&1; then
        # Debian/Ubuntu ship venv's pip bootstrap separately (python3-venv).
        if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
            log "apt-get install python3-venv"
            DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-venv >&2
            rm -rf "$VENV"
            "$base" -m venv "$VENV"
        else
            log "error: '$base -m venv' failed; install your distribution's python3-venv package"
            exit 1
        fi
    fi
fi

# Reinstall when missing, when installed from another checkout, or when pyproject.toml changed.
stamp="$VENV/.composegen-install"
want="$here $(sha256sum pyproject.toml | cut -c1-16)"
installed="$(cd / && "$PY" -c 'import composegen, os; print(os.path.dirname(os.path.dirname(os.path.realpath(composegen.__file__))))' 2>/dev/null || true)"
# Offline, pip retries every package for minutes: ask the index once first, and say so in one line.
index_answers() {
    "$PY" -m pip index --help >/dev/null 2>&1 || return 0  # a pip without `index`: let the install speak
    "$PY" -m pip index versions pip --timeout 10 --retries 0 --disable-pip-version-check >/dev/null 2>&1
}
if [ "$installed" != "$here" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    if ! index_answers; then
        index="${PIP_INDEX_URL:-$("$PY" -m pip config get global.index-url 2>/dev/null || echo https://pypi.org/simple)}"
        log "error: the package index $index does not answer (pip cannot install composegen's dependencies); connect, or point PIP_INDEX_URL or PIP_FIND_LINKS at a mirror or wheelhouse"
        exit 1
    fi
    log "pip install -e '.[test,dev]' into $VENV"
    "$PY" -m pip install -q --disable-pip-version-check -e '.[test,dev]' >&2
    printf '%s\n' "$want" >"$stamp"
fi

PYTHON="$PY" bash scripts/provision.sh
