#!/usr/bin/env bash
# What the edge adds (issue 38): TTFT and ITL through the public TLS listener against the operator door,
# alternated in one run at C1, then STREAMS concurrent streams (with and without one slow reader) and the
# gate's CPU per relayed token. Against the EMULATED vLLM on the real engine; needs the edge's caddy
# (scripts/provision-tests.sh). Run by hand: bash bench/edge.sh [ROUNDS] [STREAMS]
# `bash bench/edge.sh via [REQUESTS] [CONCURRENCY]`: the same through `composegen bench --via-edge`.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = via ]; then
    exec .venv/bin/python bench/edge_via.py "${2:-200}" "${3:-1}"
fi
exec .venv/bin/python bench/edge_latency.py "${1:-200}" "${2:-256}"
