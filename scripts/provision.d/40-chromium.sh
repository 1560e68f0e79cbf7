# Headless Chromium (Debian's `chromium`) for the report tests: they open the generated HTML page and
# check the screenshot, the console and that every plot is there (tests/evidence/test_report_browser.py).
ensure_chromium() {
    if command -v chromium >/dev/null; then
        log "chromium: already installed ($(chromium --version 2>/dev/null | head -n 1))"
        return
    fi
    apt_install chromium
}
