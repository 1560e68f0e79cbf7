#!/usr/bin/env bash
# What single test areas need beyond the engine, compose and the base image (a registry, a browser, tmux,
# sshd, prometheus): one file each in provision.d/. Only the test command (scripts/test.sh) runs this; the
# demo never does. Each file is sourced here, so it can use log/die/apt_install, and defines
# ensure_<its name>, which must check first and do nothing when already done.
set -euo pipefail
cd "$(dirname "$0")/.."
CHECKOUT="$(pwd -P)"  # state a service keeps (the registry's data) lives in this checkout, never a fixed path
APT_UPDATED=0

log() { printf 'provision: %s\n' "$*" >&2; }
die() { printf 'provision: error: %s\n' "$*" >&2; exit 1; }
is_root() { [ "$(id -u)" = 0 ]; }

apt_install() {
    is_root || die "need root to install $* (run: sudo $0)"
    command -v apt-get >/dev/null || die "apt-get not found: install $* by hand"
    export DEBIAN_FRONTEND=noninteractive
    if [ "$APT_UPDATED" = 0 ]; then
        log "apt-get update"
        apt-get update -qq >&2 || die "apt-get update failed"
        APT_UPDATED=1
    fi
    log "apt-get install -y $*"
    apt-get install -y -qq --no-install-recommends "$@" >&2 || die "apt-get install $* failed"
}

for f in scripts/provision.d/*.sh; do
    [ -e "$f" ] || continue
    # shellcheck source=/dev/null
    . "$f"
    "ensure_$(basename "$f" .sh | sed 's/^[0-9]*-//; s/-/_/g')"
done
