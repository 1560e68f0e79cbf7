"""`shm reclaim` never removes a file a thread holds (issue 14, class 10), against real processes: a
thread with an fd table of its own, and a process whose main thread exited (its leader's fd and maps
are empty; only its threads show the files). Each also checks that the true leftovers go."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from composegen.shm import procscan
from composegen.shm import scan as shm
from tests.support.shmreclaim import settled_reclaim
from tests.support.shmscan import NO_LABELS

OWN_FD_TABLE = """
libc = ctypes.CDLL(None, use_errno=True)
CLONE_FILES = 0x400
opened, stop = threading.Event(), threading.Event()
def own_table():
    assert libc.unshare(CLONE_FILES) == 0, ctypes.get_errno()  # this thread's fds are its own from now on
    fd = os.open(os.path.join(D, 'psm_thread00'), os.O_CREAT | os.O_RDWR, 0o600)
    os.write(fd, b'held by a thread')
    state['tid'] = threading.get_native_id()
    opened.set()
    stop.wait()
state = {}
threading.Thread(target=own_table, daemon=True).start()
opened.wait()
handlers = {'tid': lambda: state['tid']}
"""


@pytest.mark.parametrize("kcmp", [True, False], ids=["kcmp", "every-thread"])
def test_a_thread_with_its_own_fd_table_is_a_holder(shm_dir, actors, monkeypatch, kcmp):
    # as where a seccomp filter or the architecture leaves no kcmp: every thread's table is read
    if not kcmp:
        monkeypatch.setattr(procscan, "_KCMP_SYSCALL", {})
    (shm_dir / "psm_true0000").write_bytes(b"x" * 100)
    actor = actors(OWN_FD_TABLE, shm_dir)
    pid, tid = actor.proc.pid, actor.ask("tid")
    held = os.stat(shm_dir / "psm_thread00").st_ino
    # The class: the process's own fd table does not show the file, only the thread's does.
    in_process = {os.stat(f"/proc/{pid}/fd/{fd}").st_ino for fd in os.listdir(f"/proc/{pid}/fd")}
    in_thread = {
        os.stat(f"/proc/{pid}/task/{tid}/fd/{fd}").st_ino
        for fd in os.listdir(f"/proc/{pid}/task/{tid}/fd")
    }
    assert held not in in_process and held in in_thread

    entry = {e["name"]: e for e in shm.scan(str(shm_dir), **NO_LABELS).to_json()["entries"]}[
        "psm_thread00"
    ]
    assert entry["class"] == "in-use" and [(h["pid"], h["how"]) for h in entry["holders"]] == [
        (pid, ["fd"])
    ]
    done = settled_reclaim(
        str(shm_dir), yes=True, ignore_unreadable=True, min_age=0, **NO_LABELS
    ).to_json()
    assert [r["name"] for r in done["removed"]] == ["psm_true0000"]
    assert (shm_dir / "psm_thread00").read_bytes() == b"held by a thread"


LEADER_EXITS = """
import ctypes, mmap, os, sys, threading, time
D, libc = sys.argv[1], ctypes.CDLL(None)
def worker():
    fd = os.open(os.path.join(D, 'psm_mapped00'), os.O_CREAT | os.O_RDWR, 0o600)
    os.ftruncate(fd, 4096)
    libc.mmap.restype = ctypes.c_void_p  # through libc: Python's mmap would keep a dup of the fd
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    assert libc.mmap(None, 4096, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0) not in (None, ctypes.c_void_p(-1).value)
    os.close(fd)
    held = os.open(os.path.join(D, 'psm_opened00'), os.O_CREAT | os.O_RDWR, 0o600)
    print('ready', flush=True)
    sys.stdin.read()
threading.Thread(target=worker).start()
time.sleep(0.2)
libc.pthread_exit(None)  # the main thread ends; the process lives on in its worker
"""


def test_holders_of_a_process_whose_main_thread_exited_are_found(shm_dir):
    (shm_dir / "psm_true0000").write_bytes(b"x")
    proc = subprocess.Popen(
        [sys.executable, "-c", LEADER_EXITS, str(shm_dir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout.readline().strip() == "ready"
        deadline = time.time() + 10
        while (
            "Z" not in Path(f"/proc/{proc.pid}/stat").read_text().split(")")[1][:3]
            and time.time() < deadline
        ):
            time.sleep(0.05)
        # The class: the leader's fd and maps are empty now; only its thread's show the files.
        assert (
            os.listdir(f"/proc/{proc.pid}/fd") == []
            and Path(f"/proc/{proc.pid}/maps").read_text() == ""
        )
        entries = {e["name"]: e for e in shm.scan(str(shm_dir), **NO_LABELS).to_json()["entries"]}
        assert [(h["pid"], h["how"]) for h in entries["psm_mapped00"]["holders"]] == [
            (proc.pid, ["map"])
        ]
        assert [(h["pid"], h["how"]) for h in entries["psm_opened00"]["holders"]] == [
            (proc.pid, ["fd"])
        ]
        done = settled_reclaim(
            str(shm_dir), yes=True, ignore_unreadable=True, min_age=0, **NO_LABELS
        ).to_json()
        assert [r["name"] for r in done["removed"]] == ["psm_true0000"]
    finally:
        proc.stdin.close()
        proc.wait(timeout=10)
