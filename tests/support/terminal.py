"""A command in a real pseudo-terminal of a fixed size (tmux), with every byte it drew kept."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]|\r")


class Terminal:
    def __init__(self, tmp: Path, width: int = 80, height: int = 24) -> None:
        if not shutil.which("tmux"):
            pytest.fail(
                "tmux is missing: run `bash scripts/provision-tests.sh` (provision.d/55-tmux.sh)"
            )
        self.session = f"composegen-test-{uuid.uuid4().hex[:10]}"
        self.width, self.height = width, height
        self.raw = tmp / f"{self.session}.raw"
        self.done = tmp / f"{self.session}.exit"

    def run(self, argv: list[str], cwd: Path, timeout: float = 120) -> int:
        """Run argv in the terminal until it exits; its exit code."""
        self.start(argv, cwd)
        return self.wait_exit(timeout)

    def start(self, argv: list[str], cwd: Path) -> None:
        # The shell stays after the command (sleep) so that the screen can still be read; close() ends it.
        command = f"cd {shlex.quote(str(cwd))} && sleep 0.3 && {shlex.join(argv)}; echo $? > {self.done}; sleep 3600"
        self._tmux(
            "new-session",
            "-d",
            "-s",
            self.session,
            "-x",
            str(self.width),
            "-y",
            str(self.height),
            command,
        )
        self._tmux("pipe-pane", "-o", "-t", self.session, f"cat >> {shlex.quote(str(self.raw))}")

    def wait_for(self, text: str, timeout: float = 60) -> None:
        """Until the program has drawn `text`."""
        deadline = time.monotonic() + timeout
        while text not in self.drawn():
            assert time.monotonic() < deadline, (
                f"{text!r} not drawn in {timeout} s:\n{self.screen()}"
            )
            time.sleep(0.1)

    def keys(self, *keys: str) -> None:
        self._tmux("send-keys", "-t", self.session, *keys)

    def wait_exit(self, timeout: float = 120) -> int:
        deadline = time.monotonic() + timeout
        while not self.done.exists() or not self.done.read_text().strip():
            assert time.monotonic() < deadline, f"not finished in {timeout} s:\n{self.screen()}"
            time.sleep(0.1)
        time.sleep(0.2)  # the last bytes reach the pipe
        return int(self.done.read_text().strip() or "-1")

    def screen(self, joined: bool = False) -> list[str]:
        """The pane with its scrollback; `joined` merges lines the terminal wrapped itself."""
        argv = ["capture-pane", "-p", "-S", "-2000", "-t", self.session] + (
            ["-J"] if joined else []
        )
        text = self._tmux(*argv)
        lines = text.splitlines()
        while lines and not lines[-1].strip():
            lines.pop()
        return lines

    def drawn(self) -> str:
        """Everything the program wrote to the terminal, escape sequences removed."""
        return (
            ANSI.sub("", self.raw.read_bytes().decode("utf-8", "replace"))
            if self.raw.exists()
            else ""
        )

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.session, "kill-server"], capture_output=True)

    def _tmux(self, *argv: str) -> str:
        # A tmux server of its own (-L): a shared server would hand the pane the environment of whoever started
        # it (another DOCKER_HOST), not this caller's.
        proc = subprocess.run(
            ["tmux", "-L", self.session, *argv], capture_output=True, text=True, timeout=30
        )
        assert proc.returncode == 0, f"tmux {' '.join(argv)}: {proc.stderr}"
        return proc.stdout
