"""Running commands for provision: the `docker` CLI (it honours DOCKER_HOST and DOCKER_CONTEXT as
the caller set them: the child inherits the whole environment), apt-get, and who we are."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Sequence

from composegen.errors import EngineError

Log = Callable[[str], None]


def is_root() -> bool:
    return os.geteuid() == 0


def which(name: str) -> str | None:
    return shutil.which(name)


def run(
    argv: Sequence[str], *, timeout: float, stdin: int | None = None
) -> subprocess.CompletedProcess[str]:
    """ARGV's outcome (never raises for a non-zero exit); EngineError when it cannot start or
    overruns."""
    try:
        return subprocess.run(
            list(argv), capture_output=True, text=True, timeout=timeout, stdin=stdin
        )
    except FileNotFoundError:
        raise EngineError(f"{argv[0]}: not found on PATH") from None
    except subprocess.TimeoutExpired:
        raise EngineError(f"{' '.join(argv[:3])} … did not finish within {timeout:.0f} s") from None


def docker(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return run(["docker", *args], timeout=timeout)


def last_lines(text: str, n: int = 8) -> str:
    return "\n".join(text.strip().splitlines()[-n:])


class Apt:
    """apt-get install as root, with one `apt-get update` per provision run."""

    def __init__(self, log: Log) -> None:
        self.log = log
        self.updated = False

    def install(self, *packages: str) -> None:
        if not is_root():
            raise EngineError(
                f"installing {' '.join(packages)} needs root",
                hint="run `sudo composegen provision`",
            )
        if which("apt-get") is None:
            raise EngineError(
                f"apt-get not found: install {' '.join(packages)} with your package manager"
            )
        env_argv = ["env", "DEBIAN_FRONTEND=noninteractive"]
        if not self.updated:
            self.log("apt-get update")
            res = run([*env_argv, "apt-get", "update", "-qq"], timeout=600)
            if res.returncode != 0:
                raise EngineError("apt-get update failed", details=last_lines(res.stderr))
            self.updated = True
        self.log(f"apt-get install -y {' '.join(packages)}")
        res = run(
            [*env_argv, "apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages],
            timeout=1200,
        )
        if res.returncode != 0:
            raise EngineError(
                f"apt-get install {' '.join(packages)} failed", details=last_lines(res.stderr)
            )
