"""Names whose origin we know in /dev/shm: an unheld file with such a name is a crash's leftover.

`match_pattern(name)` -> pattern id or None; `patterns_table_markdown()` is the table in
docs/shm.md."""

from __future__ import annotations

import re

CLASSES = ("in-use", "leftover", "unknown")

# Names we know the origin of: a file with such a name and no holder is a leftover of a crash.
LEFTOVER_PATTERNS = (
    {
        "id": "psm",
        "glob": "psm_*",
        "regex": r"psm_.+",
        "creator": "Python multiprocessing.shared_memory (vLLM MessageQueue/ShmRingBuffer, shm_object_storage)",
        "left_when": "the whole process group, resource_tracker included, is SIGKILLed (docker kill, stop timeout)",
    },
    {
        "id": "sem-mp",
        "glob": "sem.mp-*",
        "regex": r"sem\.mp-.+",
        "creator": "Python multiprocessing locks/semaphores, spawn or forkserver context (glibc sem_open)",
        "left_when": "same as psm_*: the resource_tracker died with the process group",
    },
    {
        "id": "sem-loky",
        "glob": "sem.loky-*",
        "regex": r"sem\.loky-.+",
        "creator": "joblib/loky semaphores",
        "left_when": "the loky worker pool was killed",
    },
    {
        "id": "nccl",
        "glob": "nccl-*",
        "regex": r"nccl-.+",
        "creator": "NCCL SHM transport / proxy (mkstemp; NCCL 2.9: nccl-shm-recv-*)",
        "left_when": "a rank crashed before peers attached; often 0-byte files piling up",
    },
    {
        "id": "torch",
        "glob": "torch_*",
        "regex": r"torch_\d+_.+",
        "creator": "PyTorch CPU tensor sharing (MapAllocator)",
        "left_when": "rare: normally unlinked at once and visible only as (deleted) mappings",
    },
    {
        "id": "vllm-offload",
        "glob": "vllm_offload_*.mmap[.N]",
        "regex": r"vllm_offload_.+\.mmap(?:\.\d+)?",
        "creator": "vLLM CPU KV offload region (0.21+)",
        "left_when": "SIGKILL; a fresh engine id per start makes them pile up across restarts",
    },
    {
        "id": "vllm-ec",
        "glob": "vllm_ec_*.mmap",
        "regex": r"vllm_ec_.+\.mmap",
        "creator": "vLLM encoder-cache offload region",
        "left_when": "SIGKILL, like vllm_offload_*",
    },
    {
        "id": "quarantine",
        "glob": ".composegen-q-*",
        "regex": r"\.composegen-q-[0-9a-f]+",
        "creator": "composegen shm --reclaim: a candidate renamed aside while its holders are checked again",
        "left_when": "the reclaim was killed between that rename and the unlink or rename back",
    },
    {
        "id": "pym",
        "glob": "pym-*",
        "regex": r"pym-\d+-.+",
        "creator": "Python multiprocessing.heap arenas (mkstemp then unlink)",
        "left_when": "a crash between create and unlink",
    },
)
# (id, literal prefix of the glob, regex). Most names fail the prefix test and never meet a regex;
# each regex is compiled the first time a name with its prefix turns up.
_MATCHERS = [(p["id"], p["glob"].split("*", 1)[0], p["regex"]) for p in LEFTOVER_PATTERNS]
_PREFIXES = tuple(prefix for _, prefix, _ in _MATCHERS)
_COMPILED: dict[str, re.Pattern] = {}


def match_pattern(name: str) -> str | None:
    if not name.startswith(_PREFIXES):
        return None
    for pattern_id, prefix, regex in _MATCHERS:
        if name.startswith(prefix):
            compiled = _COMPILED.get(regex) or _COMPILED.setdefault(
                regex, re.compile(regex, re.DOTALL)
            )
            if compiled.fullmatch(name):
                return pattern_id
    return None


def patterns_table_markdown() -> str:
    rows = ["| Name | Created by | Left behind when |", "|---|---|---|"]
    rows += [f"| `{p['glob']}` | {p['creator']} | {p['left_when']} |" for p in LEFTOVER_PATTERNS]
    return "\n".join(rows)
