#!/usr/bin/env bash
# Run a command on an engine reached ONLY through DOCKER_HOST (tests area; never used by the demo).
#
#   bash tests/support/docker_host_only.sh COMMAND [ARG...]
#
# In a private mount namespace (unshare -m, so nothing leaks to the rest of the machine):
#   - the daemon's socket (the caller's DOCKER_HOST when it is unix://, else /var/run/docker.sock) is
#     bind-mounted at a path derived from this checkout: /tmp/composegen-dh-<sha256(checkout)[:12]>/docker.sock
#   - /var/run/docker.sock and /run/docker.sock are hidden (/dev/null bound over them), so anything that
#     falls back to the default socket fails instead of quietly reaching the engine
#   - DOCKER_HOST points at the new path, DOCKER_CONTEXT is unset, and the command runs with the caller's
#     environment otherwise unchanged.
# Needs root (unshare -m, mount). docs/testing.md has the recipe.
set -euo pipefail

if [ $# -eq 0 ]; then
    echo "usage: $0 COMMAND [ARG...]" >&2
    exit 2
fi
checkout=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
source_sock=/var/run/docker.sock
case "${DOCKER_HOST:-}" in
    unix://*) source_sock=${DOCKER_HOST#unix://} ;;
    "") ;;
    *) echo "$0: DOCKER_HOST=$DOCKER_HOST is not a unix socket; nothing to hide" >&2; exit 2 ;;
esac
source_sock=$(readlink -f "$source_sock")
if [ ! -S "$source_sock" ]; then
    echo "$0: $source_sock is not a socket (is the engine running?)" >&2
    exit 3
fi
dir=/tmp/composegen-dh-$(printf %s "$checkout" | sha256sum | cut -c1-12)
mkdir -p "$dir"
: >"$dir/docker.sock.mnt" # the bind target: an empty file, the socket is mounted over it in the namespace

export CG_DH_SOURCE=$source_sock CG_DH_TARGET=$dir/docker.sock.mnt
exec unshare --mount --propagation private -- bash -euo pipefail -c '
    mount --bind "$CG_DH_SOURCE" "$CG_DH_TARGET"
    for default in /run/docker.sock /var/run/docker.sock; do
        if [ -S "$default" ]; then mount --bind /dev/null "$default"; fi
    done
    if [ -S /var/run/docker.sock ] || [ -S /run/docker.sock ]; then
        echo "docker_host_only: the default socket is still reachable; refusing" >&2
        exit 3
    fi
    export DOCKER_HOST="unix://$CG_DH_TARGET"
    unset DOCKER_CONTEXT CG_DH_SOURCE CG_DH_TARGET
    echo "docker_host_only: DOCKER_HOST=$DOCKER_HOST (default sockets hidden)" >&2
    exec "$@"
' docker_host_only "$@"
