"""Commands answered before typer is imported: `--version`, a read-only `shm` scan, and a plain
`render --check` whose inputs are exactly those the real check last proved fresh (rendercache.py).

Typer and its dependencies take ~0.2 s to import; `composegen shm --json` runs from cron and CI and
is benchmarked against `lsof +D`, so its plain forms skip that. Anything else — another option,
a repeated one, `--help`, a typo — returns None and goes to the typer CLI, which owns every error
message about arguments. Results and failures go through the same core and exits.run either way.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

SHM_FLAGS = {"--json": "as_json", "--fail-on-leftover": "fail_on_leftover"}


def plain_shm_scan(argv: list[str]) -> dict | None:
    """`shm [--path DIR | --path=DIR] [--json] [--fail-on-leftover]` as keyword arguments, else None."""
    if argv[:1] != ["shm"]:
        return None
    opts: dict = {}
    rest = iter(argv[1:])
    for arg in rest:
        if arg in SHM_FLAGS and SHM_FLAGS[arg] not in opts:
            opts[SHM_FLAGS[arg]] = True
        elif arg == "--path" and "path" not in opts:
            opts["path"] = next(rest, "")
        elif arg.startswith("--path=") and "path" not in opts:
            opts["path"] = arg[len("--path=") :]
        else:
            return None
    if opts.get("path", "/")[:1] in ("", "-"):
        return None  # a missing or flag-like value: let the CLI explain it
    return opts


def version_line() -> str:
    """`composegen 0.1.0 (vLLM flag catalog 0.33.0)`: the package, and the vLLM releases whose `serve` flags
    profiles are checked against (the catalogs shipped in composegen/vllm/data)."""
    import os

    from composegen import __version__

    # vllm/catalog.py's DATA_DIR, spelled out: importing the catalog module costs ~80 ms, --version ~40 ms.
    data = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "vllm", "data")
    names = os.listdir(data) if os.path.isdir(data) else []
    found = sorted(n.split("-")[1] for n in names if n.startswith("vllm-") and n.endswith("-serve-flags.json"))
    label = "catalog" if len(found) == 1 else "catalogs"
    return f"composegen {__version__} (vLLM flag {label} {', '.join(found) or 'missing'})"


def run(argv: list[str]) -> int | None:
    """The exit code of a command answered here, or None when the typer CLI must answer."""
    if argv == ["--version"]:
        sys.stdout.write(version_line() + "\n")
        return 0
    plain, root = plain_render_check(argv)
    if plain:
        return _cached_render_check(root)
    opts = plain_shm_scan(argv)
    if opts is None:
        return None
    import gc

    from composegen.cli import exits
    from composegen.shm import scan as shm

    # A one-shot process allocating a row and a string per /dev/shm entry: the cyclic collector would
    # only walk them again and again; nothing here makes reference cycles.
    gc.disable()
    path = opts.pop("path", "/dev/shm")
    return exits.run(lambda: shm.print_path_scan(path, container_labels=ContainerLabels(), **opts))


def plain_render_check(argv: list[str]) -> tuple[bool, str | None]:
    """`[--root DIR | --root=DIR] render --check`: (True, the root given or None), else (False, None)."""
    root: str | None = None
    if argv[:1] == ["--root"] and len(argv) > 1:
        root, argv = argv[1], argv[2:]
    elif argv[:1] and argv[0].startswith("--root="):
        root, argv = argv[0][len("--root=") :], argv[1:]
    if argv != ["render", "--check"] or (root is not None and root[:1] in ("", "-")):
        return False, None  # an empty or flag-like root: the CLI explains it
    return True, root


def _cached_render_check(root_arg: str | None) -> int | None:
    """0 with the real check's own line when the render cache answers; None (the real check) otherwise."""
    from composegen import rendercache
    from composegen.errors import BadInput
    from composegen.project import find_project

    try:
        root = find_project(root_arg).root
    except BadInput:
        return None  # the CLI explains a missing project
    line = rendercache.answer(root)
    if line is None:
        return None
    sys.stdout.write(line + "\n")
    return 0


class ContainerLabels:
    """container id -> labels for the shm scan (composegen.shm never talks to an engine itself). The
    engine module, and the docker SDK with it, is imported only when a holder is in a container."""

    def __init__(self) -> None:
        self._lookup: Callable[[str], dict | None] | None = None

    def __call__(self, container_id: str) -> dict | None:
        if self._lookup is None:
            from composegen.stack import engine

            self._lookup = engine.label_lookup()
        return self._lookup(container_id)
