"""composegen as a user installs it: the wheel and sdist built from this checkout once per test run (all workers)
(`python -m build`: the sdist, then the wheel from the sdist), and the wheel installed with
`uv tool install` into a fresh tool venv in a temp directory, far from the checkout.

    from tests.support.installed import dists, installed_tool  # noqa: F401  (session fixtures)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.helpers import REPO
from tests.support.parallel import once_per_run


@dataclass
class Dists:
    wheel: Path
    sdist: Path


@dataclass
class InstalledTool:
    bin: Path  # the `composegen` console script uv put on its bin dir
    python: Path  # the tool venv's interpreter

    def env(self, **extra: str) -> dict[str, str]:
        """The caller's environment (DOCKER_HOST/DOCKER_CONTEXT included), without what would point the tool
        back at the checkout."""
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("COMPOSEGEN_ROOT", "PYTHONPATH", "VIRTUAL_ENV")
        }
        env["PATH"] = f"{self.bin.parent}{os.pathsep}{env.get('PATH', '')}"
        return {**env, "NO_COLOR": "1", **extra}

    def run(
        self, *args: str, cwd: Path, timeout: float = 300, **env: str
    ) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(self.bin), *args],
            cwd=cwd,
            env=self.env(**env),
            stdin=subprocess.DEVNULL,  # not a terminal: nothing may wait for an answer
            capture_output=True,
            text=True,
            timeout=timeout,
        )


WHEELHOUSE = REPO / ".cache" / "wheelhouse"  # made by scripts/provision.d/80-wheelhouse.sh


@pytest.fixture(scope="session")
def dists(tmp_path_factory) -> Dists:
    made = once_per_run(tmp_path_factory, "dists", _build)  # one build for all the workers of a run
    return Dists(Path(made["wheel"]), Path(made["sdist"]))


def _build(out: Path) -> dict:
    # --no-isolation: hatchling comes from the test extra, so nothing is downloaded per session.
    res = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(REPO)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    (wheel,) = out.glob("composegen-*.whl")
    (sdist,) = out.glob("composegen-*.tar.gz")
    return {"wheel": str(wheel), "sdist": str(sdist)}


@pytest.fixture(scope="session")
def installed_tool(dists, tmp_path_factory) -> InstalledTool:
    made = once_per_run(tmp_path_factory, "uv-tools", lambda home: _install(dists.wheel, home))
    return InstalledTool(Path(made["bin"]), Path(made["python"]))


def _install(wheel: Path, home: Path) -> dict:
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    assert uv, "uv is missing: it comes with the test extra (`pip install -e '.[test]'`)"
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")},
        "UV_TOOL_DIR": str(home / "tools"),
        "UV_TOOL_BIN_DIR": str(home / "bin"),
        "UV_PYTHON_DOWNLOADS": "never",  # the interpreter this machine has, as a user's would be
    }
    base_python = Path(sys.base_prefix) / "bin" / "python3"
    assert WHEELHOUSE.is_dir(), (
        f"no {WHEELHOUSE}: run `bash scripts/provision-tests.sh` (provision.d/80-wheelhouse.sh)"
    )
    # never the package index mid-run
    offline = ["--offline", "--no-index", "--find-links", str(WHEELHOUSE)]
    res = subprocess.run(
        [uv, "tool", "install", *offline, "--python", str(base_python), str(wheel)],
        env=env,
        cwd=home,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    tool = InstalledTool(
        home / "bin" / "composegen", home / "tools" / "composegen" / "bin" / "python"
    )
    assert tool.bin.is_file() and tool.python.is_file(), list(home.rglob("composegen"))[:10]
    return {"bin": str(tool.bin), "python": str(tool.python)}
