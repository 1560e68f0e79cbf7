"""Every file composegen writes goes through composegen.safewrite: never through a link, never over a
special file, all-or-nothing, and a failed write (disk full, EFBIG, read-only) is one line, exit 3.

The failures are real: a small tmpfs mounted for the test (disk full), a read-only bind mount, and
RLIMIT_FSIZE set in the CLI subprocess (EFBIG). Mounting needs root; those tests skip without it.
"""

from __future__ import annotations

import contextlib
import os
import resource
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from composegen import safewrite
from composegen.errors import BadInput, WriteFailed
from tests.support.cli import run_cli
from tests.support.helpers import MINIMAL, REPO, make_project

ROOT = os.geteuid() == 0


def _leftovers(directory: Path) -> list[str]:
    return sorted(
        p.name for p in directory.rglob("*") if p.name.startswith(".") and ".tmp" in p.name
    )


@contextlib.contextmanager
def _mounted(*argv: str, target: Path):
    subprocess.run(["mount", *argv, str(target)], check=True, capture_output=True)
    try:
        yield target
    finally:
        subprocess.run(["umount", "-l", str(target)], check=False, capture_output=True)


def _special(tmp_path: Path) -> dict[str, Path]:
    """One entry of each kind a writer must refuse to replace."""
    import socket

    made = {"fifo": tmp_path / "fifo", "dir": tmp_path / "dir", "link": tmp_path / "link"}
    os.mkfifo(made["fifo"])
    made["dir"].mkdir()
    (tmp_path / "victim").write_text("precious\n")
    made["link"].symlink_to(tmp_path / "victim")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp_path / "sock"))
    sock.close()
    made["socket"] = tmp_path / "sock"
    if ROOT:
        # a /dev/null of our own
        os.mknod(tmp_path / "null", stat.S_IFCHR | 0o666, os.makedev(1, 3))
        made["device"] = tmp_path / "null"
    return made


def test_a_predictable_temp_name_planted_as_a_link_is_never_followed(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    for name in (f".compose.yaml.tmp-{os.getpid()}", f".compose.yaml.tmp-{os.getpid()}.tmp"):
        (tmp_path / name).symlink_to(victim)  # what the old writer would have opened and followed
    safewrite.write(tmp_path / "compose.yaml", "new\n")
    assert victim.read_text() == "precious\n"
    assert (tmp_path / "compose.yaml").read_text() == "new\n" and not (
        tmp_path / "compose.yaml"
    ).is_symlink()
    planted = sorted([f".compose.yaml.tmp-{os.getpid()}", f".compose.yaml.tmp-{os.getpid()}.tmp"])
    assert _leftovers(tmp_path) == planted  # only the planted links, still links


@pytest.mark.parametrize("kind", ["fifo", "dir", "link", "socket", "device"])
def test_only_a_regular_file_or_nothing_is_replaced(tmp_path, kind):
    made = _special(tmp_path)
    if kind not in made:
        pytest.skip("mknod needs root")
    target = made[kind]
    before = os.lstat(target)
    with pytest.raises(BadInput, match="only replaces regular files"):
        safewrite.write(target, "x\n")
    after = os.lstat(target)
    assert (after.st_mode, after.st_ino) == (before.st_mode, before.st_ino)
    assert (tmp_path / "victim").read_text() == "precious\n" and _leftovers(tmp_path) == []


def test_a_link_on_the_way_below_base_is_refused(tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (tmp_path / "proj" / "out").mkdir(parents=True)
    (tmp_path / "proj" / "out" / "a").symlink_to(outside)
    with pytest.raises(BadInput, match="never writes through links"):
        safewrite.write(
            tmp_path / "proj" / "out" / "a" / "compose.yaml", "x", base=tmp_path / "proj"
        )
    assert list(outside.iterdir()) == []


def test_write_all_is_all_or_nothing(tmp_path):
    (tmp_path / "a").write_text("old a\n")
    os.mkfifo(tmp_path / "b")
    with pytest.raises(BadInput):
        safewrite.write_all(
            [(tmp_path / "a", "new a\n"), (tmp_path / "b", "new b\n")], base=tmp_path
        )
    assert (tmp_path / "a").read_text() == "old a\n" and _leftovers(tmp_path) == []


def test_private_files_are_0600_whatever_the_umask(tmp_path):
    old = os.umask(0)
    try:
        safewrite.write(tmp_path / "key", "secret", private=True)
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "key").st_mode) == 0o600


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "/abs", "nul\0", "x" * 256])
def test_names_from_outside_are_one_component(name):
    with pytest.raises(BadInput, match="plain file name"):
        safewrite.component(name, "test")


# ---- through the CLI -------------------------------------------------------------------------------


def _two_profiles(tmp_path: Path) -> Path:
    proj = make_project(tmp_path, {"a": MINIMAL, "b": MINIMAL.replace("39999", "39998")})
    assert run_cli("--root", str(proj), "render").returncode == 0
    for name in ("a", "b"):  # a change in both, so a new render must write both files
        path = proj / "profiles" / f"{name}.yaml"
        path.write_text(path.read_text().replace("max-num-seqs: 4", "max-num-seqs: 3"))
    return proj


def _out_state(proj: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(proj)): p.read_bytes()
        for p in sorted((proj / "out").rglob("*"))
        if p.is_file()
    }


def _one_clear_line(res: subprocess.CompletedProcess, what: str) -> None:
    assert res.returncode == 3, res.stdout + res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and what in lines[0] and "cannot write" in lines[0], res.stderr
    assert "Traceback" not in res.stderr and "internal error" not in res.stderr


@pytest.mark.skipif(not ROOT, reason="mounting a tmpfs needs root")
def test_render_on_a_full_disk_writes_nothing_and_says_so(tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    with _mounted("-t", "tmpfs", "-o", "size=256k", "tmpfs", target=disk):
        proj = _two_profiles(disk / "proj")
        before = _out_state(proj)
        fd = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT)  # fill the disk to the last byte
        with contextlib.suppress(OSError):
            while True:
                os.write(fd, b"\0" * 512)
        os.close(fd)
        res = run_cli("--root", str(proj), "render")
        _one_clear_line(res, "No space left on device")
        assert _out_state(proj) == before and _leftovers(proj) == []


@pytest.mark.skipif(not ROOT, reason="a read-only bind mount needs root")
def test_render_into_a_read_only_out_dir_is_one_line_exit_3(tmp_path):
    proj = _two_profiles(tmp_path / "proj")
    before = _out_state(proj)
    out = proj / "out"
    with _mounted("--bind", str(out), target=out):
        subprocess.run(
            ["mount", "-o", "remount,bind,ro", str(out)], check=True, capture_output=True
        )
        res = run_cli("--root", str(proj), "render")
        _one_clear_line(res, "Read-only file system")
    assert _out_state(proj) == before and _leftovers(proj) == []


def test_render_past_rlimit_fsize_is_one_line_exit_3(tmp_path):
    proj = _two_profiles(tmp_path / "proj")
    before = _out_state(proj)

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (512, 512))

    res = subprocess.run(
        [sys.executable, "-m", "composegen", "--root", str(proj), "render"],
        cwd=REPO,
        env={**os.environ, "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=small_files,
    )
    _one_clear_line(res, "File too large")
    assert _out_state(proj) == before and _leftovers(proj) == []


def test_init_refuses_to_replace_a_fifo(tmp_path):
    (tmp_path / "profiles").mkdir()
    os.mkfifo(tmp_path / "profiles" / "schema.json")
    res = run_cli("init", str(tmp_path))
    assert res.returncode == 2, res.stdout + res.stderr
    assert "is a FIFO" in res.stderr and stat.S_ISFIFO(
        os.lstat(tmp_path / "profiles" / "schema.json").st_mode
    )
    assert not (tmp_path / "profiles" / "starter.yaml").exists()  # all or nothing


def test_report_html_never_replaces_a_fifo_or_a_device(tmp_path, tmp_path_factory):
    from tests.support.bench_bundles import shared_bundles

    project, runs = shared_bundles(tmp_path_factory)
    for kind, target in _special(tmp_path).items():
        if kind == "dir":
            continue
        before = os.lstat(target)
        res = run_cli(
            "--root",
            str(project.root),
            "report",
            *map(str, runs),
            "--html",
            str(target),
            timeout=180,
        )
        assert res.returncode == 2, (kind, res.stdout + res.stderr)
        assert "only replaces regular files" in res.stderr and "Traceback" not in res.stderr
        assert (
            os.lstat(target).st_mode == before.st_mode and os.lstat(target).st_ino == before.st_ino
        )
    assert (tmp_path / "victim").read_text() == "precious\n"


def test_write_failed_is_exit_3():
    assert WriteFailed("x").exit_code == 3
