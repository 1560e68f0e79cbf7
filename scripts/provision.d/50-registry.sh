# A local Docker registry (Debian's docker-registry) on 127.0.0.1 only, for the image-pull progress tests:
# they push the emulator image under a unique name, remove the local copy and let `up` pull it. The engine
# treats 127.0.0.0/8 registries as insecure-OK, so plain HTTP needs no daemon configuration.
#   COMPOSEGEN_REGISTRY   host:port it listens on (default 127.0.0.1:5123); the tests read the same variable
REGISTRY_ADDR="${COMPOSEGEN_REGISTRY:-127.0.0.1:5123}"
REGISTRY_DIR="${COMPOSEGEN_REGISTRY_DIR:-$CHECKOUT/.cache/registry}"  # per checkout, not machine-wide

ensure_registry() {
    if python3 -c "import urllib.request,sys; urllib.request.urlopen('http://$REGISTRY_ADDR/v2/', timeout=2)" >/dev/null 2>&1; then
        log "registry: answering on $REGISTRY_ADDR"
        return
    fi
    command -v docker-registry >/dev/null || apt_install docker-registry
    is_root || die "starting the registry needs root (or start docker-registry on $REGISTRY_ADDR yourself)"
    mkdir -p "$REGISTRY_DIR"
    cat >"$REGISTRY_DIR/config.yml" <<CONF
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: $REGISTRY_DIR/data
  delete:
    enabled: true
http:
  addr: $REGISTRY_ADDR
CONF
    if [ -d "$REGISTRY_DIR/data" ]; then  # the tests delete their images; their layers go here, before it serves
        docker-registry garbage-collect "$REGISTRY_DIR/config.yml" >/dev/null 2>&1 || log "registry: garbage-collect failed"
    fi
    log "starting docker-registry on $REGISTRY_ADDR (log: $REGISTRY_DIR/registry.log)"
    setsid nohup docker-registry serve "$REGISTRY_DIR/config.yml" >"$REGISTRY_DIR/registry.log" 2>&1 </dev/null &
    local waited=0
    until python3 -c "import urllib.request; urllib.request.urlopen('http://$REGISTRY_ADDR/v2/', timeout=2)" >/dev/null 2>&1; do
        if [ "$waited" -ge 20 ]; then
            tail -n 20 "$REGISTRY_DIR/registry.log" >&2 || true
            die "docker-registry did not answer on $REGISTRY_ADDR within 20 s"
        fi
        sleep 1
        waited=$((waited + 1))
    done
    log "registry: started on $REGISTRY_ADDR"
}
