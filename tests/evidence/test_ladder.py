"""Context ladder: prompt sizing with /tokenize, streamed timings, refusals (emulator subprocess, no Docker)."""

from __future__ import annotations

import math

import pytest

from composegen.errors import BadInput
from composegen.evidence import ladder
from tests.support.emulator_proc import EmulatorProc


@pytest.fixture(scope="module")
def emu(tmp_path_factory):
    env = {"EMU_PREFILL_TOK_S": "50000", "EMU_DECODE_TOK_S": "400"}
    with EmulatorProc.start(tmp_path_factory.mktemp("emu"), max_model_len=16384, env=env) as proc:
        yield proc


def _counter(per_word: float, overhead: int, calls: list):
    def count(n: int) -> int:
        calls.append(n)
        # uneven, but never decreasing much
        return overhead + math.floor(per_word * n + 0.3 * math.sin(n))

    return count


@pytest.mark.parametrize("per_word", [0.7, 1.0, 1.37, 2.9])
def test_sizing_lands_in_the_window_in_a_few_tokenize_calls(per_word):
    calls: list = []
    target = 117_500
    low, high = math.ceil(target * 0.995), math.floor(target * 1.005)
    words, tokens, problem = ladder.size_prompt(_counter(per_word, 41, calls), target, low, high)
    assert problem is None
    assert low <= tokens <= high
    assert tokens == _counter(per_word, 41, [])(words)
    assert len(calls) <= 6


def test_sizing_reports_when_no_whole_word_count_fits():
    # 10 tokens per word: the window [103, 104] holds no value 20 + 10·n can take.
    _, _, problem = ladder.size_prompt(lambda n: 20 + 10 * n, 104, 103, 104)
    assert problem is not None and "no prompt size" in problem
    _, _, problem = ladder.size_prompt(lambda n: 500 + n, 100, 99, 101)
    assert "fixed prompt alone is 500" in problem


def test_ladder_rows_hit_their_targets_and_time_the_stream(emu):
    targets = [1000, 4000, 12000]
    found = ladder.run_ladder(emu.base_url, emu.model, targets, max_model_len=16384)
    result = found.to_json()
    assert result["ok"] is True
    rows = result["targets"]
    assert [r["target"] for r in rows] == targets
    for row in rows:
        assert row["ok"] and row["reason"] is None
        assert abs(row["prompt_tokens"] - row["target"]) <= row["target"] * 0.005
        # /tokenize and the API count the same messages
        assert row["tokenized"] == row["prompt_tokens"]
        assert (
            row["finish_reason"] == "stop"
            and row["completion_tokens"] > 1
            and row["reasoning_tokens"] == 0
        )
        assert row["ttft_s"] > 0 and row["e2e_s"] >= row["ttft_s"]
        assert row["prefill_tok_s"] == pytest.approx(row["prompt_tokens"] / row["ttft_s"], rel=1e-3)
        # the emulator paces 400 tok/s; loose for a busy machine
        assert 50 < row["decode_tok_s"] < 20000
    # The emulator sleeps prompt_tokens / 50,000 s before the first token: a bigger prompt waits longer.
    assert rows[2]["ttft_s"] > rows[0]["ttft_s"]
    assert result["largest_prompt_tokens"] == rows[2]["prompt_tokens"]
    assert "largest API-reported prompt: " in ladder.format_text(found)


def _finished_requests(emu) -> float:
    import urllib.request

    text = (
        urllib.request.urlopen(f"http://127.0.0.1:{emu.port}/metrics", timeout=10).read().decode()
    )
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("vllm:request_success_total")
    )


def test_one_unmeasured_warm_up_goes_before_the_first_rung_and_the_json_says_so(emu):
    before = _finished_requests(emu)
    result = ladder.run_ladder(emu.base_url, emu.model, [500, 1000], max_model_len=16384).to_json()
    assert _finished_requests(emu) - before == 3  # the warm-up and the two rungs
    warmup = result["warmup"]
    assert warmup["sent"] is True and warmup["reason"] is None and warmup["ttft_s"] > 0
    assert 0 < warmup["prompt_tokens"] < 100  # short: it warms the server, it is no rung
    assert [r["target"] for r in result["targets"]] == [500, 1000]  # and it is no row
    refused = ladder.run_ladder(emu.base_url, emu.model, [16384], max_model_len=16384).to_json()
    assert refused["warmup"] == {
        "sent": False,
        "prompt_tokens": None,
        "ttft_s": None,
        "reason": None,
    }


def test_targets_above_the_budget_are_refused_without_a_request(emu):
    result = ladder.run_ladder(
        emu.base_url, emu.model, [16384 - 63, 2000], max_model_len=16384
    ).to_json()
    refused, fine = result["targets"]
    assert (
        refused["ok"] is False and refused["prompt_tokens"] is None and refused["tokenized"] is None
    )
    assert "max_model_len − max_tokens = 16320" in refused["reason"]
    assert fine["ok"] is True
    assert result["ok"] is False and result["largest_prompt_tokens"] == fine["prompt_tokens"]


def test_reasoning_tokens_are_counted_apart_from_content(emu):
    result = ladder.run_ladder(
        emu.base_url, emu.model, [800], max_model_len=16384, max_tokens=200, reasoning_effort="high"
    ).to_json()
    row = result["targets"][0]
    assert row["ok"] and row["reasoning_tokens"] > 0
    assert row["completion_tokens"] > row["reasoning_tokens"]  # the answer came after the thinking


def test_a_wrong_max_model_len_shows_as_failed_rows(emu):
    # The caller believes the context is larger than the server's: the server refuses the prompt (400).
    result = ladder.run_ladder(emu.base_url, emu.model, [20000], max_model_len=32768).to_json()
    row = result["targets"][0]
    assert row["ok"] is False and row["reason"].startswith("HTTP 400")
    assert result["largest_prompt_tokens"] is None


def test_bad_arguments_are_bad_input():
    with pytest.raises(BadInput):
        ladder.run_ladder("http://127.0.0.1:1", "m", [], max_model_len=100)
    with pytest.raises(BadInput):
        ladder.run_ladder("http://127.0.0.1:1", "m", [10], max_model_len=0)
