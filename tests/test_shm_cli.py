"""`composegen shm` on the command line: the plain scan is answered before typer loads (fastpath.py),
and must behave exactly as the typer command does; every other form goes to typer."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from composegen.cli import fastpath
from tests.helpers import REPO, run_cli

# The typer CLI with the fast path bypassed, for comparing the two on the same arguments.
TYPER_ONLY = "import sys; sys.argv[0] = 'composegen'; from composegen.cli.main import main; main()"


def _typer_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", TYPER_ONLY, *args], capture_output=True, text=True, cwd=REPO)


def _stable(stdout: str) -> dict:
    report = json.loads(stdout)
    for key in ("scanned_at", "scan_seconds"):
        report.pop(key)
    for entry in report["entries"]:
        entry.pop("age_seconds")
    return report


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["shm"], {}),
        (["shm", "--json"], {"as_json": True}),
        (
            ["shm", "--path", "/x", "--fail-on-leftover", "--json"],
            {"path": "/x", "fail_on_leftover": True, "as_json": True},
        ),
        (["shm", "--path=/x"], {"path": "/x"}),
        (["shm", "--json", "--json"], None),  # repeated: typer decides
        (["shm", "--reclaim"], None),
        (["shm", "--container", "c"], None),
        (["shm", "--path"], None),  # value missing: typer explains
        (["shm", "--path", "--json"], None),
        (["shm", "--path="], None),
        (["shm", "--help"], None),
        (["--root", ".", "shm"], None),
        (["status"], None),
    ],
)
def test_which_forms_the_fast_path_answers(argv, expected):
    assert fastpath.plain_shm_scan(argv) == expected


def test_fast_path_and_typer_agree_on_output_and_exit_codes(shm_dir):
    (shm_dir / "psm_deadbeef").write_bytes(b"x")
    (shm_dir / "stray").write_bytes(b"y")
    for args in (["--json"], ["--json", "--fail-on-leftover"], []):
        fast, typer = run_cli("shm", "--path", str(shm_dir), *args), _typer_cli("shm", "--path", str(shm_dir), *args)
        assert (fast.returncode, fast.stderr) == (typer.returncode, typer.stderr)
        if "--json" in args:
            assert _stable(fast.stdout) == _stable(typer.stdout)
        else:
            assert fast.stdout.splitlines()[-1] == typer.stdout.splitlines()[-1]  # the free-space line
    assert run_cli("shm", "--path", str(shm_dir), "--json").returncode == 0
    failing = run_cli("shm", "--json", "--fail-on-leftover", f"--path={shm_dir}")
    assert failing.returncode == 1 and failing.stderr == f"composegen: 1 leftover file(s) in {shm_dir}\n"
    assert json.loads(failing.stdout)["totals"]["leftover"]["count"] == 1


def test_bad_path_is_one_line_and_exit_2_on_both_paths(tmp_path):
    missing = str(tmp_path / "nope")
    fast, typer = run_cli("shm", "--path", missing, "--json"), _typer_cli("shm", "--path", missing, "--json")
    assert fast.returncode == typer.returncode == 2
    assert fast.stderr == typer.stderr == f"{missing}: path: does not exist\n" and fast.stdout == ""


def test_fast_path_does_not_load_typer(shm_dir):
    probe = (
        "import os, sys; sys.argv = ['composegen', 'shm', '--json', '--path', sys.argv[1]]\n"
        "real_exit, me = os._exit, os.getpid()\n"
        "def leave(code):  # the scan's forked child leaves through os._exit too\n"
        "    if os.getpid() == me:\n"
        "        sys.stderr.write('typer loaded' if 'typer' in sys.modules else 'typer not loaded')\n"
        "    sys.stderr.flush()\n"
        "    real_exit(code)\n"
        "os._exit = leave\n"
        "from composegen.cli.entry import main\n"
        "main()"
    )
    res = subprocess.run([sys.executable, "-c", probe, str(shm_dir)], capture_output=True, text=True, cwd=REPO)
    assert res.returncode == 0 and res.stderr == "typer not loaded", res.stderr
    assert json.loads(res.stdout)["path"] == str(shm_dir)


def test_other_forms_reach_typer(shm_dir):
    helped = run_cli("shm", "--help")
    assert helped.returncode == 0 and "--reclaim" in helped.stdout
    assert run_cli("shm", "--path").returncode == 2  # click: option requires an argument
    both = run_cli("shm", "--path", str(shm_dir), "--container", "x")
    assert both.returncode == 2 and "--path and --container name different places" in both.stderr
    (shm_dir / "psm_deadbeef").write_bytes(b"x")
    preview = run_cli("shm", "--path", str(shm_dir), "--reclaim", "--json")
    assert preview.returncode == 0 and [c["name"] for c in json.loads(preview.stdout)["candidates"]] == ["psm_deadbeef"]
    assert (shm_dir / "psm_deadbeef").exists()


def test_a_reader_that_leaves_early_gets_one_line_not_a_crash(shm_dir):
    for i in range(3000):  # ~0.7 MB of JSON: more than a pipe holds, so the writer is still writing
        (shm_dir / f"psm_{i:08x}").touch()
    proc = subprocess.Popen(
        [sys.executable, "-m", "composegen", "shm", "--json", "--path", str(shm_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
    )
    assert proc.stdout.read(2) == b'{"'
    proc.stdout.close()
    assert proc.stderr.read() == b"composegen: output closed early (broken pipe)\n" and proc.wait() == 3
