#!/usr/bin/env bash
# The test command: set up everything the tests need (project venv, engine, compose v2, base image, then
# the test areas' extras: registry, chromium, tmux, sshd, prometheus), check lint, format and types, then
# run the whole suite against the real Docker engine.
# Extra arguments go to pytest, after the workers' options (`-n 0` runs serially; see docs/testing.md).
set -euo pipefail
cd "$(dirname "$0")/.."
trap 'printf "test.sh: total %dm%02ds\n" $((SECONDS / 60)) $((SECONDS % 60)) >&2' EXIT
bash scripts/setup.sh
bash scripts/provision-tests.sh
bin=.venv/bin
"$bin/ruff" check composegen tests
"$bin/ruff" format --check composegen tests
# mypy's cache outside the checkout: a fresh clone checks in seconds, not minutes (~80 s cold, ~4 s warm);
# mypy checks every entry against its source, so checkouts may share it
MYPY_CACHE_DIR="${MYPY_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/composegen/mypy}" "$bin/mypy" composegen
"$bin/python" -m composegen render --check >/dev/null
"$bin/python" -m composegen --root examples/team-edge render --check >/dev/null  # the shipped edge example
# Most engine tests wait on containers, not on the CPU: twice the cores, at least 4, at most 8 workers.
cores="$(nproc 2>/dev/null || echo 2)"
workers="${COMPOSEGEN_TEST_WORKERS:-$(( cores * 2 < 4 ? 4 : (cores * 2 > 8 ? 8 : cores * 2) ))}"
# --durations: the slowest tests of every run, named in its log (docs/testing.md)
"$bin/python" -m pytest -n "$workers" --dist loadgroup --durations=25 "$@"
