"""Old spellings, kept for one release and hidden: `--help` lists only the new ones. A command line
in an old spelling is rewritten to the new one before typer reads it, with a one-line note on
stderr (stdout stays the command's: a script piping --json keeps working)."""

from __future__ import annotations

from composegen.output import err

# old top-level command -> where it lives now
MOVED: dict[str, list[str]] = {"keys": ["edge", "keys"]}
_TAKES_A_VALUE = {"--root"}  # global options before the command


def _command_at(argv: list[str]) -> int | None:
    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        if argv[i] in _TAKES_A_VALUE:
            i += 1
        i += 1
    return i if i < len(argv) else None


def rewrite(argv: list[str]) -> list[str]:
    """ARGV in today's spelling (unchanged when it already is)."""
    at = _command_at(argv)
    if at is None:
        return argv
    head, name, rest = argv[:at], argv[at], argv[at + 1 :]
    if name in MOVED:
        old, now, new = name, " ".join(MOVED[name]), [*MOVED[name], *rest]
    elif name == "shm" and "--reclaim" in rest:
        old, now, new = "shm --reclaim", "shm reclaim", _shm_reclaim(rest)
    else:
        return argv
    err(f"composegen: `{old}` is now `{now}`; the old spelling goes in the next release")
    return [*head, *new]


def _shm_reclaim(rest: list[str]) -> list[str]:
    """`shm --reclaim [options]` -> `shm [--fail-on-leftover] reclaim [options]`."""
    flag = ["--fail-on-leftover"] if "--fail-on-leftover" in rest else []
    options = [a for a in rest if a not in ("--reclaim", "--fail-on-leftover")]
    return ["shm", *flag, "reclaim", *options]
