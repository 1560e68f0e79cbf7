"""Fixtures for the emulator tests: `start(*args, ready=True, **env)` runs a local emulator process."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.support.ports import free_port

READY = "Application startup complete."


class Emulator:
    """One `python -m composegen.emulator serve …` in its own process group; stdout collected by a thread."""

    def __init__(self, args: list[str], shm_dir: Path, **env: str):
        self.port = free_port()
        self.shm_dir = shm_dir
        self.lines: list[str] = []
        full_env = {
            **os.environ,
            "EMU_SHM_DIR": str(shm_dir),
            "EMU_LOAD_SECONDS": "0.3",
            "EMU_DECODE_TOK_S": "2000",
            **env,
        }
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "composegen.emulator",
                "serve",
                *args,
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=full_env,
            start_new_session=True,
        )
        threading.Thread(target=self._collect, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.port}"

    def _collect(self):
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    @property
    def log(self) -> str:
        return "\n".join(self.lines)

    def wait_for(self, text: str, timeout: float = 20) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.log:
            if self.proc.poll() is not None and text not in self.log:
                time.sleep(0.2)  # let the reader drain
                assert text in self.log, (
                    f"exited {self.proc.returncode} before {text!r}:\n{self.log}"
                )
            assert time.monotonic() < deadline, f"no {text!r} within {timeout}s:\n{self.log}"
            time.sleep(0.02)

    def port_open(self) -> bool:
        with socket.socket() as sock:
            return sock.connect_ex(("127.0.0.1", self.port)) == 0

    def stop(self, sig=signal.SIGTERM) -> int:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, sig) if sig == signal.SIGKILL else self.proc.send_signal(sig)
        return self.proc.wait(timeout=20)


@pytest.fixture
def start(tmp_path):
    started: list[Emulator] = []

    def _start(*args: str, ready: bool = True, **env: str) -> Emulator:
        emu = Emulator(list(args), tmp_path / f"shm{len(started)}", **env)
        emu.shm_dir.mkdir()
        started.append(emu)
        if ready:
            emu.wait_for(READY)
        return emu

    yield _start
    for emu in started:
        if emu.proc.poll() is None:
            os.killpg(emu.proc.pid, signal.SIGKILL)
            emu.proc.wait(timeout=20)
