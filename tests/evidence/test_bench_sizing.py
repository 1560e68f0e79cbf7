"""bench against a server with the recording's coarse tokenizer (tests/support/coarse_server.py: filler
words cost 5–9 tokens, an index's digits a varying count): every prompt lands on exactly the asked size
for any seed, the same prompts every run (no race between the sizing threads), short outputs fail the run,
and every level is also written in `vllm bench serve`'s result shape, field for field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from composegen.bench import closed, stats
from composegen.bench.prompts import Prompts
from composegen.bench.spec import BenchSpec
from composegen.errors import BadInput
from tests.support.coarse_server import CoarseServer, count_messages

REFERENCE = Path(__file__).resolve().parents[1] / "data" / "real-0.26.0-h200-graphs"


@pytest.fixture
def server():
    srv = CoarseServer().start()
    yield srv
    srv.close()


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 7, 11, 2026])
def test_every_prompt_is_exactly_the_size_on_a_coarse_tokenizer(seed):
    prompts = Prompts(count_messages, 256, seed)
    made = prompts.make_many(list(range(1, 65)))
    assert [tokens for _, tokens in made] == [256] * 64
    # counted again, independently
    assert [count_messages(messages) for messages, _ in made] == [256] * 64
    assert len({m[0]["content"] for m, _ in made}) == 64  # pairwise different: no prefix-cache hits
    # " a" costs two tokens here: the next single-token piece was found
    assert prompts.plan().pad == " x"


def test_sizing_is_the_same_every_run_whatever_the_threads_do():
    runs = [
        [m[0]["content"] for m, _ in Prompts(count_messages, 300, 5).make_many(list(range(200)))]
        for _ in range(3)
    ]
    assert runs[0] == runs[1] == runs[2]


def test_a_size_below_the_fixed_prompt_is_refused():
    with pytest.raises(BadInput, match="the fixed prompt alone is"):
        Prompts(count_messages, 5, 1).plan()


def test_the_api_counts_exactly_the_asked_prompt_tokens_for_every_request(server):
    run = closed.run_sweep(
        server.base_url,
        "m",
        [1, 4],
        BenchSpec(input_tokens=256, output_tokens=32, requests=64, seed=2),
    )
    assert run.result.ok and run.result.input_tokens_exact
    assert server.prompts == [256] * (1 + 2 * 64)  # the warm-up and every request of both levels
    for level in run.result.levels:
        assert level.total_input_tokens == 64 * 256 and level.input_tokens_off == 0
        assert level.total_output_tokens == 64 * 32 and level.short_outputs == 0


def test_a_server_that_ignores_ignore_eos_is_not_ok(monkeypatch, server):
    monkeypatch.setattr(closed, "chat_body", _without_ignore_eos(closed.chat_body))
    result = closed.run_bench(
        server.base_url, "m", [1, 2], input_tokens=64, output_tokens=64, requests=4, seed=1
    )
    assert not result.ok
    assert [lv.short_outputs for lv in result.levels] == [4, 4] and all(
        lv.errors == 0 for lv in result.levels
    )
    assert result.levels[0].total_output_tokens == 4 * 30
    text = stats.format_text(result)
    assert "FAILED: 8 request(s) stopped before 64 output tokens (usage)" in text
    assert text.rstrip().endswith("FAILED: requests stopped short of the output tokens")


def _without_ignore_eos(make):
    def body(*args, **kwargs):
        return {k: v for k, v in make(*args, **kwargs).items() if k != "ignore_eos"}

    return body


def test_each_level_is_written_in_vllm_bench_serves_result_shape(server, tmp_path):
    server.spec_tokens = 5  # the DSpark profiles speculate 5 tokens
    run = closed.run_sweep(
        server.base_url,
        "m",
        [1, 4, 16],
        BenchSpec(input_tokens=256, output_tokens=32, requests=64, seed=0),
    )
    written = closed.save_vllm_results(run, tmp_path / "out")
    assert [p.name for p in written] == [f"vllm-bench-serve-c{c}.json" for c in (1, 4, 16)]
    for path in written:
        ours = json.loads(path.read_text(encoding="utf-8"))
        theirs = json.loads((REFERENCE / path.name).read_text(encoding="utf-8"))
        spec = [k for k in ours if k.startswith("spec_decode_")]
        # every key of vLLM's, in vLLM's order
        assert [k for k in ours if k not in spec] == list(theirs)
        for key, value in theirs.items():
            assert type(ours[key]) is type(value), key  # 16 vs 16.0 matters to strict readers
        assert (ours["num_prompts"], ours["completed"], ours["failed"]) == (64, 64, 0)
        assert ours["total_input_tokens"] == 64 * 256 and ours["total_output_tokens"] == 64 * 32
        assert ours["request_rate"] == "inf" and ours["max_concurrency"] == int(
            path.stem.rsplit("c", 1)[1]
        )
        assert (
            0 < ours["max_output_tokens_per_s"] <= 64 * 32
            and 1 <= ours["max_concurrent_requests"] <= 64
        )
        # 5 draft positions, positions 0 and 1 always accepted: the server's own counters, per level
        assert spec == [
            "spec_decode_acceptance_rate",
            "spec_decode_acceptance_length",
            "spec_decode_num_drafts",
            "spec_decode_draft_tokens",
            "spec_decode_accepted_tokens",
            "spec_decode_per_position_acceptance_rates",
        ]
        assert ours["spec_decode_num_drafts"] == 64 * 10 and ours[
            "spec_decode_acceptance_rate"
        ] == pytest.approx(40)
        assert ours["spec_decode_acceptance_length"] == pytest.approx(3.0)
        assert ours["spec_decode_per_position_acceptance_rates"] == [1.0, 1.0, 0.0, 0.0, 0.0]


def test_without_speculation_there_are_no_spec_decode_keys(server, tmp_path):
    run = closed.run_sweep(
        server.base_url,
        "m",
        [2],
        BenchSpec(input_tokens=64, output_tokens=4, requests=4, seed=0),
    )
    [path] = closed.save_vllm_results(run, tmp_path)
    assert not [k for k in json.loads(path.read_text()) if k.startswith("spec_decode")]


def test_a_link_is_not_a_results_directory(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with pytest.raises(BadInput, match="links are not followed"):
        closed.check_results_dir(tmp_path / "link")
