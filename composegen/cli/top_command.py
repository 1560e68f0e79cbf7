"""`composegen top NAME`: a live view of a serving stack from its engine's /metrics (rich Live,
redrawn each interval); `--once --json` prints one sample (report "top") for scripts."""

from __future__ import annotations

import os
import select
import sys
import time
from typing import Any
from urllib.parse import urlsplit

import typer

from composegen.cli.app import JsonOpt, app
from composegen.cli.app import load_profile as _load
from composegen.cli.optiongroups import option, profile_arg
from composegen.errors import BadInput
from composegen.monitor import watch
from composegen.monitor.reports import TopSample
from composegen.output import Output
from composegen.stack import driver
from composegen.stack.readiness import Endpoint

_DASH = "–"


def _num(value: float | None, fmt: str = ",.1f", suffix: str = "") -> str:
    return _DASH if value is None else f"{value:{fmt}}{suffix}"


def _pct(value: float | None) -> str:
    if value is None:
        return _DASH
    # a large KV pool under a light load is a tiny fraction: keep it visible rather than 0.0 %
    return f"{100 * value:.1f} %" if value == 0 or abs(value) >= 0.001 else f"{100 * value:.2g} %"


def _secs(value: float | None) -> str:
    if value is None:
        return _DASH
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


def rows(sample: TopSample) -> list[tuple[str, str]]:
    """A sample's figures as (label, text) lines: the same words live and in plain text."""
    s = sample
    lines = [
        (
            "requests",
            f"running {_num(s.running, ',.0f')}   waiting {_num(s.waiting, ',.0f')}"
            f"   finished {_num(s.requests_finished, ',.0f')}",
        ),
        (
            "KV cache",
            f"usage {_pct(s.kv_cache_usage)}   prefix-cache hits {_pct(s.prefix_cache_hit_rate)}",
        ),
        (
            "tokens/s",
            f"prompt {_num(s.prompt_tokens_per_s)}   generation {_num(s.generation_tokens_per_s)}",
        ),
        (
            "TTFT",
            f"p50 {_secs(s.ttft.p50_s)}   p95 {_secs(s.ttft.p95_s)}   ({_num(s.ttft.count, ',.0f')} requests)",
        ),
        (
            "e2e latency",
            f"p50 {_secs(s.e2e.p50_s)}   p95 {_secs(s.e2e.p95_s)}   ({_num(s.e2e.count, ',.0f')} requests)",
        ),
        (
            "preemptions",
            f"{_num(s.preemptions, ',.0f')} in window   {_num(s.preemptions_total, ',.0f')} total",
        ),
    ]
    spec, said = s.spec_decode, "off"
    if spec is not None:
        per_pos = " ".join(_pct(p) for p in spec.per_position) or _DASH
        said = (
            f"acceptance {_pct(spec.acceptance_rate)}   mean length {_num(spec.mean_acceptance_length, '.2f')}"
            f"   by position {per_pos}"
        )
    return [*lines, ("spec decode", said)]


def title(sample: TopSample) -> str:
    who = f"{sample.name} ({sample.url})" if sample.name else sample.url
    view = ", the head's engine" if sample.view == "head" else ""
    emulated = " · EMULATED vLLM" if sample.emulated else ""
    return f"composegen top {who}{view} · last {sample.window_s:.0f} s{emulated}"


KEY_HINT = "q quit"


class _Quit(Exception):
    """`q` was pressed in the live view."""


class _Keys:
    """Keys for the live view: stdin in cbreak mode while it runs (restored on the way out), the
    wait between scrapes ends at once on `q`. Without a terminal, a plain sleep."""

    def __init__(self) -> None:
        self.fd: int | None = None
        self.saved: Any = None

    def __enter__(self) -> _Keys:
        if sys.stdin.isatty():
            import termios
            import tty

            self.fd = sys.stdin.fileno()
            self.saved = termios.tcgetattr(self.fd)
            tty.setcbreak(self.fd)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            import termios

            termios.tcsetattr(self.fd, termios.TCSADRAIN, self.saved)

    def sleep(self, seconds: float) -> None:
        if self.fd is None:
            time.sleep(seconds)
            return
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            if select.select([self.fd], [], [], left)[0] and os.read(self.fd, 64).lower().count(
                b"q"
            ):
                raise _Quit


def _renderable(sample: TopSample, hint: bool = False) -> Any:
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold", no_wrap=True)
    table.add_column(no_wrap=True, overflow="ellipsis")
    for label, text in rows(sample):
        table.add_row(label, text)
    parts: list[Any] = [Text(title(sample), style="bold", no_wrap=True, overflow="ellipsis"), table]
    if hint:
        parts.append(Text(KEY_HINT, style="dim"))
    return Group(*parts)


def _host_port(url: str) -> tuple[str, int]:
    """HOST and PORT of an http://HOST:PORT --url; anything else (a bad IPv6 literal, a port out of
    range, control characters) is bad input, said once."""
    try:
        parts = urlsplit(url if "://" in url else f"http://{url}")
        host, port = parts.hostname, parts.port  # .port raises ValueError out of range
    except ValueError:
        host, port, parts = None, None, None
    ok = parts is not None and parts.scheme == "http" and url.isprintable() and " " not in url
    if not (ok and host and port):
        raise BadInput(f"--url: expected http://HOST:PORT, got {url!r}")
    return host, port


def _endpoint(name: str | None, url: str | None) -> tuple[Endpoint, str | None, str, bool | None]:
    if url is not None:
        if name is not None:
            raise BadInput("give a profile NAME or --url, not both")
        host, port = _host_port(url)
        return Endpoint(host, port), None, "single", None
    if name is None:
        raise BadInput("give a profile NAME (or --url http://HOST:PORT)")

    project, r = _load(name)
    # "not running" is exit 3 with a hint, before any scrape
    ctr = driver.running_container(project, r)
    return driver.endpoint(r), r.name, driver.deployment(project, r).head.kind, ctr.emulated


@app.command()
def top(
    name: str | None = profile_arg("Profile whose stack to watch (multi-node: the head's engine)."),
    url: str | None = option(None, "--url", "Watch this engine instead: http://HOST:PORT."),
    interval: float = typer.Option(1.0, "--interval", min=0.1, help="Seconds between scrapes."),
    window: float = option(
        10.0, "--window", "Rates and percentiles over this many seconds.", min=0.1
    ),
    once: bool = typer.Option(False, "--once", help="One sample over one interval, then exit."),
    count: int | None = option(None, "--count", "Exit after this many refreshes.", min=1),
    json_: bool = JsonOpt,
) -> None:
    """Live view of a serving stack: requests, KV cache, token rates, TTFT/e2e p50/p95, spec
    decoding.

    Example: composegen top starter --interval 2
    """
    ep, label, view, emulated = _endpoint(name, url)
    if once:
        sample = watch.once(ep, interval, name=label, view=view).model_copy(
            update={"emulated": emulated}
        )
        lines = [title(sample), *(f"  {k:<12} {v}" for k, v in rows(sample))]
        return Output(json_).report(sample, lambda: "\n".join(lines))
    if json_:
        raise BadInput("--json needs --once (the live view is for a terminal)")
    from rich.console import Console
    from rich.live import Live

    console = Console()
    with _Keys() as keys, Live(console=console, auto_refresh=False, transient=False) as live:
        samples = watch.watch(ep, interval, window, name=label, view=view, sleep=keys.sleep)
        try:
            for shown, sample in enumerate(samples, start=1):
                sample = sample.model_copy(update={"emulated": emulated})
                live.update(_renderable(sample, hint=keys.fd is not None), refresh=True)
                if count is not None and shown >= count:
                    break
        except _Quit:
            pass
    # a terminal's Live ends its last line itself; piped, the view's last line ends here
    if not console.is_terminal:
        console.line()
