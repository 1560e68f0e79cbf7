"""`composegen shm` on the command line: the plain scan is answered before typer loads (fastpath.py),
and must behave exactly as the typer command does; every other form goes to typer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import jsonschema
import pytest

from composegen.cli import fastpath
from composegen.shm import scan as shm
from tests.support.cli import run_cli
from tests.support.helpers import REPO
from tests.support.shmreclaim import settled_cli

# The typer CLI with the fast path bypassed, for comparing the two on the same arguments.
TYPER_ONLY = "import sys; sys.argv[0] = 'composegen'; from composegen.cli.main import main; main()"


def _typer_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", TYPER_ONLY, *args], capture_output=True, text=True, cwd=REPO
    )


def _stable(stdout: str) -> dict:
    report = json.loads(stdout)
    # time; others share /dev/shm
    for key in ("scanned_at", "scan_seconds", "filesystem", "unreadable_pids"):
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
        (["shm", "reclaim"], None),
        (["shm", "--reclaim"], None),  # the old spelling: typer's, through aliases.py
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
    found = fastpath.plain_shm_scan(argv)
    assert found == (None if expected is None else fastpath.ShmScanOptions(**expected))


def test_fast_path_and_typer_agree_on_output_and_exit_codes(shm_dir):
    (shm_dir / "psm_deadbeef").write_bytes(b"x")
    (shm_dir / "stray").write_bytes(b"y")
    for args in (["--json"], ["--json", "--fail-on-leftover"], []):
        fast, typer = (
            run_cli("shm", "--path", str(shm_dir), *args),
            _typer_cli("shm", "--path", str(shm_dir), *args),
        )
        assert (fast.returncode, fast.stderr) == (typer.returncode, typer.stderr)
        if "--json" in args:
            assert _stable(fast.stdout) == _stable(typer.stdout)
        else:
            # the free-space line
            assert fast.stdout.splitlines()[-1] == typer.stdout.splitlines()[-1]
    assert run_cli("shm", "--path", str(shm_dir), "--json").returncode == 0
    failing = run_cli("shm", "--json", "--fail-on-leftover", f"--path={shm_dir}")
    assert (
        failing.returncode == 1
        and failing.stderr == f"composegen: 1 leftover file(s) in {shm_dir}\n"
    )
    assert json.loads(failing.stdout)["totals"]["leftover"]["count"] == 1


def test_bad_path_is_one_line_and_exit_2_on_both_paths(tmp_path):
    missing = str(tmp_path / "nope")
    fast, typer = (
        run_cli("shm", "--path", missing, "--json"),
        _typer_cli("shm", "--path", missing, "--json"),
    )
    assert fast.returncode == typer.returncode == 2
    assert fast.stderr == typer.stderr == f"{missing}: path: does not exist\n" and fast.stdout == ""


def test_fast_path_loads_neither_typer_nor_the_engine(shm_dir):
    probe = (
        "import os, sys; sys.argv = ['composegen', 'shm', '--json', '--path', sys.argv[1]]\n"
        "real_exit, me = os._exit, os.getpid()\n"
        "def leave(code):  # the scan's forked child leaves through os._exit too\n"
        "    if os.getpid() == me:\n"
        "        loaded = [m for m in ('typer', 'composegen.stack.engine', 'docker') if m in sys.modules]\n"
        "        sys.stderr.write(f'{loaded} loaded')\n"
        "    sys.stderr.flush()\n"
        "    real_exit(code)\n"
        "os._exit = leave\n"
        "from composegen.cli.entry import main\n"
        "main()"
    )
    res = subprocess.run(
        [sys.executable, "-c", probe, str(shm_dir)], capture_output=True, text=True, cwd=REPO
    )
    # no holder in a container here
    assert res.returncode == 0 and res.stderr == "[] loaded", res.stderr
    assert json.loads(res.stdout)["path"] == str(shm_dir)


def test_other_forms_reach_typer(shm_dir):
    helped = run_cli("shm", "--help")
    assert helped.returncode == 0 and "reclaim  Preview" in helped.stdout
    assert run_cli("shm", "--path").returncode == 2  # click: option requires an argument
    both = run_cli("shm", "--path", str(shm_dir), "--container", "x")
    assert both.returncode == 2 and "--path and --container name different places" in both.stderr
    (shm_dir / "psm_deadbeef").write_bytes(b"x")
    preview = run_cli("shm", "reclaim", "--path", str(shm_dir), "--min-age", "0", "--json")
    assert preview.returncode == 0 and [
        c["name"] for c in json.loads(preview.stdout)["candidates"]
    ] == ["psm_deadbeef"]
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
    assert (
        proc.stderr.read() == b"composegen: output closed early (broken pipe)\n"
        and proc.wait() == 3
    )


def _schema(name: str) -> dict:
    res = run_cli("schema", "--report", name)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def test_fast_path_and_reclaim_json_match_the_report_schemas(shm_dir, holders, tmp_path):
    holders("f = open(os.path.join(D, 'psm_held0000'), 'wb')", shm_dir)
    for name in ("psm_deadbeef", "stray", "tab\there"):
        (shm_dir / name).write_bytes(b"x")
    (shm_dir / "psm_dir").mkdir()
    (shm_dir / "psm_link").symlink_to(tmp_path)
    fast = run_cli("shm", "--json", "--path", str(shm_dir))
    assert fast.returncode == 0 and "typer" not in fast.stderr
    report = json.loads(fast.stdout)
    assert {e["class"] for e in report["entries"]} == {"in-use", "leftover", "unknown"}
    jsonschema.validate(report, _schema("shm"))
    jsonschema.validate(
        json.loads(_typer_cli("shm", "--json", "--path", str(shm_dir)).stdout), _schema("shm")
    )
    for args in ([], ["--yes", "--ignore-unreadable"]):
        res = settled_cli(
            run_cli, "shm", "reclaim", "--min-age", "0", "--json", "--path", str(shm_dir), *args
        )
        assert res.returncode == 0, res.stderr
        jsonschema.validate(json.loads(res.stdout), _schema("shm-reclaim"))
    assert json.loads(res.stdout)["removed"] == [{"name": "psm_deadbeef", "bytes": 4096}]


@pytest.fixture
def disk_dir(tmp_path):
    """A writable directory that is not on a tmpfs (tmp_path, else home, else the checkout)."""
    for base in (tmp_path, Path.home(), REPO):
        fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY)
        try:
            on_tmpfs = shm.filesystem_type(fd) == shm.TMPFS_MAGIC
        finally:
            os.close(fd)
        if not on_tmpfs and os.access(base, os.W_OK):
            path = Path(tempfile.mkdtemp(dir=base, prefix=".composegen-test-"))
            yield path
            subprocess.run(["rm", "-rf", "--", str(path)], check=False)
            return
    pytest.skip("no writable directory outside a tmpfs")


def test_a_path_that_is_not_a_tmpfs_is_refused_unless_forced(disk_dir):
    (disk_dir / "psm_deadbeef").write_bytes(b"someone's data")
    for args in (["--json"], [], ["reclaim", "--yes", "--min-age", "0"]):
        argv = ["shm", *args[:1], "--path", str(disk_dir), *args[1:]]
        fast, typer = run_cli(*argv), _typer_cli(*argv)
        assert fast.returncode == typer.returncode == 2 and fast.stdout == ""
        assert fast.stderr == typer.stderr and fast.stderr.count("\n") == 1
        assert (
            fast.stderr.startswith(f"{disk_dir}: path: not a tmpfs (filesystem type 0x")
            and "--force" in fast.stderr
        )
    assert (disk_dir / "psm_deadbeef").exists()
    forced = run_cli("shm", "--path", str(disk_dir), "--json", "--force")
    assert forced.returncode == 0 and json.loads(forced.stdout)["totals"]["leftover"]["count"] == 1
    args = ["--yes", "--ignore-unreadable", "--min-age", "0", "--force", "--json"]
    removed = settled_cli(run_cli, "shm", "reclaim", "--path", str(disk_dir), *args)
    assert removed.returncode == 0 and [
        r["name"] for r in json.loads(removed.stdout)["removed"]
    ] == ["psm_deadbeef"]


@pytest.mark.parametrize(
    "args, problem",
    [
        (["--json", "reclaim"], "--path, --json: give them after `reclaim`"),
        (["reclaim", "--min-age", "-1"], "--min-age: -1.0 is not a number of seconds >= 0"),
        (["reclaim", "--min-age", "nan"], "--min-age: nan is not a number of seconds >= 0"),
        (["--container", "c", "--force"], "--force: only meaningful with --path"),
    ],
)
def test_reclaim_options_that_mean_nothing_are_refused(shm_dir, args, problem):
    res = (
        run_cli("shm", *args[:1], "--path", str(shm_dir), *args[1:])
        if "--container" not in args
        else run_cli("shm", *args)
    )
    assert (
        res.returncode == 2
        and res.stdout == ""
        and problem in res.stderr
        and res.stderr.count("\n") == 1
    )


HOSTILE_COMM = "f = open(os.path.join(D, 'psm_held0000'), 'wb')\nopen('/proc/self/comm', 'w').write('x\\x1b[2Jy\\n')"


def test_text_output_escapes_control_characters_in_names(shm_dir, holders):
    names = [
        "psm_a\nfake line",
        "psm_\x1b[31mred",
        "psm_\u202eexe.txt",
        "psm_back\\slash",
        "psm_\x7f\x85",
    ]
    for name in names:
        (shm_dir / name).write_bytes(b"x")
    with open(os.fsencode(str(shm_dir)) + b"/psm_\xff", "wb") as handle:  # not UTF-8
        handle.write(b"y")
    holders(HOSTILE_COMM, shm_dir)
    res = run_cli("shm", "--path", str(shm_dir))
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    # A line per entry (no name forged one), then totals, free space and maybe unreadable pids.
    first_words = sorted(line.split(" ", 1)[0] for line in lines[: len(names) + 3])
    assert first_words == ["CLASS", "in-use"] + ["leftover"] * 6
    assert lines[len(names) + 3].startswith("in-use: 1") and lines[len(names) + 4].startswith(
        f"{shm_dir}: "
    )
    for shown in (
        "psm_a\\x0afake line",
        "psm_\\x1b[31mred",
        "psm_\\u202eexe.txt",
        "psm_back\\\\slash",
        "psm_\\x7f\\x85",
        "psm_\\xff",
        "/x\\x1b[2Jy",
    ):
        assert shown in res.stdout, shown
    assert not any(ch in res.stdout for ch in "\x1b\u202e\x7f\x85")
    preview = run_cli("shm", "reclaim", "--path", str(shm_dir), "--min-age", "0")
    assert (
        "would remove psm_a\\x0afake line (4.0 KiB)" in preview.stdout
        and "\x1b" not in preview.stdout
    )
