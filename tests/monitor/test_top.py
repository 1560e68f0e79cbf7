"""`composegen top`: the sample arithmetic on a real vLLM's recorded /metrics, `--once --json` against an
emulated engine under load, the live view in a real pseudo-terminal, and its refusals."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import sys
import threading
import time

import httpx
import jsonschema
import pytest

from composegen.monitor.sample import Scrape, bucket_deltas, compute, quantile
from tests.emulator.test_emulator_metrics import TINY_ENV, chat, recorded_exchange
from tests.support.cli import run_cli
from tests.support.emulator_proc import RECORDED_FLAGS, EmulatorProc
from tests.support.helpers import REPO
from tests.support.stub_server import Quiet, serving, url


def series_sum(text: str, name: str) -> float:
    """Sum of a sample's values over its label sets, read with a regex (independent of the parser)."""
    return sum(
        float(v) for v in re.findall(rf"^{re.escape(name)}(?:{{[^}}]*}})? (\S+)$", text, re.M)
    )


def test_sample_from_the_recorded_real_vllm_metrics():
    before_text, after_text = (
        recorded_exchange("metrics_before")["body"],
        recorded_exchange("metrics_after")["body"],
    )
    before, after = Scrape.parse(before_text, 0.0), Scrape.parse(after_text, 2.0)
    sample = compute(before, after, url="http://recorded")
    for field, name in (
        ("requests_finished", "vllm:request_success_total"),
        ("preemptions", "vllm:num_preemptions_total"),
    ):
        assert getattr(sample, field) == series_sum(after_text, name) - series_sum(
            before_text, name
        )
    prompt = series_sum(after_text, "vllm:prompt_tokens_total") - series_sum(
        before_text, "vllm:prompt_tokens_total"
    )
    assert sample.prompt_tokens_per_s == pytest.approx(prompt / 2.0)
    ttft_count = series_sum(after_text, "vllm:time_to_first_token_seconds_count") - series_sum(
        before_text, "vllm:time_to_first_token_seconds_count"
    )
    assert sample.ttft.count == ttft_count > 0
    assert 0 < sample.ttft.p50_s <= sample.ttft.p95_s
    assert sample.running == 0 and sample.kv_cache_usage == 0 and sample.spec_decode is None
    assert sample.window_s == 2.0


def test_quantile_follows_prometheus_histogram_quantile():
    # 10 observations: 4 in (0, 0.1], 4 in (0.1, 0.5], 2 in (0.5, +Inf)
    buckets = [(0.1, 4.0), (0.5, 8.0), (float("inf"), 10.0)]
    assert quantile(0.2, buckets) == pytest.approx(0.05)  # rank 2 of 4 in the first bucket
    assert quantile(0.6, buckets) == pytest.approx(0.1 + 0.4 * (6 - 4) / 4)
    assert quantile(0.95, buckets) == 0.5  # in +Inf: the largest finite bound
    assert quantile(0.5, [(0.1, 0.0), (float("inf"), 0.0)]) is None


def test_counter_reset_counts_the_new_value():
    old = Scrape.parse(
        '# TYPE x_seconds histogram\nx_seconds_bucket{le="1.0"} 5\nx_seconds_bucket{le="+Inf"} 9\n',
        0,
    )
    new = Scrape.parse(
        '# TYPE x_seconds histogram\nx_seconds_bucket{le="1.0"} 1\nx_seconds_bucket{le="+Inf"} 2\n',
        1,
    )
    assert bucket_deltas(old, new, "x_seconds") == [(1.0, 1.0), (float("inf"), 2.0)]


# 2 tokens/s, and no cap on a request's decode time: the held streams last until released.
SLOW_DECODE = {"EMU_DECODE_TOK_S": "2", "EMU_DECODE_SLEEP_CAP_S": "600"}


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    """An emulated engine admitting 2 sequences, decoding slowly, with speculative decoding."""
    args = [
        *RECORDED_FLAGS[:-5],
        "--max-num-seqs",
        "2",
        "--speculative-config",
        '{"method": "mtp", "num_speculative_tokens": 2}',
    ]
    with EmulatorProc.start(
        tmp_path_factory.mktemp("top"), serve_args=args, env={**TINY_ENV, **SLOW_DECODE}
    ) as emu:
        yield emu


def _held_stream(url: str, release: threading.Event) -> None:
    """A streamed chat that outlasts any sample (400 tokens at 2 tokens/s, uncapped) until `release`: then the client
    hangs up, and the engine aborts the request at its next token, as vLLM does."""
    body = {
        "model": "tiny",
        "messages": [{"role": "user", "content": "hello there"}],
        "max_tokens": 400,
    }
    with httpx.stream(
        "POST", f"{url}/v1/chat/completions", json={**body, "stream": True}, timeout=120
    ) as resp:
        for _ in resp.iter_bytes():
            if release.is_set():
                break


def _gauges(url: str) -> tuple[float, float]:
    text = httpx.get(f"{url}/metrics", timeout=10).text
    return series_sum(text, "vllm:num_requests_running"), series_sum(
        text, "vllm:num_requests_waiting"
    )


def _until(condition, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_once_json_shows_requests_running_and_waiting_under_load(loaded):
    release = threading.Event()
    threads = [
        threading.Thread(target=_held_stream, args=(loaded.base_url, release)) for _ in range(5)
    ]
    for t in threads:
        t.start()
    try:
        # The load is in place before `top` looks, and stays until it has looked: no race with the CLI's start.
        _until(
            lambda: _gauges(loaded.base_url) == (2, 3),
            "5 requests admitted as 2 running and 3 waiting",
        )
        res = run_cli("top", "--url", loaded.base_url, "--once", "--json", "--interval", "1")
    finally:
        release.set()
        for t in threads:
            t.join()
    assert res.returncode == 0, res.stderr
    sample = json.loads(res.stdout)
    # the admission cap holds the rest back
    assert sample["running"] == 2 and sample["waiting"] >= 1
    assert sample["kv_cache_usage"] > 0 and sample["window_s"] >= 1
    assert sample["url"] == loaded.base_url and sample["view"] == "single"
    assert len(sample["spec_decode"]["per_position"]) == 2
    schema = json.loads(run_cli("schema", "--report", "top").stdout)
    jsonschema.validate(sample, schema)
    _until(lambda: _gauges(loaded.base_url) == (0, 0), "the hung-up requests aborted")
    after = json.loads(
        run_cli("top", "--url", loaded.base_url, "--once", "--json", "--interval", "0.2").stdout
    )
    assert after["running"] == 0 and after["waiting"] == 0


def test_live_view_draws_in_a_terminal(loaded):
    threads = [threading.Thread(target=chat, args=(loaded.base_url, 8)) for _ in range(3)]
    for t in threads:
        t.start()
    pid, fd = pty.fork()
    if pid == 0:  # the child: composegen in a real pseudo-terminal of 100x24
        os.environ.update(COLUMNS="100", LINES="24", TERM="xterm")
        os.chdir(REPO)
        os.execv(
            sys.executable,
            [sys.executable, "-m", "composegen", "top", "--url", loaded.base_url, "--count", "3"],
        )
    screen = b""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 1)
        if not ready:
            continue
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        screen += chunk
    _, status = os.waitpid(pid, 0)
    for t in threads:
        t.join()
    text = re.sub(rb"\x1b\[[0-9;?]*[A-Za-z]", b"", screen).decode(errors="replace")
    assert os.waitstatus_to_exitcode(status) == 0, text
    for word in (
        "composegen top",
        "requests",
        "running",
        "KV cache",
        "tokens/s",
        "TTFT",
        "e2e latency",
        "spec decode",
    ):
        assert word in text, (word, text)


def test_refusals_are_one_line_with_the_documented_exit_codes():
    no_target = run_cli("top")
    assert no_target.returncode == 2 and "profile NAME" in no_target.stderr
    json_live = run_cli("top", "--url", "http://127.0.0.1:9", "--json")
    assert json_live.returncode == 2 and "--once" in json_live.stderr
    bad_url = run_cli("top", "--url", "ftp://x", "--once")
    assert bad_url.returncode == 2 and "--url" in bad_url.stderr
    closed = run_cli("top", "--url", "http://127.0.0.1:9", "--once", "--json")
    assert closed.returncode == 3 and "cannot read http://127.0.0.1:9/metrics" in closed.stderr
    assert "Traceback" not in no_target.stderr + json_live.stderr + bad_url.stderr + closed.stderr


def test_an_answer_that_is_not_prometheus_text_is_an_engine_error():
    class Html(Quiet):
        def do_GET(self):
            self.reply(200, b"<html>{not metrics</html>")

    with serving(Html) as server:
        res = run_cli("top", "--url", url(server), "--once", "--interval", "0.1")
    assert (
        res.returncode == 3
        and "is not Prometheus text" in res.stderr
        and "Traceback" not in res.stderr
    )
