"""`bench --via-edge`'s figures as text, Markdown and the HTML page's table rows (kept apart from
viaedge.py so `report` does not load the benchmark's client)."""

from __future__ import annotations

from composegen.bench.reports import ViaEdgeResult
from composegen.output import md_cell

HEAD = ["Concurrency", "Path", "Completed", "Errors", "TTFT p50 ms", "TTFT p99 ms"]
HEAD += ["ITL p50 ms", "ITL p99 ms", "E2EL p50 ms", "E2EL p99 ms"]


def _ms(value: float | None, signed: bool = False) -> str:
    return "-" if value is None else (f"{value:+,.3f}" if signed else f"{value:,.3f}")


def rows(via: ViaEdgeResult) -> list[list[str]]:
    """Per level: the door, the edge, and what the edge adds (the HEAD columns)."""
    out = []
    for lv in via.levels:
        for path, f in (("door", lv.door), ("edge", lv.edge)):
            figures = [f.median_ttft_ms, f.p99_ttft_ms, f.median_itl_ms, f.p99_itl_ms]
            figures += [f.median_e2el_ms, f.p99_e2el_ms]
            out.append(
                [str(lv.concurrency), path, str(f.completed), str(f.errors), *map(_ms, figures)]
            )
        added = [lv.added_ttft_p50_ms, lv.added_ttft_p99_ms, lv.added_itl_p50_ms]
        added += [lv.added_itl_p99_ms, lv.added_e2el_p50_ms, lv.added_e2el_p99_ms]
        out.append(
            [str(lv.concurrency), "added by the edge", "", "", *(_ms(v, True) for v in added)]
        )
    return out


def caption(via: ViaEdgeResult) -> str:
    """Where the figures came from, in one line."""
    # null: a bundle that did not record the engine; the figures are measured, the engine unknown
    labels = {True: "EMULATED vLLM", False: "measured", None: "measured (engine not recorded)"}
    source = labels[via.emulated]
    return (
        f"{source}: through the edge {via.edge} ({via.url}, TLS {via.tls}, model {via.alias}) "
        f"and the operator door ({via.door_url}), requests alternated"
    )


def format_text(via: ViaEdgeResult) -> str:
    widths = [5, 17, 6, 4, 9, 9, 9, 9, 10, 10]
    names = ["conc", "path", "done", "err", "TTFT p50", "TTFT p99", "ITL p50", "ITL p99"]
    names += ["E2EL p50", "E2EL p99"]
    line = lambda cells: " ".join(  # noqa: E731
        f"{c:<{w}}" if i == 1 else f"{c:>{w}}"
        for i, (c, w) in enumerate(zip(cells, widths, strict=True))
    )
    lines = [caption(via) + ":", line(names), *(line(r) for r in rows(via))]
    for lv in via.levels:
        for path, f in (("door", lv.door), ("edge", lv.edge)):
            lines += [f"      {path} error: {message}" for message in f.error_messages]
    return "\n".join(lines) + "\n"


def format_markdown(via: ViaEdgeResult) -> str:
    lines = [f"_{md_cell(caption(via))}_", "", "| " + " | ".join(HEAD) + " |"]
    lines += [
        "|" + "---|" * len(HEAD),
        *("| " + " | ".join(map(md_cell, r)) + " |" for r in rows(via)),
    ]
    return "\n".join(lines) + "\n"
