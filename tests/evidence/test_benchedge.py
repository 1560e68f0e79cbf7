"""bench --via-edge's measurement (evidence/viaedge.py) without Docker: the emulator as a local
subprocess is the "door", and the same emulator behind a relay that holds every request 25 ms is the
"edge" — so what the edge adds is known: +25 ms of TTFT and e2el, nothing between tokens. The real
edge (TLS, the gatekeeper, the throw-away key) is tests/edge/test_bench_via_edge_engine.py."""

from __future__ import annotations

import re
import socket
import threading
import time

import pytest

from composegen.bench import stats, viaedge, viaedgetext
from composegen.bench.reports import BenchResult, LevelResult, PathFigures
from composegen.bench.spec import BenchSpec
from composegen.errors import EngineError
from tests.support.emulator_proc import EmulatorProc

HOLD_S = 0.025
N = 12  # requests per path and level: 6 left a median at the mercy of one slow request


class HoldingRelay:
    """TCP relay to PORT; every chunk the client sends is held HOLD_S before it goes on."""

    def __init__(self, port: int) -> None:
        self.upstream = port
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.upstream))
            for sock in (client, upstream):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(
                target=self._pipe, args=(client, upstream, HOLD_S), daemon=True
            ).start()
            threading.Thread(target=self._pipe, args=(upstream, client, 0), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket, hold: float) -> None:
        try:
            while data := src.recv(65536):
                time.sleep(hold)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                sock.close()

    def close(self) -> None:
        self.server.close()


@pytest.fixture(scope="module")
def ways(tmp_path_factory):
    env = {"EMU_PREFILL_TOK_S": "20000", "EMU_DECODE_TOK_S": "200"}
    with EmulatorProc.start(tmp_path_factory.mktemp("emu"), max_model_len=8192, env=env) as emu:
        relay = HoldingRelay(int(emu.base_url.rsplit(":", 1)[1].split("/")[0]))
        door = viaedge.Way(emu.base_url, emu.model, None)
        edge = viaedge.EdgeWay(
            f"http://127.0.0.1:{relay.port}", emu.model, None, name="relay", tls="off (test)"
        )
        yield door, edge
        relay.close()


def test_both_paths_alternate_and_the_difference_is_what_the_edge_adds(ways):
    door, edge = ways
    result = viaedge.run_via_edge(
        door,
        edge,
        [1, 2],
        BenchSpec(input_tokens=64, output_tokens=8, requests=N, seed=3, emulated=True),
    )
    via = result.via_edge
    assert result.ok and result.input_tokens_exact and via is not None
    assert (
        [lv.concurrency for lv in via.levels] == [1, 2] == [lv.concurrency for lv in result.levels]
    )
    for lv, clients in zip(via.levels, result.levels, strict=True):
        assert (lv.door.completed, lv.door.errors, lv.edge.completed, lv.edge.errors) == (
            N,
            0,
            N,
            0,
        )
        assert clients.completed == N and clients.median_ttft_ms == lv.edge.median_ttft_ms
        assert clients.distinct_prompts == N and clients.total_input_tokens == N * 64
        # the relay holds each request 25 ms: TTFT and e2el grow by about that, the gaps do not
        assert 20 < lv.added_ttft_p50_ms < 60, lv
        # e2el also carries 7 gaps between tokens, each noisy on a loaded machine: a wider floor
        assert 15 < lv.added_e2el_p50_ms < 60, lv
        assert abs(lv.added_itl_p50_ms) < 2.5, lv
        assert lv.added_ttft_p50_ms == pytest.approx(
            lv.edge.median_ttft_ms - lv.door.median_ttft_ms, abs=1e-3
        )
    assert BenchResult.model_validate(result.to_json()) == result


def test_the_text_and_markdown_say_where_the_figures_came_from(ways):
    door, edge = ways
    via = viaedge.run_via_edge(
        door,
        edge,
        [1],
        BenchSpec(input_tokens=16, output_tokens=4, requests=2, emulated=True),
    ).via_edge
    assert via is not None
    text = viaedgetext.format_text(via)
    assert text.startswith("EMULATED vLLM: through the edge relay (http://127.0.0.1:")
    assert "requests alternated" in text
    rows = [line.split()[:2] for line in text.splitlines()[2:]]
    assert rows == [["1", "door"], ["1", "edge"], ["1", "added"]]
    added = text.splitlines()[4].split()  # 1 added by the edge TTFT-p50 ...
    assert added[5].startswith("+") and float(added[5]) > 20, text
    markdown = viaedgetext.format_markdown(via)
    assert markdown.startswith("_EMULATED vLLM: through the edge relay")
    assert "| 1 | added by the edge |  |  | +" in markdown
    measured = viaedgetext.caption(via.model_copy(update={"emulated": False}))
    assert measured.startswith("measured: ") and "EMULATED" not in measured
    unknown = viaedgetext.caption(via.model_copy(update={"emulated": None}))
    assert unknown.startswith("measured (engine not recorded): ")


def test_path_figures_are_a_subset_of_a_level_s():
    """viaedge._figures copies PathFigures' fields out of a LevelResult by name."""
    level = stats.summarise(1, [], 1.0, cpu_s=0.0, distinct_prompts=1).model_copy(
        update={"completed": 3, "errors": 1, "error_messages": ["boom"], "p99_e2el_ms": 9.5}
    )
    figures = viaedge._figures(level)
    assert set(PathFigures.model_fields) <= set(LevelResult.model_fields)
    assert (figures.completed, figures.errors, figures.error_messages) == (3, 1, ["boom"])
    assert figures.p99_e2el_ms == 9.5 and figures.median_ttft_ms == level.median_ttft_ms


def test_with_a_duration_both_paths_alternate_until_it_ends(ways):
    door, edge = ways
    started = time.perf_counter()
    result = viaedge.run_via_edge(
        door,
        edge,
        [2],
        BenchSpec(input_tokens=16, output_tokens=4, duration=1.0, seed=5, emulated=True),
    )
    level = result.via_edge.levels[0] if result.via_edge else None
    assert result.ok and level is not None and result.duration_s == 1.0
    # n even through the door, odd through the edge: equal counts, or the door one ahead
    assert level.door.completed - level.edge.completed in (0, 1), level
    assert level.edge.completed >= 4, level
    assert time.perf_counter() - started < 30


def test_a_path_that_fails_its_warm_up_is_an_engine_error(ways):
    door, _ = ways
    shut = viaedge.EdgeWay("http://127.0.0.1:9", door.model, None, name="x", tls="off")
    where = re.escape("bench --via-edge: http://127.0.0.1:9/v1/chat/completions: the warm-up")
    with pytest.raises(EngineError, match=where):
        viaedge.run_via_edge(
            door, shut, [1], BenchSpec(input_tokens=16, output_tokens=4, requests=1)
        )
