"""The command line: typer commands that parse and print; entry.py is what the console script
runs."""

# What other rooms may import (tests/test_architecture.py checks every entry).
__all__ = ["entry"]
