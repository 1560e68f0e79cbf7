# tmux for the terminal tests: `up`/`wait` drawn in a real pseudo-terminal of a fixed size (80x24, 40x24).
ensure_tmux() {
    if command -v tmux >/dev/null; then
        log "tmux: present"
        return
    fi
    apt_install tmux
    log "tmux: installed"
}
