"""A python process that sets files up and answers commands, for the reclaim's race tests against real
processes (tests/shm/conftest.py's `actors` fixture starts them and closes them after the test)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path


class Actor:
    """A python process running `setup`, then one command per stdin line (`handlers[line]()`), printing
    each answer as a line. It holds whatever setup leaves open until stdin closes."""

    def __init__(self, code: str, directory: Path):
        program = (
            "import ctypes, json, os, socket, sys, threading, time\nD = sys.argv[1]\n"
            + textwrap.dedent(code)
            + "\nprint('ready', flush=True)\n"
            "for line in sys.stdin:\n"
            "    print(json.dumps(handlers[line.strip()]()), flush=True)\n"
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-c", program, str(directory)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        line = self.proc.stdout.readline().strip()
        assert line == "ready", f"actor failed to start (rc {self.proc.poll()})"

    def ask(self, command: str):
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)  # reaped: no zombie outlives the test
