"""Run the composegen vLLM emulator as a local subprocess on a free loopback port (no Docker needed).

    with EmulatorProc.start(tmp_path, max_model_len=4096, env={"EMU_WEIGHTS_GIB": "80"}) as emu:
        emu.base_url, emu.model, emu.log_text()

The emulator's shared-memory files go to a directory under tmp_path, never the host's /dev/shm.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from tests.support.ports import free_port

REPO = Path(__file__).resolve().parents[2]
SERVED = "emu-model"
# The serve flags of the real vLLM 0.26.0 recorded in tests/data/real-0.26.0-h200 (serve-bf16-eager.log).
RECORDED_FLAGS = [
    "/models/tiny-llama",
    "--served-model-name",
    "tiny",
    "--max-model-len",
    "4096",
    "--max-num-batched-tokens",
    "2048",
    "--max-num-seqs",
    "4",
    "--gpu-memory-utilization",
    "0.30",
    "--enforce-eager",
]


@dataclass
class EmulatorProc:
    proc: subprocess.Popen
    port: int
    model: str
    log_path: Path

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log_text(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    @classmethod
    def start(
        cls,
        tmp: Path,
        *,
        max_model_len: int = 8192,
        extra_args: tuple[str, ...] = (),
        env: dict | None = None,
        served: str = SERVED,
        serve_args: list[str] | None = None,
        wait_ready: bool = True,
        timeout: float = 30,
    ) -> EmulatorProc:
        """serve_args: the argv after `vllm serve` (e.g. a profile's Resolved.argv()); host and port are
        appended, and argparse lets the last one win."""
        port = free_port()
        shm = tmp / f"shm-{port}"
        shm.mkdir(parents=True, exist_ok=True)
        if serve_args is None:
            serve_args = [
                "org/model",
                "--served-model-name",
                served,
                "--max-model-len",
                str(max_model_len),
                "--enable-auto-tool-choice",
                "--tool-call-parser",
                "deepseek_v4",
                "--reasoning-parser",
                "deepseek_v4",
            ]
        argv = [
            sys.executable,
            "-m",
            "composegen.emulator",
            "serve",
            *serve_args,
            *extra_args,
            "--port",
            str(port),
            "--host",
            "127.0.0.1",
        ]
        full_env = {
            **os.environ,
            "EMU_LOAD_SECONDS": "0.2",
            "EMU_SHM_DIR": str(shm),
            "PYTHONPATH": str(REPO),
            **{k: str(v) for k, v in (env or {}).items()},
        }
        log_path = tmp / f"emulator-{port}.log"
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=full_env,
                cwd=REPO,
                start_new_session=True,
            )
        emu = cls(proc, port, served, log_path)
        if wait_ready:
            emu.wait_ready(timeout)
        return emu

    def wait_ready(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return  # exited (e.g. the memory model did not fit): the log says why
            try:
                with urllib.request.urlopen(self.base_url + "/health", timeout=1) as resp:
                    if resp.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.05)
        self.stop()
        raise TimeoutError(
            f"emulator on port {self.port} not ready after {timeout} s:\n{self.log_text()[-2000:]}"
        )

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)  # the group this helper started, by its id
                self.proc.wait(5)

    def __enter__(self) -> EmulatorProc:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
