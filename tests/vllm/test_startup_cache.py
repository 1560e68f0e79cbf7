"""torch.compile's cache in the startup report, read from three starts of one real vLLM 0.26.0 on an H100
(tests/data/real-0.26.0-h100-warmstart, copied unchanged): an empty cache, an empty one again, the same
directory kept. Every figure is compared with what the recording's own starts.jsonl says of its log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from composegen.vllm.startup import format_text, parse_startup_log

WARM = Path(__file__).resolve().parents[1] / "data" / "real-0.26.0-h100-warmstart"
STARTS = {s["start"]: s for s in map(json.loads, (WARM / "starts.jsonl").read_text().splitlines())}
# the recording's README: first and fresh began with an empty cache directory, kept with fresh's
STATE = {"first": "cold", "fresh": "cold", "kept": "warm"}
GRAPH = "graph for compile range (1, 2048)"


@pytest.mark.parametrize("start", ["first", "fresh", "kept"])
def test_each_recorded_start_reads_as_logged(start):
    recorded = STARTS[start]
    report = parse_startup_log((WARM / f"{start}.log").read_text())
    assert report.cache == STATE[start]
    assert report.compile_seconds == recorded["torch_compile_s"]
    assert report.engine_init_seconds == recorded["init_engine_s"]
    assert report.cuda_graph_seconds == recorded["graph_capture_s"]
    directory = recorded["cache_lines"][0].split("Using cache directory: ")[1].split(" for ")[0]
    assert report.cache_directory == directory
    done = [GRAPH, "AOT compilation"]
    assert (report.cache_reused, report.cache_compiled) == (
        (done, []) if STATE[start] == "warm" else ([], done)
    )
    # the graph line's own seconds: `… takes 7.36 s` cold, `… from the cache, took 0.088 s` warm
    graph_line = recorded["cache_lines"][1]
    seconds = float(graph_line.rsplit(" ", 2)[-2])
    assert (report.graph_load_seconds, report.graph_compile_seconds) == (
        (seconds, None) if STATE[start] == "warm" else (None, seconds)
    )


def test_kept_cache_is_the_shorter_compile_and_the_text_names_it():
    fresh, kept = (parse_startup_log((WARM / f"{s}.log").read_text()) for s in ("fresh", "kept"))
    assert kept.compile_seconds < fresh.compile_seconds
    assert kept.engine_init_seconds < fresh.engine_init_seconds
    text = format_text(kept)
    assert "cache:" in text and " warm" in text
    assert "cache_reused:" in text and f"{GRAPH}, AOT compilation" in text


def test_both_reused_and_compiled_is_partial_and_no_lines_is_no_verdict():
    kept = (WARM / "kept.log").read_text()
    fresh_graph = next(
        line
        for line in (WARM / "fresh.log").read_text().splitlines()
        if "Compiling a graph" in line
    )
    mixed = kept.splitlines()
    mixed.insert(40, fresh_graph.replace("(1, 2048)", "(2049, 8192)"))
    partial = parse_startup_log("\n".join(mixed))
    assert partial.cache == "partial"
    assert partial.cache_compiled == ["graph for compile range (2049, 8192)"]
    eager = parse_startup_log(
        "\n".join(
            line
            for line in kept.splitlines()
            if "compil" not in line and "cache directory" not in line
        )
    )
    assert eager.cache is None and eager.cache_directory is None and eager.cache_reused == []
