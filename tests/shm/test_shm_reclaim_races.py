"""`shm reclaim` never removes a held file (issue 14, class 10), against real processes: an fd in a
thread with its own fd table, an fd in flight over a unix socket (default --min-age), openers racing
the reclaim and rename-swaps racing it (--min-age 0). Each also checks that the true leftovers go."""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from composegen.errors import CheckFailed
from composegen.shm import procscan
from composegen.shm import reclaim as shm_reclaim
from composegen.shm import scan as shm
from composegen.shm.text import format_reclaim_text
from tests.support.shmreclaim import settled_reclaim

NO_LABELS = {"container_labels": lambda cid: None}
REPO_ROOT = Path(__file__).resolve().parents[2]


def _aged_dir() -> tuple[Path, float] | None:
    """Leftovers for the default --min-age (60 s) test, made when this module is collected: ctime cannot
    be set back, so only real time ages a file. The test waits for whatever part of 60 s is left."""
    if not Path("/dev/shm").is_dir():
        return None
    path = Path("/dev/shm") / f"composegen-aged-{uuid.uuid4().hex[:10]}"
    path.mkdir()
    atexit.register(shutil.rmtree, path, True)  # also when the test using it is deselected
    for i in range(3):
        (path / f"psm_aged{i:04d}").write_bytes(b"\0" * 4096)
    return path, time.time()


AGED = _aged_dir()


@pytest.fixture(scope="module")
def aged_dir():
    if AGED is None:
        pytest.skip("no /dev/shm on this machine")
    path, made = AGED
    yield path, made
    shutil.rmtree(path, ignore_errors=True)


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
        import json

        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


@pytest.fixture
def actors():
    started: list[Actor] = []

    def start(code: str, directory: Path) -> Actor:
        started.append(Actor(code, directory))
        return started[-1]

    yield start
    for actor in started:
        actor.close()


# ---- (a) a thread with its own fd table ----------------------------------------------------------

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


# ---- (b) an fd in flight over a unix socket ------------------------------------------------------

IN_FLIGHT = """
left, right = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
fd = os.open(os.path.join(D, 'psm_aged0000'), os.O_RDWR)  # an old leftover: --min-age does not keep it
socket.send_fds(left, [b'x'], [fd])
os.close(fd)  # now only the socket's queue refers to the file: nothing in /proc shows it
def receive():
    _, fds, _, _ = socket.recv_fds(right, 16, 1)
    st = os.fstat(fds[0])
    return {'nlink': st.st_nlink, 'inode': st.st_ino, 'size': st.st_size}
handlers = {'receive': receive}
"""


def test_an_fd_in_flight_refuses_the_reclaim_whatever_the_files_age(aged_dir, actors):
    path, made = aged_dir
    # the leftovers are old now
    time.sleep(max(0.0, made + shm_reclaim.DEFAULT_MIN_AGE + 1 - time.time()))
    actor = actors(IN_FLIGHT, path)
    inode = os.stat(path / "psm_aged0000").st_ino
    # The class: /proc shows no holder, so the scan calls it a leftover, and it is old enough.
    entry = {e["name"]: e for e in shm.scan(str(path), **NO_LABELS).to_json()["entries"]}[
        "psm_aged0000"
    ]
    assert entry["class"] == "leftover" and entry["holders"] == []

    # default min age; not even --ignore-unreadable removes
    with pytest.raises(CheckFailed) as refused:
        shm_reclaim.reclaim(str(path), yes=True, ignore_unreadable=True, **NO_LABELS)
    assert f"pid {actor.proc.pid} (python" in refused.value.message
    assert "unix socket with queued data" in refused.value.message
    # all back in place
    assert sorted(os.listdir(path)) == ["psm_aged0000", "psm_aged0001", "psm_aged0002"]
    # the receiver's file is whole
    assert actor.ask("receive") == {"nlink": 1, "inode": inode, "size": 4096}

    # Received: held in a table now. (Putting the files back renewed their ctime, hence --min-age 0.)
    done = settled_reclaim(
        str(path), yes=True, ignore_unreadable=True, min_age=0, **NO_LABELS
    ).to_json()
    assert sorted(r["name"] for r in done["removed"]) == ["psm_aged0001", "psm_aged0002"]
    assert sorted(os.listdir(path)) == ["psm_aged0000"]


# ---- (c) openers racing the reclaim, (d) rename-swaps racing it ----------------------------------

LATE_OPENER = """
held = {}
def race():
    names = sorted(n for n in os.listdir(D) if n.startswith('psm_'))
    for name in names[::3]:  # a third of the files, opened while the reclaim runs
        try:
            fd = os.open(os.path.join(D, name), os.O_RDWR)
        except FileNotFoundError:
            continue  # removed, or renamed aside for the moment: not held
        held[name] = fd
        time.sleep(0.0002)
    return len(held)
def report():
    return {name: [os.fstat(fd).st_nlink, os.fstat(fd).st_ino] for name, fd in held.items()}
handlers = {'race': race, 'report': report}
"""

RENAME_SWAP = """
held = {}
def race():
    names = sorted(n for n in os.listdir(D) if n.startswith('psm_'))
    for name in names[::3]:  # write a new version aside, keep it open, rename it over the old one
        tmp = os.path.join(D, '.new-' + name)
        fd = os.open(tmp, os.O_CREAT | os.O_RDWR, 0o600)
        os.write(fd, b'new')
        os.rename(tmp, os.path.join(D, name))
        held[name] = fd
        time.sleep(0.0002)
    return len(held)
def report():
    return {name: [os.fstat(fd).st_nlink, os.fstat(fd).st_ino] for name, fd in held.items()}
handlers = {'race': race, 'report': report}
"""


def _race(shm_dir: Path, actors, code: str, rounds: int, files: int) -> int:
    """Rounds of: `files` leftovers, an actor racing a real reclaim (--min-age 0) over them. Asserts every
    file the actor holds is still there under its name and everything else is gone; returns how many
    files the actor held in all."""
    held_total = 0
    for round_ in range(rounds):
        directory = shm_dir / f"round{round_}"
        directory.mkdir()
        for i in range(files):
            (directory / f"psm_{i:08x}").write_bytes(b"old")
        actor = actors(code, directory)
        actor.proc.stdin.write("race\n")
        actor.proc.stdin.flush()  # the actor starts now; the reclaim right after
        settled_reclaim(str(directory), yes=True, ignore_unreadable=True, min_age=0, **NO_LABELS)
        assert actor.proc.stdout.readline().strip().isdigit()
        held = actor.ask("report")
        unlinked = sorted(name for name, (nlink, _) in held.items() if nlink == 0)
        assert unlinked == [], f"round {round_}: held files removed: {unlinked}"
        names = sorted(n for n in os.listdir(directory) if not n.startswith(".new-"))
        assert names == sorted(held), f"round {round_}: kept {len(names)} files, {len(held)} held"
        # the held inode, by its name
        assert all(os.stat(directory / n).st_ino == held[n][1] for n in names)
        actor.close()
        held_total += len(held)
    return held_total


def test_openers_racing_the_reclaim_never_lose_a_held_file(shm_dir, actors):
    assert _race(shm_dir, actors, LATE_OPENER, rounds=15, files=300) > 0


def test_rename_swaps_racing_the_reclaim_never_lose_a_held_file(shm_dir, actors):
    assert _race(shm_dir, actors, RENAME_SWAP, rounds=30, files=300) > 0


def test_a_swap_between_stat_and_rename_is_put_back(shm_dir, holders, monkeypatch):
    """The window (d) needs, made certain: the file is swapped right after the reclaim's last stat."""
    (shm_dir / "psm_swapme00").write_bytes(b"old")
    plan = shm_reclaim.reclaim(str(shm_dir), min_age=0, **NO_LABELS)
    holders("f = open(os.path.join(D, '.new'), 'wb'); f.write(b'new'); f.flush()", shm_dir)
    real_stat = os.stat

    def stat_then_swap(path, *args, **kwargs):
        result = real_stat(path, *args, **kwargs)
        if path == "psm_swapme00" and (shm_dir / ".new").exists():
            os.rename(shm_dir / ".new", shm_dir / "psm_swapme00")
        return result

    monkeypatch.setattr(shm_reclaim.os, "stat", stat_then_swap)
    done = shm_reclaim.apply_plan(plan, ignore_unreadable=True, **NO_LABELS).to_json()
    assert done["removed"] == [] and (shm_dir / "psm_swapme00").read_bytes() == b"new"
    assert done["skipped"][-1] == {
        "name": "psm_swapme00",
        "reason": "replaced during the reclaim; put back",
    }
    assert sorted(os.listdir(shm_dir)) == ["psm_swapme00"]


def test_an_interrupted_reclaim_puts_every_file_back(shm_dir, monkeypatch):
    for i in range(5):
        (shm_dir / f"psm_{i:08x}").write_bytes(b"x")
    before = {n: os.stat(shm_dir / n).st_ino for n in os.listdir(shm_dir)}
    plan = shm_reclaim.reclaim(str(shm_dir), min_age=0, **NO_LABELS)
    aside = []

    # Ctrl-C during the holder pass, every candidate renamed aside
    def interrupted(*args, **kwargs):
        aside.extend(os.listdir(shm_dir))
        raise KeyboardInterrupt

    monkeypatch.setattr(procscan, "index_holders", interrupted)
    with pytest.raises(KeyboardInterrupt):
        shm_reclaim.apply_plan(plan, ignore_unreadable=True, **NO_LABELS)
    assert len(aside) == 5 and all(n.startswith(shm_reclaim.QUARANTINE_PREFIX) for n in aside)
    assert {n: os.stat(shm_dir / n).st_ino for n in os.listdir(shm_dir)} == before


def test_bytes_freed_counts_only_an_inodes_last_name(shm_dir):
    (shm_dir / "psm_linked00").write_bytes(b"\0" * 8192)
    os.link(shm_dir / "psm_linked00", shm_dir / "other-name")  # an unknown name keeps the blocks
    (shm_dir / "psm_single00").write_bytes(b"\0" * 4096)
    done = settled_reclaim(
        str(shm_dir), yes=True, ignore_unreadable=True, min_age=0, **NO_LABELS
    ).to_json()
    assert sorted(r["name"] for r in done["removed"]) == ["psm_linked00", "psm_single00"]
    assert done["bytes_freed"] == 4096 and (shm_dir / "other-name").stat().st_size == 8192


def test_a_fresh_file_is_left_alone_until_min_age(shm_dir):
    (shm_dir / "psm_fresh000").write_bytes(b"x")
    result = settled_reclaim(
        str(shm_dir), yes=True, ignore_unreadable=True, min_age=3600, **NO_LABELS
    )
    done = result.to_json()
    assert done["removed"] == [] and done["candidates"] == []
    [skip] = done["skipped"]
    assert skip["name"] == "psm_fresh000" and skip["reason"].startswith("changed ")
    assert skip["reason"].endswith("s ago (--min-age 3600s)")
    assert "left alone: 1 file(s) changed less than --min-age 3600s ago" in format_reclaim_text(
        result
    )
    assert (shm_dir / "psm_fresh000").exists()


@pytest.mark.parametrize("bad", [-1, float("nan"), float("inf")])
def test_min_age_must_be_a_finite_number_of_seconds(shm_dir, bad):
    with pytest.raises(shm_reclaim.BadInput, match="--min-age"):
        shm_reclaim.reclaim(str(shm_dir), min_age=bad, **NO_LABELS)


def test_a_held_file_is_never_put_back_over_a_file_created_meanwhile(shm_dir, holders, monkeypatch):
    (shm_dir / "psm_taken000").write_bytes(b"old")
    plan = shm_reclaim.reclaim(str(shm_dir), min_age=0, **NO_LABELS)
    real_index = procscan.index_holders

    # while the candidate is aside: someone holds it, another file takes its name
    def meanwhile(*args, **kwargs):
        if not (shm_dir / "psm_taken000").exists():
            [hidden] = os.listdir(shm_dir)
            holders(f"f = open(os.path.join(D, {hidden!r}), 'rb')", shm_dir)
            (shm_dir / "psm_taken000").write_bytes(b"new")
        return real_index(*args, **kwargs)

    monkeypatch.setattr(procscan, "index_holders", meanwhile)
    done = shm_reclaim.apply_plan(plan, ignore_unreadable=True, **NO_LABELS).to_json()
    [hidden] = [n for n in os.listdir(shm_dir) if n.startswith(shm_reclaim.QUARANTINE_PREFIX)]
    assert done["removed"] == [] and done["skipped"][-1]["reason"].endswith(
        f"a new file took its name meanwhile: kept as {hidden}"
    )
    assert (shm_dir / "psm_taken000").read_bytes() == b"new" and (
        shm_dir / hidden
    ).read_bytes() == b"old"


def test_reclaim_from_a_pid_namespace_of_its_own_refuses(shm_dir, holders):
    """From a container's PID namespace /proc shows none of the host's processes: every holder is invisible."""
    if subprocess.run(
        ["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True
    ).returncode:
        pytest.skip("cannot create a PID namespace here (needs root and util-linux unshare)")
    holders("f = open(os.path.join(D, 'psm_held0000'), 'wb')", shm_dir)
    argv = [
        sys.executable,
        "-m",
        "composegen",
        "shm",
        "reclaim",
        "--yes",
        "--min-age",
        "0",
        "--path",
        str(shm_dir),
    ]
    res = subprocess.run(
        ["unshare", "--pid", "--fork", "--mount-proc", *argv],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
    )
    assert res.returncode == 1 and res.stdout == ""
    assert (
        "runs in a PID namespace of its own" in res.stderr and "nothing was removed" in res.stderr
    )
    assert (shm_dir / "psm_held0000").exists()
