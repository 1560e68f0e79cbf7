"""Holders /proc/PID/fd and maps do not show (composegen/shm/hiddenrefs.py), against real processes:
a file registered with io_uring (IORING_REGISTER_FILES) whose fd was then closed, and an fd in flight
over a unix socket (at the default --min-age: the reclaim refuses whatever the files' age)."""

from __future__ import annotations

import os
import platform
import time
from pathlib import Path

import pytest

from composegen.errors import CheckFailed
from composegen.shm import hiddenrefs
from composegen.shm import reclaim as shm_reclaim
from composegen.shm import scan as shm
from tests.support import devshm
from tests.support.shmreclaim import settled_reclaim
from tests.support.shmscan import NO_LABELS


def _aged_dir() -> tuple[Path, float] | None:
    """Leftovers for the default --min-age (60 s) test, made when this module is collected: ctime cannot
    be set back, so only real time ages a file. The test waits for whatever part of 60 s is left. Every
    xdist worker collects this module, and only one runs the test: the session removes the rest."""
    if not devshm.available():
        return None
    path = devshm.session_owned(devshm.make_dir("aged"))
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
    devshm.remove(path)  # as soon as its test is done, not only with the session


# io_uring_setup / io_uring_register: the generic syscall table (x86_64 and aarch64 alike).
SYSCALLS = {"x86_64": (425, 427), "aarch64": (425, 427)}

REGISTERED = """
libc = ctypes.CDLL(None, use_errno=True)
setup, register = SETUP, REGISTER
params = ctypes.create_string_buffer(120)  # struct io_uring_params, zeroed
ring = libc.syscall(setup, 4, params)
assert ring >= 0, ('io_uring_setup', ctypes.get_errno())
fd = os.open(os.path.join(D, 'psm_uring000'), os.O_RDWR)
fds = (ctypes.c_int * 1)(fd)
assert libc.syscall(register, ring, 2, fds, 1) == 0, ('IORING_REGISTER_FILES', ctypes.get_errno())
os.close(fd)  # the ring alone holds the file now
handlers = {'ring': lambda: ring}
"""


def _io_uring_usable() -> None:
    """Skip, saying why, where this kernel cannot run the test."""
    if platform.machine() not in SYSCALLS:
        pytest.skip(f"no io_uring syscall numbers known for {platform.machine()}")
    knob = Path("/proc/sys/kernel/io_uring_disabled")
    value = knob.read_text().strip() if knob.exists() else "0"
    if value != "0":
        pytest.skip(
            f"io_uring is disabled on this kernel (sysctl kernel.io_uring_disabled = {value})"
        )


def test_a_file_registered_with_io_uring_refuses_the_reclaim(shm_dir, actors):
    _io_uring_usable()
    for name in ("psm_uring000", "psm_true0000"):
        (shm_dir / name).write_bytes(b"\0" * 4096)
    setup, register = SYSCALLS[platform.machine()]
    actor = actors(
        REGISTERED.replace("SETUP", str(setup)).replace("REGISTER", str(register)), shm_dir
    )
    pid, ring = actor.proc.pid, actor.ask("ring")
    # The class: no fd and no mapping of the file; only the ring's fdinfo lists it.
    assert os.readlink(f"/proc/{pid}/fd/{ring}") == "anon_inode:[io_uring]"
    inode = os.stat(shm_dir / "psm_uring000").st_ino
    assert inode not in {
        os.stat(f"/proc/{pid}/fd/{fd}").st_ino for fd in os.listdir(f"/proc/{pid}/fd")
    }
    assert "psm_uring000" in Path(f"/proc/{pid}/fdinfo/{ring}").read_text()
    entries = {e["name"]: e for e in shm.scan(str(shm_dir), **NO_LABELS).to_json()["entries"]}
    assert (
        entries["psm_uring000"]["class"] == "leftover" and entries["psm_uring000"]["holders"] == []
    )

    holders, _ = hiddenrefs.hidden_holders(str(shm_dir))
    assert [h.why for h in holders if h.pid == pid] == [
        f"an io_uring instance with a file of {shm_dir} registered"
    ]
    # not ours
    assert not [h for h in hiddenrefs.hidden_holders("/nonexistent-dir")[0] if h.pid == pid]
    with pytest.raises(CheckFailed) as refused:  # at any age, whatever --ignore-unreadable says
        shm_reclaim.reclaim(str(shm_dir), yes=True, ignore_unreadable=True, min_age=0, **NO_LABELS)
    assert f"pid {pid} (python" in refused.value.message and "io_uring" in refused.value.message
    assert sorted(os.listdir(shm_dir)) == ["psm_true0000", "psm_uring000"]
    assert os.stat(shm_dir / "psm_uring000").st_ino == inode

    actor.close()  # the ring is gone with its process: the reclaim goes ahead
    done = settled_reclaim(str(shm_dir), yes=True, ignore_unreadable=True, min_age=0, **NO_LABELS)
    assert sorted(r.name for r in done.removed) == ["psm_true0000", "psm_uring000"]


def test_a_socket_with_queued_data_is_found_in_its_own_namespace():
    import socket

    left, right = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        left.send(b"12345")
        queued = hiddenrefs.unix_queues()
        assert queued.get(os.fstat(right.fileno()).st_ino) == 5
        right.recv(16)
        assert os.fstat(right.fileno()).st_ino not in hiddenrefs.unix_queues()
    finally:
        left.close()
        right.close()


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
