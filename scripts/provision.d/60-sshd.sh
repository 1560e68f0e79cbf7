# openssh-server for the ssh:// node tests: they start their own sshd on 127.0.0.1 with a throw-away
# config, host key and user; nothing here starts a daemon or opens a port.
ensure_sshd() {
    if [ -x /usr/sbin/sshd ] && command -v ssh >/dev/null && command -v ssh-keygen >/dev/null; then
        log "sshd: present"
        return
    fi
    apt_install openssh-server openssh-client
    # Debian's package enables and may start the system sshd; the tests never use it.
    log "sshd: installed"
}
