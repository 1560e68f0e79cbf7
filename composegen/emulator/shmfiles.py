"""The emulator's /dev/shm footprint, shaped like vLLM's so leftover detection can be tested for
real.

At startup the API-server process creates (in EMU_SHM_DIR, default /dev/shm):
  psm_<8 hex>                   one 4 MiB "RPC broadcast queue" plus one 2 MiB "response queue" per worker,
                                created like multiprocessing.shared_memory (fd kept open, file
                                mmapped); at TP 1 on one node instead one 32-byte
                                `sem.loky-<pid>-<hex>` (as recorded);
  vllm_offload_<uuid hex>.mmap  only with --kv-offloading-size > 0; size min(offload bytes,
                                EMU_OFFLOAD_MAX_BYTES, default 64 MiB) so tests stay small.
Worker processes (forked children, like vLLM's EngineCore/Worker_TP*) open and mmap the same files, so
several pids hold them. Clean shutdown (SIGTERM/SIGINT) unlinks them; nothing else ever does, so a
SIGKILL of the process group leaves them behind exactly as it does with vLLM.

Files are sparse: only the first page of each is touched, so the nominal size is what the space
check compares against free space (vLLM's "Insufficient space in /dev/shm" check) while RAM use
stays tiny."""

from __future__ import annotations

import contextlib
import ctypes
import mmap
import os
import secrets
import signal
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

MiB = 1 << 20
DEFAULT_SHM_DIR = "/dev/shm"
BROADCAST_QUEUE_BYTES = 4 * MiB
RESPONSE_QUEUE_BYTES = 2 * MiB
DEFAULT_OFFLOAD_MAX_BYTES = 64 * MiB
LOKY_SEMAPHORE_BYTES = 32
_STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT}


@dataclass
class ShmFile:
    path: Path
    size: int
    fd: int = -1
    mapping: mmap.mmap | None = field(default=None, repr=False)


def shm_dir(env: Mapping[str, str]) -> Path:
    """EMU_SHM_DIR, else /dev/shm."""
    return Path(env.get("EMU_SHM_DIR") or DEFAULT_SHM_DIR)


def planned_sizes(
    workers: int,
    offload_bytes: int,
    offload_cap: int = DEFAULT_OFFLOAD_MAX_BYTES,
    uniproc: bool = False,
) -> list[tuple[str, int]]:
    """(file name, size) for every file this engine will create. One worker in the engine process
    (TP 1, one node) has no message queues: a real 0.26.0 server held one 32-byte `sem.loky-*`
    semaphore only."""
    if uniproc:
        names = [(f"sem.loky-{os.getpid()}-{secrets.token_hex(4)}", LOKY_SEMAPHORE_BYTES)]
    else:
        names = [(f"psm_{secrets.token_hex(4)}", BROADCAST_QUEUE_BYTES)]
        names += [(f"psm_{secrets.token_hex(4)}", RESPONSE_QUEUE_BYTES) for _ in range(workers)]
    if offload_bytes > 0:
        size = max(mmap.PAGESIZE, min(offload_bytes, offload_cap))
        names.append((f"vllm_offload_{uuid.uuid4().hex}.mmap", size))
    return names


def space_problem(directory: Path, sizes: list[tuple[str, int]]) -> str | None:
    """vLLM-style refusal when the shm filesystem is too small for what we are about to create."""
    try:
        stat = os.statvfs(directory)
    except OSError as exc:
        return f"Cannot use shared memory directory {directory}: {exc.strerror}"
    required = sum(size for _, size in sizes)
    free = stat.f_bavail * stat.f_frsize
    if required > free:
        return (
            f"Insufficient space in {directory} for the shared memory buffers: {required / MiB:.1f} MiB "
            f"required, {free / MiB:.1f} MiB free. Increase shm_size or use ipc: host."
        )
    return None


def create_files(directory: Path, sizes: list[tuple[str, int]]) -> list[ShmFile]:
    created: list[ShmFile] = []
    try:
        for name, size in sizes:
            path = directory / name
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
            created.append(ShmFile(path=path, size=size, fd=fd))
            os.ftruncate(fd, size)
            created[-1].mapping = mmap.mmap(fd, size)
            created[-1].mapping[:1] = b"\x01"  # touch one page: the file is really in use
    except BaseException:  # includes the SIGTERM unwind: never leave half-created files behind
        unlink_files(created)
        raise
    return created


def unlink_files(files: list[ShmFile]) -> list[str]:
    """Close and unlink; returns the paths removed. Only called on a clean shutdown or failed
    start."""
    removed = []
    for item in files:
        if item.mapping is not None:
            item.mapping.close()
            item.mapping = None
        if item.fd >= 0:
            os.close(item.fd)
            item.fd = -1
        try:
            os.unlink(item.path)
            removed.append(str(item.path))
        except FileNotFoundError:
            pass
    return removed


def _set_process_name(name: str) -> None:
    # Like vLLM's VLLM::Worker_TP0 titles, so `ps`/fuser output reads like the real thing.
    try:
        libc = ctypes.CDLL(None)
        libc.prctl(15, ctypes.c_char_p(f"VLLM::{name}"[:15].encode()), 0, 0, 0)  # PR_SET_NAME
    except (OSError, AttributeError):
        pass


def _worker_main(name: str, paths: list[Path], parent: int) -> None:
    """Child body: attach to the files and idle until told to stop or orphaned. Never unlinks."""
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C goes to the API server, which stops us
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)
    _set_process_name(name)
    held = []
    for path in paths:
        try:
            fd = os.open(path, os.O_RDWR)
            held.append((fd, mmap.mmap(fd, os.fstat(fd).st_size)))
        except OSError:
            os._exit(1)
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(0)  # the API server died (e.g. SIGKILL): exit like vLLM's orphaned workers, files stay


def start_workers(names: list[str], files: list[ShmFile], pids: dict[str, int]) -> dict[str, int]:
    """Fork one child per name (before any thread exists), recording name -> pid in `pids` as it
    goes (so a signal mid-way still leaves the caller knowing whom to stop)."""
    paths = [item.path for item in files]
    parent = os.getpid()
    for name in names:
        # Blocked across fork: the child must not run the parent's SIGTERM handler (and its cleanup,
        # which unlinks the files) before it has installed its own.
        signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
        try:
            pid = os.fork()
            if pid == 0:
                try:
                    _worker_main(name, paths, parent)
                finally:
                    os._exit(1)
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)
        pids[name] = pid
    return pids


def stop_workers(pids: dict[str, int], timeout: float = 5.0) -> None:
    for pid in pids.values():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for pid in pids.values():
        while True:
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                break
            if done:
                break
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                break
            time.sleep(0.02)
