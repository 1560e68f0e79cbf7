"""Holder scripts for the shared-memory tests (the fixtures are in conftest.py)."""

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


