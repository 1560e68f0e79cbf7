"""The gates with the lowest openai pyproject.toml allows and with the newest (the one installed): the
floor is installed offline from the wheelhouse (scripts/provision.d/80-wheelhouse.sh downloads it with
composegen's dependencies) into a directory put first on the path of a child python, which runs every gate
against the emulator. openai up to 2.x is built on httpx, 3.x on its fork httpx2: composegen names
neither's fork, it uses the one openai brings (gate_client.openai_http)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.support.emulator_proc import EmulatorProc

REPO = Path(__file__).resolve().parents[2]
WHEELHOUSE = REPO / ".cache" / "wheelhouse"
RUN = (
    "import sys, openai; from composegen.evidence import gates; "
    "r = gates.run_gates(sys.argv[1], sys.argv[2], tools=3, timeout=30); "
    "print(openai.__version__, [(g.name, g.passed, g.reason) for g in r.gates]); sys.exit(not r.ok)"
)


def openai_floor() -> str:
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    floor = next(re.fullmatch(r"openai>=([\d.]+)", d) for d in deps if d.startswith("openai"))
    assert floor is not None, "pyproject.toml must give openai as openai>=FLOOR"
    return floor[1]


@pytest.fixture(scope="module")
def emu(tmp_path_factory):
    with EmulatorProc.start(tmp_path_factory.mktemp("emu")) as proc:
        yield proc


def _gates(emu: EmulatorProc, path: Path | None = None) -> str:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(p) for p in (path, REPO) if p)}
    done = subprocess.run(
        [sys.executable, "-c", RUN, emu.base_url, emu.model],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_the_gates_pass_with_the_lowest_openai_allowed(emu, tmp_path):
    floor = openai_floor()
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--target"]
    subprocess.run(
        [*pip, str(tmp_path), "--find-links", str(WHEELHOUSE), f"openai=={floor}"],
        check=True,
        timeout=300,
    )
    assert _gates(emu, tmp_path).startswith(f"{floor} ")
    assert not list(tmp_path.glob("httpx2*"))  # the floor is built on httpx, not the fork


def test_the_gates_pass_with_the_newest_openai_installed(emu):
    import openai

    assert _gates(emu).startswith(f"{openai.__version__} ")
