"""bench: the figures (vllm bench serve's names and definitions), and sweeps against the emulator as a
local subprocess with its pacing (no Docker); the engine test is in test_bench_engine.py."""

from __future__ import annotations

import json

import numpy
import pytest

from composegen.bench import closed, spec, stats
from composegen.bench.reports import BenchResult
from composegen.bench.stats import Sample
from composegen.errors import BadInput, EngineError
from tests.support.cli import run_cli
from tests.support.emulator_proc import EmulatorProc
from tests.support.stub_server import Quiet, serving, url


@pytest.fixture(scope="module")
def emu(tmp_path_factory):
    env = {"EMU_PREFILL_TOK_S": "20000", "EMU_DECODE_TOK_S": "200"}
    with EmulatorProc.start(tmp_path_factory.mktemp("emu"), max_model_len=8192, env=env) as proc:
        yield proc


@pytest.mark.parametrize(
    "values", [[3.0], [1.0, 2.0], [5.0, 1.0, 9.0, 2.5, 7.25], list(map(float, range(101)))]
)
def test_percentiles_are_numpys_linear_ones(values):
    for q in (50, 90, 99):
        assert stats.percentile(values, q) == pytest.approx(numpy.percentile(values, q))


def test_a_level_summary_uses_the_upstream_definitions():
    samples = [
        Sample(ttft=0.1, e2el=0.5, itls=[0.1, 0.1, 0.2], input_tokens=100, output_tokens=5),
        Sample(ttft=0.3, e2el=0.6, itls=[0.15], input_tokens=100, output_tokens=2),
        # no TPOT with one token
        Sample(ttft=0.2, e2el=0.2, itls=[], input_tokens=100, output_tokens=1),
        Sample(error="HTTP 500: boom"),
    ]
    level = stats.summarise(
        4, samples, 2.0, cpu_s=0.02, distinct_prompts=4, slos={"ttft": 150, "e2el": 550}
    )
    assert (level.completed, level.errors, level.error_messages) == (3, 1, ["HTTP 500: boom"])
    assert (level.total_input_tokens, level.total_output_tokens) == (300, 8)
    assert (level.request_throughput, level.output_throughput, level.total_token_throughput) == (
        1.5,
        4.0,
        154.0,
    )
    assert level.mean_ttft_ms == pytest.approx(200.0) and level.median_ttft_ms == pytest.approx(
        200.0
    )
    # TPOT per request: (0.5 − 0.1) / 4 = 100 ms and (0.6 − 0.3) / 1 = 300 ms; the one-token request has none.
    assert level.mean_tpot_ms == pytest.approx(200.0) and level.p99_tpot_ms == pytest.approx(298.0)
    # every gap of every request: 100, 100, 200, 150
    assert level.mean_itl_ms == pytest.approx(137.5)
    assert level.p99_e2el_ms == pytest.approx(numpy.percentile([500, 600, 200], 99))
    # only the first request is within both SLOs (ttft 100, e2el 500)
    assert level.request_goodput == 0.5
    assert level.client_cpu_ms_per_request == 5.0 and level.client_cpu_share == 0.01
    busy = stats.summarise(1, samples[:1], 0.1, cpu_s=0.09, distinct_prompts=1)
    result = BenchResult(
        model="m", input_tokens=100, input_tokens_exact=True, output_tokens=5, requests=1, duration_s=None, seed=1,
        ok=True, levels=[level, busy],
    )  # fmt: skip
    assert "the client was busy more than 70% of the time at concurrency 1:" in stats.format_text(
        result
    )


def test_goodput_slos_are_parsed_like_vllms_and_bad_ones_refused():
    assert stats.parse_slos("ttft:500,tpot:50") == {"ttft": 500.0, "tpot": 50.0}
    assert stats.parse_slos("ttft:500 e2el:9000") == {"ttft": 500.0, "e2el": 9000.0}
    for bad in ("itl:5", "ttft", "ttft:-1", "ttft:fast"):
        with pytest.raises(BadInput, match="--goodput"):
            stats.parse_slos(bad)


def test_every_request_is_counted_with_exact_prompts(emu):
    result = closed.run_bench(
        emu.base_url, emu.model, [1, 3], input_tokens=257, output_tokens=12, requests=7, seed=5
    )
    assert result.ok and result.input_tokens_exact and result.seed == 5
    for level in result.levels:
        assert level.completed == 7 and level.errors == 0 and level.distinct_prompts == 7
        assert level.total_input_tokens == 7 * 257  # API-reported usage: every prompt sized exactly
        assert 0 < level.total_output_tokens <= 7 * 12
        assert (
            level.median_ttft_ms > 0
            and level.median_tpot_ms > 0
            and level.p99_e2el_ms >= level.p99_ttft_ms
        )
        assert level.client_cpu_ms_per_request is not None and level.client_cpu_ms_per_request > 0
    assert [lv.concurrency for lv in result.levels] == [1, 3]
    # the client's queue apart from the server's time: at c1 the 7th request waits for 6 others
    c1 = result.levels[0]
    assert c1.client_queue_max_ms > 5 * c1.median_e2el_ms and c1.client_queue_p50_ms > 0
    assert c1.server_ttft_mean_ms is not None and c1.server_queue_mean_ms is not None
    record = result.comparability
    assert record.server_check == "agrees" and record.engine_start == "unknown"
    assert record.cpu_governor == spec.governor() and len(record.load_end) == 3
    doc = result.to_json()
    assert BenchResult.model_validate(doc) == result  # the JSON form round-trips
    assert "request_throughput" in doc["levels"][0] and "p99_itl_ms" in doc["levels"][0]


def test_a_duration_level_keeps_sending_until_its_time_is_up(emu):
    result = closed.run_bench(
        emu.base_url, emu.model, [2], input_tokens=50, output_tokens=4, duration=0.6, seed=1
    )
    level = result.levels[0]
    assert result.requests is None and result.duration_s == 0.6
    assert level.completed >= 4 and level.errors == 0 and level.duration >= 0.6


def test_requests_the_server_refuses_are_errors_not_crashes(emu):
    # 8,000 + 300 tokens do not fit in max_model_len 8192: the warm-up request is refused, nothing is measured.
    with pytest.raises(EngineError, match="warm-up request failed: HTTP 400"):
        closed.run_bench(
            emu.base_url, emu.model, [1], input_tokens=8000, output_tokens=300, requests=2
        )


def test_bad_arguments_are_bad_input():
    for kwargs in (
        {"requests": 4, "duration": 1.0},
        {},
        {"requests": 0},
        {"duration": -1.0},
    ):
        with pytest.raises(BadInput):
            closed.run_bench(
                "http://127.0.0.1:9", "m", [1], input_tokens=10, output_tokens=4, **kwargs
            )
    with pytest.raises(BadInput, match="--concurrency"):
        closed.run_bench(
            "http://127.0.0.1:9", "m", [0], input_tokens=10, output_tokens=4, requests=1
        )
    with pytest.raises(BadInput, match="--input-tokens"):
        closed.run_bench(
            "http://127.0.0.1:9", "m", [1], input_tokens=0, output_tokens=4, requests=1
        )


def test_bench_command_refuses_bad_options_with_exit_2(tmp_path):
    for args in (
        ["--requests", "3", "--duration", "2"],
        ["--requests", "3", "--goodput", "speed:3"],
    ):
        res = run_cli("bench", "r33", "--input-tokens", "10", "--output-tokens", "2", *args)
        assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    (tmp_path / "dir").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "dir")
    res = run_cli("bench", "r33", "--input-tokens", "10", "--output-tokens", "2", "--requests", "1",
                  "--save-vllm-results", str(tmp_path / "link"))  # fmt: skip
    assert (
        res.returncode == 2
        and "links are not followed" in res.stderr
        and "Traceback" not in res.stderr
    )
    shaped = run_cli("schema", "--report", "vllm-bench-serve")
    assert (
        shaped.returncode == 0
        and "max_concurrent_requests" in json.loads(shaped.stdout)["properties"]
    )
    schema = run_cli("schema", "--report", "bench")
    assert (
        schema.returncode == 0
        and "median_ttft_ms" in json.loads(schema.stdout)["$defs"]["LevelResult"]["properties"]
    )


class _Flaky(Quiet):
    """CRLF-framed SSE; every third request's stream carries vLLM's in-stream error event instead."""

    protocol_version = "HTTP/1.1"
    calls = 0

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        if self.path == "/tokenize":
            data = json.dumps(
                {"count": sum(len(m["content"].split()) + 4 for m in body["messages"]) + 3}
            ).encode()
            return self.reply(200, data)
        type(self).calls += 1
        events = [
            {"choices": [{"delta": {"content": w}, "finish_reason": None}]}
            for w in ("a", " b", " c")
        ]
        events.append({"choices": [{"delta": {}, "finish_reason": "length"}]})
        events.append({"choices": [], "usage": {"prompt_tokens": 40, "completion_tokens": 3}})
        if type(self).calls % 3 == 0:
            events[1:] = [
                {
                    "error": {
                        "message": "EngineCore died",
                        "type": "InternalServerError",
                        "code": 500,
                    }
                }
            ]
        payload = (
            b"".join(b"data: " + json.dumps(e).encode() + b"\r\n\r\n" for e in events)
            + b"data: [DONE]\r\n\r\n"
        )
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("connection", "close")
        self.end_headers()
        self.close_connection = True
        self.wfile.write(payload)


def test_stream_errors_are_counted_and_crlf_frames_parsed():
    with serving(_Flaky) as server:
        result = closed.run_bench(
            url(server), "m", [2], input_tokens=40, output_tokens=3, requests=9, seed=1
        )
    level = result.levels[0]
    assert level.completed + level.errors == 9 and level.errors >= 2 and not result.ok
    assert level.error_messages == ["stream error: EngineCore died"]
    assert level.total_output_tokens == 3 * level.completed and level.median_itl_ms is not None
