"""The init container's weights check: `composegen weights`' own judgement, run inside the pod
before vLLM.

The script is assembled from the sources themselves (weights/snapshot.py's stdlib listing script,
`index_shards` and `required`; safewrite's `component_problem`), so the pod judges a snapshot by
exactly the rules `composegen weights` and `up` use on a host. Offline (no Hub): the required files
are config.json, the tokenizer files and every shard the safetensors index names. Exit 0 when
complete; else exit 1 naming what is missing."""

from __future__ import annotations

import inspect
from functools import lru_cache

from composegen import safewrite
from composegen.weights import snapshot

_MAIN = r"""
def main(path):
    found = listing(path, None, INDEX)
    if not found["exists"]:
        print(f"composegen weights check: {path} does not exist: the weights are not in this cache")
        return 1
    names, problems = required(found, None)
    missing = [n for n in names if found["files"].get(n) is None]
    for line in problems + [f"missing: {n}" for n in missing]:
        print(f"composegen weights check: {line}")
    if missing or problems:
        print(f"composegen weights check: {path} is incomplete; fill the cache (composegen weights --download)")
        return 1
    print(f"composegen weights check: complete ({len(names)} files) in {path}")
    return 0
sys.exit(main(sys.argv[1]))
"""


@lru_cache(maxsize=1)
def script() -> str:
    """One stdlib Python program for `python3 -c SCRIPT SNAPSHOT_DIR`."""
    listing = snapshot.LISTING_PY.split('if __name__ == "__main__":')[0].strip()
    constants = {
        name: getattr(snapshot, name)
        for name in ("INDEX", "SINGLE", "TOKENIZER_FILES", "TOKENIZER_CORE")
    } | {"OPTIONAL_LISTED": snapshot.OPTIONAL_LISTED}
    parts = [
        "from __future__ import annotations",
        listing,
        *(f"{name} = {value!r}" for name, value in constants.items()),
        # shard names are one path component
        inspect.getsource(safewrite.component_problem).strip(),
        inspect.getsource(snapshot.index_shards).strip(),
        inspect.getsource(snapshot.required).strip(),
        _MAIN.strip(),
    ]
    return "\n".join(parts) + "\n"
