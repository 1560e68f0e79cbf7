"""A real sshd on 127.0.0.1 in front of the second Docker engine, for the ssh:// node tests.

A dedicated user (composegen-ssh, in the docker group) whose ~/.ssh/environment sets DOCKER_HOST to the
second engine's socket, as a user of a remote Spark would have it; an sshd of the test's own (temporary
host key and config, `PermitUserEnvironment yes`, a free port, its own log); and an ssh client config
with an alias on that non-default port, passed to composegen through COMPOSEGEN_SSH_CONFIG.

    from tests.support.sshd import ssh_node  # noqa: F401  (the session fixture; needs second_engine)
"""

from __future__ import annotations

import grp
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.ports import free_port

USER = "composegen-ssh"
HOME = Path("/var/lib/composegen-ssh")


@dataclass
class SshNode:
    alias: str
    port: int
    dir: Path
    log: Path
    engine_url: str

    @property
    def url(self) -> str:
        return f"ssh://{self.alias}"

    @property
    def config(self) -> Path:
        return self.dir / "ssh_config"

    def write_config(self, **overrides: str) -> Path:
        """A client config with the alias; overrides replace settings (e.g. Port, IdentityFile)."""
        settings = {
            "HostName": "127.0.0.1",
            "Port": str(self.port),
            "User": USER,
            "IdentityFile": str(self.dir / "id_client"),
            "IdentitiesOnly": "yes",
            "UserKnownHostsFile": str(self.dir / "known_hosts"),
            "StrictHostKeyChecking": "yes",
            **overrides,
        }
        path = self.dir / f"ssh_config-{len(list(self.dir.glob('ssh_config*')))}"
        path.write_text(
            f"Host {self.alias}\n" + "".join(f"    {k} {v}\n" for k, v in settings.items())
        )
        return path

    def accepted(self) -> int:
        """Connections sshd has authenticated so far (its log says `Accepted publickey` once each)."""
        return self.log.read_text(errors="replace").count("Accepted publickey")


def _run(*argv: str) -> None:
    res = subprocess.run(argv, capture_output=True, text=True)
    if res.returncode != 0:
        raise AssertionError(f"{' '.join(argv)}: {res.stderr.strip()}")


def _ensure_user(engine_socket: Path) -> None:
    try:
        pwd.getpwnam(USER)
    except KeyError:
        _run(
            "useradd",
            "--system",
            "--create-home",
            "--home-dir",
            str(HOME),
            "--shell",
            "/bin/sh",
            USER,
        )
    # no password, but not locked: sshd refuses locked accounts even for keys
    _run("usermod", "-p", "*", USER)
    group = grp.getgrgid(engine_socket.stat().st_gid).gr_name
    _run("usermod", "-aG", group, USER)
    (HOME / ".ssh").mkdir(mode=0o700, exist_ok=True)


def _keygen(path: Path) -> str:
    _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "composegen-test", "-f", str(path))
    return Path(f"{path}.pub").read_text().strip()


def _wait_listening(port: int, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"sshd exited: {log.read_text(errors='replace')[-800:]}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise AssertionError("sshd did not listen within 20 s")


@pytest.fixture(scope="session")
def ssh_node(second_engine):
    if shutil.which("ssh") is None or not Path("/usr/sbin/sshd").exists():
        if os.environ.get("CI") == "true":
            pytest.fail(
                "CI=true and openssh-server is missing (scripts/provision.d/60-sshd.sh installs it)"
            )
        pytest.skip("no ssh/sshd here")
    engine_socket = second_engine.root / "docker.sock"
    # the ssh user reaches the socket; the directory stays unlistable
    second_engine.root.chmod(0o711)
    _ensure_user(engine_socket)
    work = Path(tempfile.mkdtemp(prefix="cg-sshd-"))
    work.chmod(0o755)
    client_pub = _keygen(work / "id_client")
    _keygen(work / "id_stranger")  # a key sshd does not accept
    host_pub = _keygen(work / "host_key")
    _keygen(work / "other_host_key")  # for the wrong-host-key case
    user = pwd.getpwnam(USER)
    for name, text in (
        ("authorized_keys", client_pub + "\n"),
        ("environment", f"DOCKER_HOST=unix://{engine_socket}\n"),
    ):
        path = HOME / ".ssh" / name
        path.write_text(text)
        os.chown(path, user.pw_uid, user.pw_gid)
        path.chmod(0o600)
    os.chown(HOME / ".ssh", user.pw_uid, user.pw_gid)
    port = free_port()
    # under the user's home: StrictModes refuses /tmp
    own_keys = HOME / ".ssh" / f"authorized_keys.{port}"
    own_keys.write_text(client_pub + "\n")
    os.chown(own_keys, user.pw_uid, user.pw_gid)
    own_keys.chmod(0o600)
    (work / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_pub}\n")
    (work / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {work / 'host_key'}\nPidFile {work / 'sshd.pid'}\n"
        # This instance's own key list and engine: another instance (another worker's, or another module's
        # session) rewriting the one user's ~/.ssh cannot lock this one out or point it at another engine.
        f"AuthorizedKeysFile {own_keys}\nSetEnv DOCKER_HOST=unix://{engine_socket}\n"
        "PermitUserEnvironment yes\nUsePAM no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
        f"AllowUsers {USER}\nAllowStreamLocalForwarding yes\nLogLevel VERBOSE\nMaxStartups 100\n"
    )
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    log = work / "sshd.log"
    proc = subprocess.Popen(["/usr/sbin/sshd", "-D", "-f", str(work / "sshd_config"), "-E", str(log)],
                            start_new_session=True)  # fmt: skip
    try:
        _wait_listening(port, proc, log)
        node = SshNode(
            alias=f"cg-node-{port}", port=port, dir=work, log=log, engine_url=second_engine.url
        )
        node.config.write_text(node.write_config().read_text())
        yield node
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)
        own_keys.unlink(missing_ok=True)
        shutil.rmtree(work, ignore_errors=True)
