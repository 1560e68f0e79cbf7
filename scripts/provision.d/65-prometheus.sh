# Debian's Prometheus (prometheus + promtool) for the monitoring tests: they check the rendered scrape
# configuration with `promtool check config`, and start their own `prometheus` on 127.0.0.1 (a free port,
# a temp data dir) scraping an emulated engine. Nothing is left running: no daemon is started here.
ensure_prometheus() {
    if command -v prometheus >/dev/null && command -v promtool >/dev/null; then
        log "prometheus: present ($(prometheus --version 2>&1 | head -n 1))"
        return
    fi
    apt_install prometheus
    # Debian's package may start its own service on :9090 (all interfaces) where an init system runs it.
    if command -v systemctl >/dev/null && systemctl is-active --quiet prometheus 2>/dev/null; then
        systemctl disable --now prometheus >/dev/null 2>&1 || true
    fi
    log "prometheus: installed"
}
