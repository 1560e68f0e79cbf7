"""Shell completion of profile names, gate names and run directories, through the real bash protocol.

The installed console script is run as bash's completion function runs it (`_COMPOSEGEN_COMPLETE=complete_bash`
with COMP_WORDS / COMP_CWORD), in a temporary project, and its answer is read back word by word.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import run_cli
from tests.support.helpers import MINIMAL, REPO, make_project

SCRIPT = Path(sys.executable).with_name("composegen")
LOG = REPO / "tests/data/logs/vllm-0.33.0-r33-4096-arm.log"


def complete(line: str, cwd: Path, env: dict | None = None) -> list[str]:
    """What bash would offer for the last word of `line` (a trailing space: a new, empty word)."""
    words = line.split()
    if line.endswith(" "):
        words.append("")
    full_env = {k: v for k, v in os.environ.items() if k != "COMPOSEGEN_ROOT"}
    full_env |= {
        "_COMPOSEGEN_COMPLETE": "complete_bash",
        "COMP_WORDS": line,
        "COMP_CWORD": str(len(words) - 1),
    }
    res = subprocess.run(
        [str(SCRIPT)], cwd=cwd, env=full_env | (env or {}), capture_output=True, text=True
    )
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
    return res.stdout.split()


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    mine = {"alpha-4k": MINIMAL, "alpha-8k": MINIMAL, "beta": MINIMAL}
    root = make_project(tmp_path_factory.mktemp("complete"), mine, copy_shipped=True)
    res = run_cli(
        "--root", str(root), "evidence", "--from-log", str(LOG), "--profile", "4096-131k", "--json"
    )
    assert res.returncode == 0, res.stderr
    return root


def test_the_installed_script_is_what_runs():
    assert SCRIPT.is_file() and os.access(SCRIPT, os.X_OK)


def test_profile_names_complete_for_commands_that_take_a_profile(project):
    for command in (
        "up",
        "down",
        "status",
        "logs",
        "show",
        "gate",
        "ladder",
        "evidence",
        "plan",
        "validate",
        "diff",
    ):
        assert complete(f"composegen {command} alp", project) == ["alpha-4k", "alpha-8k"], command
    assert complete("composegen up b", project) == ["beta"]
    assert complete("composegen up zzz", project) == []
    assert complete("composegen up ", project) == sorted(
        p.stem for p in (project / "profiles").glob("*.yaml")
    )


def test_root_on_the_line_is_where_names_come_from(project, tmp_path):
    assert complete(f"composegen --root {project} up alp", tmp_path) == ["alpha-4k", "alpha-8k"]
    assert complete("composegen up alp", tmp_path, env={"COMPOSEGEN_ROOT": str(project)}) == [
        "alpha-4k",
        "alpha-8k",
    ]
    # no project here: nothing, and no traceback
    assert complete("composegen up alp", tmp_path) == []


def test_gate_names_complete_item_by_item(project):
    assert complete("composegen gate beta --only s", project) == ["smoke", "stream_tools"]
    assert complete("composegen gate beta --only smoke,", project) == [
        "smoke,json",
        "smoke,tools",
        "smoke,stream_tools",
        "smoke,continuation",
        "smoke,responses",
    ]
    assert complete("composegen gate beta --only smoke,json,c", project) == [
        "smoke,json,continuation"
    ]


def test_runs_and_profile_names_complete_for_compare(project):
    (run,) = [p.name for p in (project / "runs").iterdir()]
    assert complete("composegen compare runs/", project) == [f"runs/{run}"]
    assert complete("composegen compare 40", project) == ["4096-131k"]
    names = sorted(p.stem for p in (project / "profiles").glob("*.yaml"))
    assert complete("composegen compare runs/ ", project) == [f"runs/{run}", *names]
    assert complete("composegen report r", project) == [f"runs/{run}", "r33"]
    assert complete("composegen plan beta --from runs/", project) == [f"runs/{run}"]
