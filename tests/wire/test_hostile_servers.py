"""Peers that lie: a real server on 127.0.0.1 (tests/support/hostile_server.py) drips, floods, stalls
or answers with the wrong shape on one path, and every client composegen has — readiness, status, top,
/tokenize (ladder and bench sizing), gates, ladder, bench — ends in one clear EngineError line (exit 3)
within its deadline, never an internal error or a hang."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from composegen.bench import closed
from composegen.errors import RUNTIME, EngineError
from composegen.evidence import gates, ladder
from composegen.monitor import watch
from composegen.stack import readiness
from composegen.wire.http import WireError
from tests.support.hostile_server import REPLIES, STREAMS, HostileServer

DEADLINE = 1.5
SLACK = 15.0  # the bound on top of the deadline (a loaded 2-core machine): a hang would be minutes


def _fails_clearly(call, *, within: float = DEADLINE + SLACK) -> EngineError:
    started = time.monotonic()
    with pytest.raises(EngineError) as caught:
        call()
    assert time.monotonic() - started < within, "took as long as a hang"
    exc = caught.value
    assert exc.exit_code == RUNTIME
    assert "\n" not in exc.message and len(exc.message) < 400, exc.message
    return exc


@pytest.mark.parametrize("behaviour", REPLIES)
def test_tokenize_lies_end_ladder_and_bench_sizing_with_one_line(behaviour):
    with HostileServer.start("/tokenize", behaviour) as srv:
        tok = ladder.Tokenizer(srv.base_url, srv.model, None, DEADLINE)
        exc = _fails_clearly(lambda: tok.count([{"role": "user", "content": "hi"}]))
        assert "/tokenize" in exc.message
        _fails_clearly(
            lambda: closed.run_bench(
                srv.base_url,
                srv.model,
                [1],
                input_tokens=40,
                output_tokens=4,
                requests=1,
                timeout=DEADLINE,
            )
        )


def test_a_tokenize_reply_cut_in_flight_is_asked_once_more():
    # once: the ladder's sizing goes on (seen once through the edge's door in CI); twice: it fails
    with HostileServer.start("/tokenize", "once_cut") as srv:
        tok = ladder.Tokenizer(srv.base_url, srv.model, None, DEADLINE)
        assert tok.count([{"role": "user", "content": "three little words"}]) == 5 + 3
        assert srv.server.lies == 2
    with HostileServer.start("/tokenize", "cut") as srv:
        tok = ladder.Tokenizer(srv.base_url, srv.model, None, DEADLINE)
        exc = _fails_clearly(lambda: tok.count([{"role": "user", "content": "hi"}]))
        assert "bytes short of its Content-Length" in exc.message and srv.server.lies == 2


@pytest.mark.parametrize("behaviour", REPLIES)
def test_chat_completion_lies_end_the_gates(behaviour):
    with HostileServer.start("/v1/chat/completions", behaviour) as srv:
        exc = _fails_clearly(
            lambda: gates.run_gates(srv.base_url, srv.model, only="smoke", timeout=DEADLINE)
        )
        assert srv.base_url in exc.message


@pytest.mark.parametrize("behaviour", ["wrong_types", "list", "missing_keys", "huge", "deep"])
def test_responses_and_model_listing_lies_end_the_gates(behaviour):
    with HostileServer.start("/v1/responses", behaviour) as srv:
        _fails_clearly(
            lambda: gates.run_gates(srv.base_url, srv.model, only="responses", timeout=DEADLINE)
        )
    with HostileServer.start("/v1/models", behaviour) as srv:
        _fails_clearly(
            lambda: gates.run_gates(srv.base_url, srv.model, only="smoke", timeout=DEADLINE)
        )


@pytest.mark.parametrize("behaviour", STREAMS)
def test_stream_lies_end_stream_tools_ladder_and_bench(behaviour):
    with HostileServer.start("/v1/chat/completions", behaviour) as srv:
        exc = _fails_clearly(
            lambda: gates.run_gates(srv.base_url, srv.model, only="stream_tools", timeout=DEADLINE)
        )
        assert srv.base_url in exc.message
        _fails_clearly(
            lambda: ladder.run_ladder(
                srv.base_url, srv.model, [50], max_model_len=4096, max_tokens=4, timeout=DEADLINE
            )
        )
        exc = _fails_clearly(
            lambda: closed.run_bench(
                srv.base_url,
                srv.model,
                [1],
                input_tokens=40,
                output_tokens=4,
                requests=1,
                timeout=DEADLINE,
            )
        )
        assert "warm-up" in exc.message


def test_honest_server_passes_every_client():
    """The same server without a lie: the clients above succeed, so their failures are the lies'."""
    with HostileServer.start("/nowhere", "drip") as srv:
        ep = readiness.Endpoint("127.0.0.1", srv.port)
        assert (
            readiness.health_ok(ep) and readiness.models_entry(ep, srv.model).max_model_len == 4096
        )
        assert watch.scrape(ep, timeout=DEADLINE) is not None
        assert (
            ladder.Tokenizer(srv.base_url, srv.model, None, DEADLINE).count([{"content": "a b c"}])
            == 8
        )
        result = closed.run_bench(
            srv.base_url, srv.model, [1], input_tokens=40, output_tokens=4, requests=2, timeout=5
        )
        assert result.ok and result.levels[0].completed == 2
        rows = ladder.run_ladder(
            srv.base_url, srv.model, [50], max_model_len=4096, max_tokens=4, timeout=5
        ).targets
        assert rows[0].prompt_tokens == rows[0].tokenized


@pytest.mark.parametrize("behaviour", REPLIES)
def test_metrics_lies_end_top_scrape(behaviour):
    with HostileServer.start("/metrics", behaviour) as srv:
        ep = readiness.Endpoint("127.0.0.1", srv.port)
        started = time.monotonic()
        try:
            watch.scrape(ep, timeout=DEADLINE)
        except EngineError as exc:
            assert "\n" not in exc.message and exc.exit_code == RUNTIME
        else:
            # text Prometheus read
            assert behaviour in ("not_json", "list", "missing_keys", "wrong_types", "deep")
        assert time.monotonic() - started < DEADLINE + SLACK


@pytest.mark.parametrize("behaviour", REPLIES)
def test_readiness_and_status_reads_are_bounded_and_checked(behaviour):
    with HostileServer.start("/v1/models", behaviour) as srv:
        ep = readiness.Endpoint("127.0.0.1", srv.port)
        started = time.monotonic()
        try:
            # too slow: not ready yet, polled again
            assert readiness.models_entry(ep, srv.model) is None
            assert behaviour in ("drip", "drip_headers", "silent")
        except WireError as exc:
            assert (
                behaviour not in ("drip", "drip_headers", "silent") and "/v1/models" in exc.message
            )
        assert time.monotonic() - started < 2.0 + SLACK
    with HostileServer.start("/health", behaviour) as srv:
        ep = readiness.Endpoint("127.0.0.1", srv.port)
        started = time.monotonic()
        healthy = readiness.health_ok(ep)
        assert time.monotonic() - started < 1.0 + SLACK
        assert healthy is (behaviour not in ("drip", "drip_headers", "silent", "huge", "cut"))


@pytest.mark.parametrize("behaviour", ["drip", "drip_headers", "huge", "silent"])
def test_top_url_against_a_lying_metrics_page_exits_3_with_one_line(behaviour):
    with HostileServer.start("/metrics", behaviour) as srv:
        started = time.monotonic()
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "composegen",
                "top",
                "--url",
                srv.base_url,
                "--once",
                "--interval",
                "0.1",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert time.monotonic() - started < 30
    assert proc.returncode == 3, (proc.stdout, proc.stderr)
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr, (
        proc.stderr
    )
    assert f"{srv.base_url}/metrics" in proc.stderr


def test_server_error_text_reaches_the_terminal_inert(capsys):
    from composegen.cli import exits

    with HostileServer.start("/tokenize", "escapes") as srv:
        tok = ladder.Tokenizer(srv.base_url, srv.model, None, DEADLINE)
        # the error keeps the text as sent
        assert "\x1b" in _fails_clearly(lambda: tok.count([])).message
        assert exits.run(lambda: tok.count([])) == RUNTIME
    printed = capsys.readouterr().err
    assert "\x1b" not in printed and "\x07" not in printed and "\\x1b]52;c;ZXZpbA==\\x07" in printed
    assert len(printed.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "behaviour", ["drip", "drip_headers", "silent", "hub_wrong_siblings", "deep", "list"]
)
def test_a_lying_hub_ends_the_weights_file_listing_with_one_line(behaviour, monkeypatch, tmp_path):
    from composegen.weights import hub
    from composegen.weights.cache import Location

    revision = "b" * 40
    loc = Location("hub", str(tmp_path), "/root/.cache/huggingface/hub", "org/model", revision)
    with HostileServer.start(f"/api/models/org/model/revision/{revision}", behaviour) as srv:
        monkeypatch.setenv("HF_ENDPOINT", srv.base_url)
        monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
        exc = _fails_clearly(lambda: hub.files(loc, deadline_s=DEADLINE))
        assert srv.base_url in exc.message


CHUNKS = [
    (b'{"choices":[{"index":0,"delta":{"content":"w"},"finish_reason":null}]}', True),
    (b'{"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2}}', True),
    (b'{"error":{"message":"boom"}}', True),
    (b'{"choices":"x"}', False),
    (b'{"choices":[{"delta":"x"}]}', False),
    (b'{"choices":[{"delta":{"content":5}}]}', False),
    (b'{"choices":[{"finish_reason":["stop"]}]}', False),
    (b'{"usage":{"prompt_tokens":"9"}}', False),
    (b'{"usage":{"completion_tokens":true}}', False),
    (b'{"usage":[]}', False),
    (b"[1, 2]", False),
    (b"{not json", False),
    (b"[" * 100_000, False),
]


@pytest.mark.parametrize("data,ok", CHUNKS)
def test_the_chunk_model_accepts_and_refuses_events(data, ok):
    """The model the transport uses for gates and ladder refuses a malformed event in one line."""
    from composegen.wire import replies

    try:
        replies.check(replies.ChatChunk, data, "u")
        assert ok
    except WireError as exc:
        assert not ok and exc.message.startswith("u: ") and "\n" not in exc.message
