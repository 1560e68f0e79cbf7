"""Commands answered before typer is imported: `--version`, a read-only `shm` scan, and a plain
`render --check` (from the render cache when its inputs are exactly those the real check last proved
fresh, rendercache.py; else the real check, through the function the typer command calls).

Typer and its dependencies take ~0.2 s to import; `composegen shm --json` runs from cron and CI and
is benchmarked against `lsof +D`, so its plain forms skip that. Anything else — another option,
a repeated one, `--help`, a typo — returns None and goes to the typer CLI, which owns every error
message about arguments. Results and failures go through the same core and exits.run either way.
"""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Callable
from typing import NamedTuple

from composegen import __version__
from composegen.errors import BadInput  # no imports of its own: free for --version


class ShmScanOptions(NamedTuple):
    path: str = "/dev/shm"
    as_json: bool = False
    fail_on_leftover: bool = False


def plain_shm_scan(argv: list[str]) -> ShmScanOptions | None:
    """`shm [--path DIR | --path=DIR] [--json] [--fail-on-leftover]` as options, else None."""
    if argv[:1] != ["shm"]:
        return None
    seen: set[str] = set()
    path, as_json, fail_on_leftover = "/dev/shm", False, False
    rest = iter(argv[1:])
    for arg in rest:
        if arg in seen:
            return None  # a repeated option: the CLI says so
        if arg == "--json":
            as_json = True
        elif arg == "--fail-on-leftover":
            fail_on_leftover = True
        elif arg == "--path" and "--path" not in seen:
            path = next(rest, "")
        elif arg.startswith("--path=") and "--path" not in seen:
            path, arg = arg[len("--path=") :], "--path"
        else:
            return None
        seen.add(arg)
        if arg == "--path" and path[:1] in ("", "-"):
            return None  # a missing or flag-like value: let the CLI explain it
    return ShmScanOptions(path, as_json, fail_on_leftover)


def version_line() -> str:
    """`composegen 0.1.0 (vLLM flag catalog 0.33.0)`: the package, and the vLLM releases whose
    `serve` flags profiles are checked against (the catalogs shipped in composegen/vllm/data)."""
    # vllm/catalog.py's DATA_DIR, spelled out: importing the catalog module costs ~80 ms, --version
    # ~40 ms.
    data = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "vllm", "data")
    names = os.listdir(data) if os.path.isdir(data) else []
    found = sorted(
        n.split("-")[1] for n in names if n.startswith("vllm-") and n.endswith("-serve-flags.json")
    )
    label = "catalog" if len(found) == 1 else "catalogs"
    return f"composegen {__version__} (vLLM flag {label} {', '.join(found) or 'missing'})"


def run(argv: list[str]) -> int | None:
    """The exit code of a command answered here, or None when the typer CLI must answer."""
    if argv == ["--version"]:
        sys.stdout.write(version_line() + "\n")
        return 0
    plain, root = plain_render_check(argv)
    if plain:
        return _render_check(root)
    opts = plain_shm_scan(argv)
    if opts is None:
        return None
    # Each answer imports what it alone needs: `--version` loads nothing more than this module.
    # why: ~50 ms (output, safewrite, the scan) --version never needs
    from composegen.cli import exits, shm_output

    # A one-shot process allocating a row and a string per /dev/shm entry: the cyclic collector
    # would only walk them again and again; nothing here makes reference cycles.
    gc.disable()
    labels = ContainerLabels()
    return exits.run(
        lambda: shm_output.print_path_scan(
            opts.path,
            shm_output.Output(opts.as_json),
            fail_on_leftover=opts.fail_on_leftover,
            labels=labels,
        )
    )


def plain_render_check(argv: list[str]) -> tuple[bool, str | None]:
    """`[--root DIR | --root=DIR] render --check`: (True, root or None), else (False, None)."""
    root: str | None = None
    if argv[:1] == ["--root"] and len(argv) > 1:
        root, argv = argv[1], argv[2:]
    elif argv[:1] and argv[0].startswith("--root="):
        root, argv = argv[0][len("--root=") :], argv[1:]
    if argv != ["render", "--check"] or (root is not None and root[:1] in ("", "-")):
        return False, None  # an empty or flag-like root: the CLI explains it
    return True, root


def _render_check(root_arg: str | None) -> int | None:
    """The plain check's exit code: the render cache's answer when it has one, else the real check
    run here, through the same function the typer command calls (render_output.py). None when there
    is no project: the CLI explains that."""
    # Only the plain check pays for hashing its inputs (see run()).
    from composegen import rendercache  # why: with project ~3 ms on every other command's start
    from composegen.project import find_project  # why: ~2 ms that --version and shm never need

    try:
        project = find_project(root_arg)
    except BadInput:
        return None
    line = rendercache.answer(project.root)
    if line is not None:
        sys.stdout.write(line + "\n")
        return 0
    # why: the renderer, pydantic and jinja2: only on a miss
    from composegen.cli import exits, render_output

    return exits.run(
        lambda: render_output.render(project, None, check=True, target=None, json_=False)
    )


class ContainerLabels:
    """container id -> labels for the shm scan (composegen.shm never talks to an engine itself). The
    engine module, and the docker SDK with it, is imported only when a holder is in a container."""

    def __init__(self) -> None:
        self._lookup: Callable[[str], dict[str, str] | None] | None = None

    def __call__(self, container_id: str) -> dict[str, str] | None:
        if self._lookup is None:
            # why: the docker SDK, only once a holder is in a container
            from composegen.stack import engine

            self._lookup = engine.label_lookup()
        return self._lookup(container_id)
