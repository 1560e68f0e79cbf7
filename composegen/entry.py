"""Console-script entry. `composegen --version` answers before typer is imported (typer + its
dependencies cost most of a 100 ms budget); everything else goes to the typer app in cli.py."""
from __future__ import annotations

import sys


def main() -> None:
    if sys.argv[1:] == ["--version"]:
        from composegen import __version__

        sys.stdout.write(f"composegen {__version__}\n")
        return
    from composegen.cli import main as cli_main

    cli_main()
