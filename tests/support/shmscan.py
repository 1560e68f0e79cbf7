"""The shm scan as the tests read it: its model, its JSON, one entry; and a child that maps a file through
libc and closes the descriptor (held through its mapping only)."""

from __future__ import annotations

from composegen.shm import scan as shm
from composegen.shm.reports import ShmScan

NO_LABELS = {"container_labels": lambda cid: None}  # no engine asked who a holder's container is


def scan_model(path, **kw):
    report = shm.scan(str(path), container_labels=lambda cid: None, **kw)
    assert isinstance(report, ShmScan)  # the scan hands back its model; JSON is the CLI's business
    return report


def scan_json(path, **kw):
    return scan_model(path, **kw).to_json()


def entry_named(report, name):
    found = [e for e in report["entries"] if e["name"] == name]
    assert found, f"{name} not in {[e['name'] for e in report['entries']]}"
    return found[0]


# Python's mmap keeps a dup of the fd, so map through libc directly, as NCCL and glibc sem_open do.
MAP_AND_CLOSE = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
def map_and_close(name, size=4096):
    fd = os.open(os.path.join(D, name), os.O_CREAT | os.O_RDWR, 0o600)
    os.ftruncate(fd, size)
    addr = libc.mmap(None, size, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED, fd, 0)
    assert addr not in (None, ctypes.c_void_p(-1).value), ctypes.get_errno()
    ctypes.c_char.from_address(addr).value = b"1"
    os.close(fd)
    return addr
"""
