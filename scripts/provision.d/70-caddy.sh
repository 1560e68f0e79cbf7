# Debian's caddy (a static Go binary) for the edge tests: tests/support/edge.py copies it, with the CA
# bundle, into a local image built FROM the base image (no registry pull), pushes that to the local
# registry (50-registry.sh) so the rendered edge pins it by digest. Nothing is started here.
ensure_caddy() {
    if command -v caddy >/dev/null && [ -r /etc/ssl/certs/ca-certificates.crt ]; then
        log "caddy: present ($(caddy version 2>/dev/null | head -n 1))"
        return
    fi
    apt_install caddy ca-certificates
    log "caddy: installed"
}
