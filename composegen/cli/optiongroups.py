"""Shared option groups: a command takes a dataclass whose fields are its typer options."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
import typing
from collections.abc import Callable
from typing import Any

import typer

from composegen.cli.app import complete_profile, complete_run
from composegen.errors import BadInput


def option(default: Any, name: str, help: str, **extra: Any) -> Any:
    return typer.Option(default, name, help=help, **extra)


def flag(name: str, help: str) -> Any:
    """A switch, off unless given."""
    return typer.Option(False, name, help=help)


def profile_option(help: str) -> Any:
    """`--profile NAME`, completed from the project's profiles."""
    return typer.Option(None, "--profile", help=help, autocompletion=complete_profile)


def profile_arg(help: str, default: Any = None) -> Any:
    return typer.Argument(default, help=help, autocompletion=complete_profile)


def run_arg(help: str, default: Any = None) -> Any:
    return typer.Argument(default, help=help, autocompletion=complete_run)


def grouped(command: Callable[..., None]) -> Callable[..., None]:
    """Typer sees each dataclass parameter's fields as options, in place; the command gets the dataclass."""
    hints = typing.get_type_hints(command)
    params: list[inspect.Parameter] = []
    groups: dict[str, Any] = {}
    for p in inspect.signature(command).parameters.values():
        group = hints[p.name]
        if not dataclasses.is_dataclass(group):
            params.append(p.replace(kind=p.KEYWORD_ONLY, annotation=group))
            continue
        groups[p.name] = group
        types = typing.get_type_hints(group)
        params += [
            inspect.Parameter(f.name, p.KEYWORD_ONLY, default=f.default, annotation=types[f.name])
            for f in dataclasses.fields(group)
        ]

    @functools.wraps(command)
    def run(**options: Any) -> None:
        for name, group in groups.items():
            fields = dataclasses.fields(group)
            options[name] = group(**{f.name: options.pop(f.name) for f in fields})
        command(**options)

    run.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    run.__annotations__ = {p.name: p.annotation for p in params}
    return run


def check_seconds(option: str, value: float | None) -> float | None:
    """A duration must be finite and positive: nan, inf and negatives are refused (exit 2)."""
    if value is not None and (not math.isfinite(value) or value <= 0):
        raise BadInput(f"{option} must be a positive number of seconds, got {value:g}")
    return value
